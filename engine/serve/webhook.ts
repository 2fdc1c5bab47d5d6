/**
 * GitHub's webhooks into `tron serve`: `POST /webhooks/github` (docs/forge.md). GitHub
 * cannot send a bearer token, so this path is outside `/api/` and is authenticated by
 * the signature instead: `X-Hub-Signature-256` is the HMAC-SHA256 of the raw body with
 * the webhook's secret (the variable `[forge] webhook_secret_env` names). No signature, a
 * wrong one, or no secret set here: refused (401, 404), and nothing happens. The secret is
 * never printed nor stored.
 *
 * This is the one path meant to face the internet, so an unsigned sender gets nothing of
 * the server: a delivery without a well-formed signature header is refused before a byte
 * of its body is read, and its connection closed. A signed one is hashed as it arrives,
 * read to a cap (1 MiB: see WEBHOOK_MAX_BYTES) within a deadline (5 s), by at most a few
 * deliveries at once; the digests are compared in constant time, and only then is the
 * body parsed. So memory held by webhooks is bounded however many senders come, however
 * large or slow.
 *
 * A delivery only wakes the engine's forge reads early (engine/forge/wake.ts): the
 * issues, pull request, review, check and status events, and the merge queue's. Nothing
 * is recorded here — the engine records what the read that follows finds — so replay
 * holds, a duplicate delivery (GitHub redelivers; `X-GitHub-Delivery` repeats) is
 * answered as one and changes nothing, and a refused one only leaves the next timer read
 * to find the change.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ringWake } from '../forge/wake.ts';

export const WEBHOOK_PATH = '/webhooks/github';

/** The events that can change what tron reads of the forge. */
const WAKING = new Set(['issues', 'pull_request', 'pull_request_review', 'check_run', 'check_suite', 'status', 'merge_group']);

/**
 * The largest body read. GitHub caps a payload at 25 MB, a size only pushes of many refs
 * reach; the events tron takes carry an issue, a pull request, a review or a check run,
 * whose texts GitHub caps at 65,536 characters each (a review's payload holds two: its
 * own and its pull request's) — a few hundred KB at worst. A larger delivery is refused
 * (413), which costs nothing but the wake: the next timer read finds the change.
 */
export const WEBHOOK_MAX_BYTES = 1024 * 1024;

/** The whole body must arrive within this; GitHub itself gives up on a delivery after 10 s. */
export const WEBHOOK_READ_TIMEOUT_MS = 5000;

/** Deliveries read at once; more wait for GitHub's redelivery or the next timer read (503). */
export const WEBHOOK_MAX_IN_FLIGHT = 8;

const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;

export interface WebhookOptions {
  repo: string;
  /** The secret; undefined: webhooks are refused (none set). */
  secret?: string;
  /** The variable it comes from, to name in a refusal (never its value). */
  secretEnv: string;
  /** "owner/name" of [forge]: a delivery about another repository wakes nothing. */
  forgeRepo?: string;
  /** WEBHOOK_MAX_BYTES, WEBHOOK_READ_TIMEOUT_MS, WEBHOOK_MAX_IN_FLIGHT unless given (tests give small ones). */
  maxBytes?: number;
  readTimeoutMs?: number;
  maxInFlight?: number;
}

/** The signature GitHub sends for `body` with `secret`. */
export function signature(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function answer(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  // A body not read to its end is not read at all: the connection goes with the answer.
  if (!req.complete) {
    res.setHeader('connection', 'close');
    res.once('finish', () => {
      if (!req.complete) req.socket.destroy();
    });
  }
  res.writeHead(status);
  res.end(JSON.stringify(body));
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

type Read = { body: Buffer; digest: Buffer } | { refused: 408 | 413 } | { gone: true };

/** Reads the body to its end while hashing it, stopping at `max` bytes or after `ms`. */
function readSigned(req: IncomingMessage, secret: string, max: number, ms: number): Promise<Read> {
  return new Promise((resolve) => {
    const hmac = createHmac('sha256', secret);
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (r: Read) => {
      clearTimeout(timer);
      req.off('data', onData).off('end', onEnd).off('close', onClose);
      if (!('body' in r)) req.pause();
      resolve(r);
    };
    const timer = setTimeout(() => done({ refused: 408 }), ms);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) return done({ refused: 413 });
      hmac.update(chunk);
      chunks.push(chunk);
    };
    const onEnd = () => done({ body: Buffer.concat(chunks, size), digest: hmac.digest() });
    const onClose = () => {
      if (!req.complete) done({ gone: true });
    };
    req.on('error', () => {}); // a sender that hangs up is `gone`, seen on close
    req.on('data', onData).on('end', onEnd).on('close', onClose);
  });
}

