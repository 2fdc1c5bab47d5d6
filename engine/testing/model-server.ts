/**
 * A scripted model server: a real HTTP server on 127.0.0.1 that speaks the Chat
 * Completions wire format (POST /v1/chat/completions) and the Responses API (POST
 * /v1/responses: input items in, output items out — messages and function calls — with
 * usage; as JSON, or as server-sent events when the request asks to stream), so the `openai` worker is tested through the real `openai` client and real
 * sockets instead of a mocked SDK. The same script steps answer on either route. It plays scripted steps in order —
 * assistant messages (with tool calls and usage) or faults (429, 5xx, 401, a dropped
 * socket, a malformed body, a slow answer) — and records every request it receives.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One tool call as the model emits it; `arguments` may be given as an object for convenience. */
export interface ScriptToolCall {
  id?: string;
  type?: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface ScriptUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Prompt tokens read from the cache (part of prompt_tokens, as the API counts them). */
  prompt_tokens_details?: { cached_tokens: number };
}

/** An assistant message. `delayMs` answers that much later (a slow model). */
export interface ReplyStep {
  content?: string | null;
  tool_calls?: ScriptToolCall[];
  usage?: ScriptUsage;
  finish_reason?: string;
  model?: string;
  delayMs?: number;
}

/** An HTTP error answer; `retryAfter` sets the Retry-After header verbatim. */
export interface StatusFault {
  status: number;
  retryAfter?: string;
  message?: string;
  delayMs?: number;
}

/** The socket is destroyed without any response. */
export interface DropFault {
  drop: true;
  delayMs?: number;
}

/** 200 with a body that is not JSON (or, when streaming, an event that is not JSON). */
export interface MalformedFault {
  malformed: true;
  delayMs?: number;
}

export type ScriptStep = ReplyStep | StatusFault | DropFault | MalformedFault;

/** What the server received, for assertions on the messages and tools the client sent. */
export interface RecordedRequest {
  method: string;
  path: string;
  /** The Authorization header, so tests can check which key was sent. */
  authorization: string | undefined;
  /** The parsed JSON body (undefined when it was not JSON). */
  body: any;
}

export type Script = ScriptStep[] | ((request: RecordedRequest, index: number) => ScriptStep);

export interface ModelServer {
  /** Base URL including `/v1`, e.g. `http://127.0.0.1:40123/v1`. */
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/** A tool call step entry: `toolCall('read_file', { path: 'a.txt' })`. */
export function toolCall(name: string, args: Record<string, unknown> | string, id?: string): ScriptToolCall {
  return { id, type: 'function', function: { name, arguments: args } };
}

/** Starts the server on an ephemeral port; `close()` ends open connections and pending timers. */
export async function startModelServer(script: Script): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let played = 0;

  const server = createServer((req, res) => {
    void readBody(req).then((raw) => {
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        authorization: req.headers.authorization,
        body,
      };
      const responses = req.url?.startsWith('/v1/responses') ?? false;
      if (req.method !== 'POST' || !(req.url?.startsWith('/v1/chat/completions') || responses)) {
        return sendError(res, 404, `no route ${req.method} ${req.url}`);
      }
      requests.push(recorded);
      const index = played++;
      let step: ScriptStep | undefined;
      if (typeof script === 'function') step = script(recorded, index);
      else step = script[index];
      if (step === undefined) {
        return sendError(res, 400, `tron model server: script exhausted after ${index} steps`);
      }
      const chosen = step;
      const act = () => (responses ? playResponse(chosen, index, body, res) : play(chosen, index, body, res));
      if (chosen.delayMs) {
        const timer = setTimeout(() => {
          timers.delete(timer);
          act();
        }, chosen.delayMs);
        timers.add(timer);
      } else act();
    });
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', () => resolve(''));
  });
}

function play(step: ScriptStep, index: number, body: any, res: ServerResponse): void {
  if (res.destroyed) return;
  if ('drop' in step) {
    res.socket?.destroy();
    return;
  }
  if ('status' in step) {
    const headers: Record<string, string> = {};
    if (step.retryAfter !== undefined) headers['retry-after'] = step.retryAfter;
    return sendError(res, step.status, step.message ?? `scripted ${step.status}`, headers);
  }
  const streaming = body?.stream === true;
  if ('malformed' in step) {
    if (streaming) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('data: {this is not json\n\n');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"id": "chatcmpl-broken", this is not json');
    }
    return;
  }
  const id = `chatcmpl-${index + 1}`;
  const model = step.model ?? (typeof body?.model === 'string' ? body.model : 'scripted-model');
  const toolCalls = (step.tool_calls ?? []).map((call, i) => ({
    id: call.id ?? `call_${index + 1}_${i + 1}`,
    type: 'function' as const,
    function: {
      name: call.function.name,
      arguments: typeof call.function.arguments === 'string' ? call.function.arguments : JSON.stringify(call.function.arguments),
    },
  }));
  const finish = step.finish_reason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
  const content = step.content ?? null;
  if (streaming) return stream(res, { id, model, content, toolCalls, finish, usage: step.usage, body });
  const message: Record<string, unknown> = { role: 'assistant', content, refusal: null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  sendJson(res, 200, {
    id,
    object: 'chat.completion',
    created: 1_700_000_000 + index,
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    ...(step.usage ? { usage: step.usage } : {}),
  });
}

