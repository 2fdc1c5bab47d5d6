/**
 * GitHub's webhooks into `tron serve`, over real HTTP: a delivery signed with the secret
 * wakes the engine's forge reads (the wake file changes), a duplicate delivery changes
 * nothing, and an unsigned or wrongly signed one is refused with 401 and wakes nothing.
 * Senders that are not GitHub — unsigned, oversized, slow, many at once — are refused
 * having had a bounded few bytes read of them, counted on the server's own sockets.
 */
import { existsSync, readFileSync } from 'node:fs';
import { request, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../os/clock.ts';
import { serveCommand } from '../commands/serve.ts';
import { makeProject } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { serve, type Serving } from './server.ts';
import { signature, WEBHOOK_MAX_BYTES, type WebhookOptions } from './webhook.ts';

const SECRET = 'webhook-secret-3f9c2a7e11';

let repo: TestRepo | undefined;
let stop: AbortController | undefined;
let running: Promise<number> | undefined;
let serving: Serving | undefined;
afterEach(async () => {
  stop?.abort();
  await running;
  await serving?.close();
  serving = undefined;
  await repo?.cleanup();
  repo = undefined;
});

/** `tron serve` on a free port with `env`; its URL and everything it printed. */
async function served(env: Record<string, string>): Promise<{ url: string; printed: string[] }> {
  repo = await makeProject({ blocks: { a: {} } });
  stop = new AbortController();
  const printed: string[] = [];
  let listening!: (url: string) => void;
  const ready = new Promise<string>((ok) => {
    listening = ok;
  });
  running = serveCommand({
    repo: repo.dir,
    port: 0,
    clock: systemClock,
    env,
    print: (l) => printed.push(l),
    signal: stop.signal,
    onListening: (s) => listening(s.url),
  });
  return { url: await ready, printed };
}

function post(url: string, body: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${url}webhooks/github`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

const wakeFile = () => join(repo!.dir, '.tron', 'forge', 'wake');
const ISSUE_CLOSED = JSON.stringify({ action: 'closed', issue: { number: 1 }, repository: { full_name: 'acme/app' } });

describe('GitHub webhooks into tron serve', () => {
  it('wakes the engine on a delivery signed with the secret, once per delivery, and never prints the secret', async () => {
    const { url, printed } = await served({ TRON_WEBHOOK_SECRET: SECRET });
    const headers = { 'x-github-event': 'issues', 'x-github-delivery': 'd-1', 'x-hub-signature-256': signature(SECRET, ISSUE_CLOSED) };
    const first = await post(url, ISSUE_CLOSED, headers);
    expect(first.status).toBe(202);
    expect(await first.json()).toEqual({ event: 'issues', delivery: 'd-1', woke: true });
    expect(JSON.parse(readFileSync(wakeFile(), 'utf8'))).toEqual({ event: 'issues', delivery: 'd-1' });
    // GitHub redelivers: the same delivery is answered, and wakes nothing more.
    const again = await post(url, ISSUE_CLOSED, headers);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ duplicate: true, woke: false });
    // An event tron reads nothing of is taken, and wakes nothing; GitHub's ping is answered.
    const star = JSON.stringify({ action: 'created' });
    const starred = await post(url, star, { 'x-github-event': 'star', 'x-hub-signature-256': signature(SECRET, star) });
    expect(await starred.json()).toMatchObject({ woke: false });
    const ping = await post(url, '{}', { 'x-github-event': 'ping', 'x-hub-signature-256': signature(SECRET, '{}') });
    expect(ping.status).toBe(200);
    expect(printed.join('\n')).toContain('webhooks/github');
    expect(printed.join('\n')).not.toContain(SECRET);
  });

  it('refuses an unsigned delivery and one signed with another secret with 401, saying why, and wakes nothing', async () => {
    const { url } = await served({ TRON_WEBHOOK_SECRET: SECRET });
    const unsigned = await post(url, ISSUE_CLOSED, { 'x-github-event': 'issues', 'x-github-delivery': 'd-2' });
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toEqual({
      error: { code: 'TRON_WEBHOOK_SIGNATURE', path: 'X-Hub-Signature-256', message: expect.stringContaining('unsigned') },
    });
    const forged = await post(url, ISSUE_CLOSED, {
      'x-github-event': 'issues',
      'x-github-delivery': 'd-3',
      'x-hub-signature-256': signature('another-secret', ISSUE_CLOSED),
    });
    expect(forged.status).toBe(401);
    const said = (await forged.json()) as { error: { code: string; message: string } };
    expect(said.error.code).toBe('TRON_WEBHOOK_SIGNATURE');
    expect(said.error.message).toContain('TRON_WEBHOOK_SECRET');
    expect(said.error.message).not.toContain(SECRET);
    // The right signature over another body is as wrong.
    const tampered = await post(url, ISSUE_CLOSED.replace('closed', 'opened'), {
      'x-github-event': 'issues',
      'x-hub-signature-256': signature(SECRET, ISSUE_CLOSED),
    });
    expect(tampered.status).toBe(401);
    expect(existsSync(wakeFile())).toBe(false);
  });

  it('refuses every delivery while no secret is set (404), naming the variable to export', async () => {
    const { url } = await served({});
    const res = await post(url, ISSUE_CLOSED, { 'x-github-event': 'issues', 'x-hub-signature-256': signature('', ISSUE_CLOSED) });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({
      error: { code: 'TRON_WEBHOOK_OFF', message: expect.stringContaining('TRON_WEBHOOK_SECRET') },
    });
    expect(existsSync(wakeFile())).toBe(false);
  });
});

/** `tron serve`'s server with webhook options of the test's own; its URL and the bytes its sockets have read. */
async function servedWith(webhook: Omit<WebhookOptions, 'repo' | 'secretEnv'>): Promise<{ url: string; bytesRead: () => number }> {
  repo = await makeProject({ blocks: { a: {} } });
  serving = await serve({
    repo: repo.dir,
    host: '127.0.0.1',
    port: 0,
    clock: systemClock,
    webhook: { secretEnv: 'TRON_WEBHOOK_SECRET', ...webhook },
  });
  return { url: serving.url, bytesRead: bytesReadBy(serving.server) };
}

/** Every byte the server read from its connections, open or closed. */
function bytesReadBy(server: Server): () => number {
  const open = new Set<Socket>();
  let closed = 0;
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.on('close', () => {
      open.delete(s);
      closed += s.bytesRead;
    });
  });
  return () => closed + [...open].reduce((n, s) => n + s.bytesRead, 0);
}

interface Sent {
  status?: number;
  body?: string;
  error?: string;
  sent: number;
  ms: number;
}

/**
 * A POST to the webhook through node's own HTTP client: `body` itself, or that many bytes
 * of filler; with a Content-Length, or chunked; `every` ms between pieces of `chunk` bytes
 * trickles it. Ends when the server answered and the connection closed, or it broke.
 */
function deliver(
  url: string,
  o: { body: string | number; headers: Record<string, string>; chunked?: boolean; chunk?: number; every?: number },
): Promise<Sent> {
  const started = Date.now();
  const text = typeof o.body === 'string' ? Buffer.from(o.body) : undefined;
  const size = text?.length ?? (o.body as number);
  const chunk = o.chunk ?? 64 * 1024;
  const filler = Buffer.alloc(chunk, 'x');
  return new Promise((resolve) => {
    const out: Sent = { sent: 0, ms: 0 };
    const req = request(`${url}webhooks/github`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(o.chunked ? {} : { 'content-length': String(size) }), ...o.headers },
    });
    let over = false;
    req.on('response', (res) => {
      out.status = res.statusCode;
      let said = '';
      res.on('data', (c: Buffer) => {
        said += c.toString();
      });
      res.on('end', () => {
        out.body = said;
      });
      res.on('error', () => {});
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      out.error = err.code ?? err.message;
    });
    req.on('close', () => {
      over = true;
      out.ms = Date.now() - started;
      // The answer's body may still be on its way when the request side closes.
      setTimeout(() => resolve(out), 20);
    });
    void (async () => {
      while (!over && out.sent < size) {
        const n = Math.min(chunk, size - out.sent);
        const piece = text ? text.subarray(out.sent, out.sent + n) : filler.subarray(0, n);
        out.sent += n;
        const flowing = req.write(piece);
        if (o.every) await new Promise((r) => setTimeout(r, o.every));
        else if (!flowing)
          await new Promise<void>((r) => {
            const go = () => {
              req.off('drain', go).off('close', go);
              r();
            };
            req.on('drain', go).on('close', go);
          });
      }
      if (!over) req.end();
    })();
  });
}

const WOKE = JSON.stringify({ action: 'closed', issue: { number: 2 }, repository: { full_name: 'acme/app' } });
const signedHeaders = (body: string) => ({ 'x-github-event': 'issues', 'x-hub-signature-256': signature(SECRET, body) });

describe('GitHub webhooks: senders that are not GitHub get nothing of the server', () => {
  it('refuses eighteen 30 MB deliveries at once — unsigned, malformed, too large, wrongly signed — having read a bounded few MB of them all', async () => {
    const { url, bytesRead } = await servedWith({ secret: SECRET });
    const MB30 = 30 * 1024 * 1024;
    const wrong = `sha256=${'0'.repeat(64)}`;
    const kinds: { want: number; headers: Record<string, string>; chunked?: boolean }[] = [
      ...Array.from({ length: 8 }, () => ({ want: 401, headers: { 'x-github-event': 'issues' } })),
      ...Array.from({ length: 4 }, () => ({ want: 400, headers: { 'x-github-event': 'issues', 'x-hub-signature-256': 'sha1=abc' } })),
      ...Array.from({ length: 2 }, () => ({ want: 413, headers: { 'x-github-event': 'issues', 'x-hub-signature-256': wrong } })),
      // No Content-Length: only the stream's count can stop it, at the cap.
      ...Array.from({ length: 4 }, () => ({
        want: 413,
        chunked: true,
        headers: { 'x-github-event': 'issues', 'x-hub-signature-256': wrong },
      })),
    ];
    const results = await Promise.all(
      kinds.map((k) => deliver(url, { body: MB30, headers: k.headers, ...(k.chunked && { chunked: true }) })),
    );
    for (const [i, r] of results.entries()) {
      // The answer, or — the connection cut while the sender still sent — a reset; never taken.
      if (r.status !== undefined) expect(r.status, `delivery ${i}`).toBe(kinds[i]!.want);
      else expect(r.error, `delivery ${i}`).toMatch(/ECONNRESET|EPIPE/);
    }
    expect(results.filter((r) => r.status !== undefined).length).toBeGreaterThan(0);
    // Of 540 MB sent at it, the server read at most the cap of each chunked one and a little of each other.
    expect(bytesRead()).toBeLessThan(4 * (WEBHOOK_MAX_BYTES + 256 * 1024) + 14 * 256 * 1024);
    expect(existsSync(wakeFile())).toBe(false);
    // And it still answers GitHub at once.
    const ok = await deliver(url, { body: WOKE, headers: signedHeaders(WOKE) });
    expect(ok.status).toBe(202);
    expect(JSON.parse(readFileSync(wakeFile(), 'utf8'))).toEqual({ event: 'issues' });
  }, 60_000);

  it('refuses a body larger than the cap even when it is signed, by its Content-Length before reading it, else at the cap', async () => {
    const { url, bytesRead } = await servedWith({ secret: SECRET, maxBytes: 1000 });
    const big = JSON.stringify({ repository: { full_name: 'acme/app' }, pad: 'y'.repeat(5000) });
    const declared = await post(url, big, signedHeaders(big));
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ error: { code: 'TRON_WEBHOOK_REFUSED', path: 'body' } });
    const before = bytesRead();
    const streamed = await deliver(url, {
      body: 200_000,
      chunked: true,
      chunk: 100,
      every: 1,
      headers: signedHeaders('x'.repeat(200_000)),
    });
    expect(streamed.status ?? streamed.error).toBe(413);
    expect(bytesRead() - before).toBeLessThan(20_000);
    expect(existsSync(wakeFile())).toBe(false);
  }, 30_000);

  it('cuts a sender that trickles its body with 408 within the read timeout, and wakes nothing', async () => {
    const { url } = await servedWith({ secret: SECRET, readTimeoutMs: 300 });
    const slow = await deliver(url, { body: WOKE, chunk: 4, every: 100, headers: signedHeaders(WOKE) });
    expect(slow.status).toBe(408);
    expect(JSON.parse(slow.body!)).toMatchObject({ error: { code: 'TRON_WEBHOOK_REFUSED', path: 'body' } });
    expect(slow.ms).toBeLessThan(2000);
    expect(slow.sent).toBeLessThan(Buffer.byteLength(WOKE));
    expect(existsSync(wakeFile())).toBe(false);
  }, 30_000);

  it('reads only a few deliveries at once: one more gets 503 at once, and the next after them is taken', async () => {
    const { url } = await servedWith({ secret: SECRET, readTimeoutMs: 1500, maxInFlight: 2 });
    const slow = [1, 2].map(() => deliver(url, { body: 'z'.repeat(1000), chunk: 1, every: 50, headers: signedHeaders('z'.repeat(1000)) }));
    await new Promise((r) => setTimeout(r, 200));
    const third = await post(url, WOKE, signedHeaders(WOKE));
    expect(third.status).toBe(503);
    expect(await third.json()).toMatchObject({ error: { code: 'TRON_WEBHOOK_REFUSED' } });
    expect((await Promise.all(slow)).map((r) => r.status)).toEqual([408, 408]);
    const after = await post(url, WOKE, signedHeaders(WOKE));
    expect(after.status).toBe(202);
  }, 30_000);

  it('refuses a signature header that is not sha256 and 64 hex digits with 400, before reading the body', async () => {
    const { url } = await servedWith({ secret: SECRET });
    for (const given of ['sha256=', 'sha1=0123', `sha256=${'g'.repeat(64)}`, `${signature(SECRET, WOKE)}0`]) {
      const res = await post(url, WOKE, { 'x-github-event': 'issues', 'x-hub-signature-256': given });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: 'TRON_WEBHOOK_SIGNATURE', path: 'X-Hub-Signature-256' } });
    }
    expect(existsSync(wakeFile())).toBe(false);
  });
});
