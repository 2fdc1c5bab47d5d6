/**
 * A Server-Sent Events reader for tests and the bench: `fetch` with a bearer header (as
 * the dashboard reads the stream), parsed by the rules of the EventSource spec — fields
 * `id`, `event`, `data` (joined by newlines), a blank line ends a message, a line
 * starting with `:` is a comment.
 */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** Reads `url` until `until(message)` is true, the stream ends, or `signal` aborts; returns every message. */
export async function readSse(
  url: string,
  opts: {
    token: string;
    lastEventId?: number;
    signal?: AbortSignal;
    until?: (m: SseMessage) => boolean;
    onMessage?: (m: SseMessage) => void;
  },
): Promise<{ messages: SseMessage[]; status: number }> {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token}`, accept: 'text/event-stream' };
  if (opts.lastEventId !== undefined) headers['last-event-id'] = String(opts.lastEventId);
  const ctl = new AbortController();
  const abort = () => ctl.abort();
  opts.signal?.addEventListener('abort', abort, { once: true });
  const messages: SseMessage[] = [];
  let res: Response;
  try {
    res = await fetch(url, { headers, signal: ctl.signal });
  } catch (err) {
    if (ctl.signal.aborted) return { messages, status: 0 };
    throw err;
  }
  if (!res.ok || !res.body) return { messages, status: res.status };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const m = parseMessage(buf.slice(0, i));
        buf = buf.slice(i + 2);
        if (!m) continue;
        messages.push(m);
        opts.onMessage?.(m);
        if (opts.until?.(m)) {
          ctl.abort();
          return { messages, status: res.status };
        }
      }
    }
  } catch (err) {
    if (!ctl.signal.aborted) throw err;
  } finally {
    opts.signal?.removeEventListener('abort', abort);
  }
  return { messages, status: res.status };
}

function parseMessage(text: string): SseMessage | undefined {
  let id: string | undefined;
  let event = 'message';
  const data: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  return { ...(id !== undefined ? { id } : {}), event, data: data.join('\n') };
}