/** The step as a Responses API answer: a message item for the text, a function_call item per tool call. */
function playResponse(step: ScriptStep, index: number, body: any, res: ServerResponse): void {
  if (res.destroyed) return;
  if ('drop' in step) {
    res.socket?.destroy();
    return;
  }
  if ('status' in step) {
    const headers: Record<string, string> = {};
    if (step.retryAfter !== undefined) headers['retry-after'] = step.retryAfter;
    return sendError(res, step.status, step.message ?? `scripted ${step.status}`, headers);
  }
  const streaming = body?.stream === true;
  if ('malformed' in step) {
    res.writeHead(200, { 'content-type': streaming ? 'text/event-stream' : 'application/json' });
    res.end(streaming ? 'event: response.created\ndata: {this is not json\n\n' : '{"id": "resp-broken", this is not json');
    return;
  }
  const id = `resp_${index + 1}`;
  const model = step.model ?? (typeof body?.model === 'string' ? body.model : 'scripted-model');
  const output: unknown[] = [];
  if (step.content) {
    output.push({
      id: `msg_${index + 1}`,
      type: 'message',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: step.content, annotations: [] }],
    });
  }
  (step.tool_calls ?? []).forEach((call, i) => {
    output.push({
      id: `fc_${index + 1}_${i + 1}`,
      type: 'function_call',
      status: 'completed',
      call_id: call.id ?? `call_${index + 1}_${i + 1}`,
      name: call.function.name,
      arguments: typeof call.function.arguments === 'string' ? call.function.arguments : JSON.stringify(call.function.arguments),
    });
  });
  const u = step.usage;
  const response = {
    id,
    object: 'response',
    created_at: 1_700_000_000 + index,
    status: 'completed',
    model,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: body?.tools ?? [],
    usage: u
      ? {
          input_tokens: u.prompt_tokens,
          input_tokens_details: { cached_tokens: u.prompt_tokens_details?.cached_tokens ?? 0 },
          output_tokens: u.completion_tokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: u.total_tokens,
        }
      : null,
  };
  if (streaming) return streamResponse(res, response, output);
  sendJson(res, 200, response);
}

/**
 * A Responses API answer as server-sent events, as the real API streams it (and as the
 * Codex CLI, which always streams, reads it): created, each output item added (a
 * message's text as a delta) and done, then completed with the whole response.
 */
function streamResponse(res: ServerResponse, response: Record<string, unknown>, output: unknown[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let sequence = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`);
  send('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } });
  output.forEach((item, index) => {
    const it = item as { type: string; id: string; content?: Array<{ text: string }> };
    if (it.type === 'message') {
      send('response.output_item.added', { output_index: index, item: { ...it, status: 'in_progress', content: [] } });
      const text = it.content?.[0]?.text ?? '';
      send('response.content_part.added', {
        output_index: index,
        item_id: it.id,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      });
      send('response.output_text.delta', { output_index: index, item_id: it.id, content_index: 0, delta: text, logprobs: [] });
      send('response.output_text.done', { output_index: index, item_id: it.id, content_index: 0, text, logprobs: [] });
      send('response.content_part.done', { output_index: index, item_id: it.id, content_index: 0, part: it.content?.[0] });
    } else send('response.output_item.added', { output_index: index, item });
    send('response.output_item.done', { output_index: index, item });
  });
  send('response.completed', { response });
  res.end();
}

interface StreamParts {
  id: string;
  model: string;
  content: string | null;
  toolCalls: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  finish: string;
  usage: ScriptUsage | undefined;
  body: any;
}

/** SSE as the real API sends it: the content in pieces, tool calls as indexed deltas, then [DONE]. */
function stream(res: ServerResponse, parts: StreamParts): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id: parts.id,
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: parts.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  });
  const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
  send(chunk({ role: 'assistant', content: '' }));
  if (parts.content) {
    const half = Math.ceil(parts.content.length / 2);
    for (const piece of [parts.content.slice(0, half), parts.content.slice(half)]) {
      if (piece) send(chunk({ content: piece }));
    }
  }
  parts.toolCalls.forEach((call, index) => {
    send(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }));
    send(chunk({ tool_calls: [{ index, function: { arguments: call.function.arguments } }] }));
  });
  send(chunk({}, parts.finish));
  if (parts.usage && parts.body?.stream_options?.include_usage) {
    send({ id: parts.id, object: 'chat.completion.chunk', created: 1_700_000_000, model: parts.model, choices: [], usage: parts.usage });
  }
  res.end('data: [DONE]\n\n');
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { message, type: 'scripted_error', param: null, code: null } }, headers);
}