export class GitHubWebhooks {
  /** Recent deliveries, oldest first: a redelivery is answered as a duplicate. */
  private readonly seen: string[] = [];
  private inFlight = 0;
  private readonly max: number;
  private readonly timeout: number;
  private readonly maxInFlight: number;

  constructor(private readonly o: WebhookOptions) {
    this.max = o.maxBytes ?? WEBHOOK_MAX_BYTES;
    this.timeout = o.readTimeoutMs ?? WEBHOOK_READ_TIMEOUT_MS;
    this.maxInFlight = o.maxInFlight ?? WEBHOOK_MAX_IN_FLIGHT;
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refuse = (status: number, code: string, path: string, message: string) =>
      answer(req, res, status, { error: { code, path, message } });
    if (req.method !== 'POST')
      return refuse(405, 'TRON_USAGE', WEBHOOK_PATH, `GitHub's webhook deliveries are POSTs; point the webhook at ${WEBHOOK_PATH}`);
    const secret = this.o.secret;
    if (!secret)
      return refuse(
        404,
        'TRON_WEBHOOK_OFF',
        WEBHOOK_PATH,
        `webhooks are off in this tron serve: export ${this.o.secretEnv} with the webhook's secret and start tron serve again`,
      );
    // Everything that can be refused from the headers is, before a byte of the body is read.
    const given = header(req, 'x-hub-signature-256');
    if (given === undefined)
      return refuse(
        401,
        'TRON_WEBHOOK_SIGNATURE',
        'X-Hub-Signature-256',
        `unsigned: give the webhook on GitHub a secret, the same as ${this.o.secretEnv} here; nothing was woken`,
      );
    const hex = SIGNATURE.exec(given)?.[1];
    if (hex === undefined)
      return refuse(
        400,
        'TRON_WEBHOOK_SIGNATURE',
        'X-Hub-Signature-256',
        'not "sha256=" and 64 hex digits, as GitHub sends it; nothing was woken',
      );
    const tooLarge = () =>
      refuse(
        413,
        'TRON_WEBHOOK_REFUSED',
        'body',
        `a webhook payload here is at most ${this.max} bytes; nothing was woken (the next timer read finds the change)`,
      );
    if (Number(header(req, 'content-length') ?? 0) > this.max) return tooLarge();
    if (this.inFlight >= this.maxInFlight)
      return refuse(503, 'TRON_WEBHOOK_REFUSED', WEBHOOK_PATH, `${this.inFlight} deliveries are being read; nothing was woken, try again`);
    this.inFlight++;
    let read: Read;
    try {
      read = await readSigned(req, secret, this.max, this.timeout);
    } finally {
      this.inFlight--;
    }
    if ('gone' in read) return void req.socket.destroy();
    if ('refused' in read)
      return read.refused === 413
        ? tooLarge()
        : refuse(408, 'TRON_WEBHOOK_REFUSED', 'body', `the body did not arrive within ${this.timeout} ms; nothing was woken`);
    if (!timingSafeEqual(read.digest, Buffer.from(hex, 'hex')))
      return refuse(
        401,
        'TRON_WEBHOOK_SIGNATURE',
        'X-Hub-Signature-256',
        `the signature does not match this payload with the secret in ${this.o.secretEnv}: the webhook on GitHub has another secret; nothing was woken`,
      );
    // Signed by whoever holds the secret: only now is the body looked into.
    const body = read.body;
    const event = header(req, 'x-github-event') ?? '';
    const delivery = header(req, 'x-github-delivery');
    if (event === 'ping') return answer(req, res, 200, { event, pong: true });
    if (!WAKING.has(event)) return answer(req, res, 202, { event, woke: false, why: 'tron reads nothing this event changes' });
    if (this.o.forgeRepo) {
      let about: unknown;
      try {
        about = (JSON.parse(body.toString('utf8')) as { repository?: { full_name?: unknown } } | null)?.repository?.full_name;
      } catch {
        return refuse(400, 'TRON_USAGE', 'body', "not JSON: set the webhook's content type to application/json");
      }
      if (typeof about === 'string' && about.toLowerCase() !== this.o.forgeRepo.toLowerCase())
        return answer(req, res, 202, { event, woke: false, why: `about ${about}, not ${this.o.forgeRepo}` });
    }
    if (delivery !== undefined) {
      if (this.seen.includes(delivery)) return answer(req, res, 200, { event, delivery, woke: false, duplicate: true });
      this.seen.push(delivery);
      if (this.seen.length > 1000) this.seen.shift();
    }
    ringWake(this.o.repo, { event, ...(delivery !== undefined && { delivery }) });
    answer(req, res, 202, { event, ...(delivery !== undefined && { delivery }), woke: true });
  }
}
