/**
 * GitHub's webhooks into `tron serve`: `POST /webhooks/github` (docs/forge.md). GitHub
 * cannot send a bearer token, so this path is outside `/api/` and is authenticated by
 * the signature instead: `X-Hub-Signature-256` is the HMAC-SHA256 of the raw body with
 * the webhook's secret (the variable `[forge] webhook_secret_env` names), compared in
 * constant time before the body is parsed. No signature, a wrong one, or no secret set
 * here: refused (401, 404), and nothing happens. The secret is never printed nor stored.
 *
 * A delivery only wakes the engine's forge reads early (engine/forge/wake.ts): the
 * issues, pull request, review, check and status events, and the merge queue's. Nothing
 * is recorded here — the engine records what the read that follows finds — so replay
 * holds and a duplicate delivery (GitHub redelivers; `X-GitHub-Delivery` repeats) is
 * answered as one and changes nothing.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ringWake } from '../forge/wake.ts';

export const WEBHOOK_PATH = '/webhooks/github';

/** The events that can change what tron reads of the forge. */
const WAKING = new Set(['issues', 'pull_request', 'pull_request_review', 'check_run', 'check_suite', 'status', 'merge_group']);

/** GitHub caps a payload at 25 MB. */
const MAX_PAYLOAD = 25 * 1024 * 1024;

export interface WebhookOptions {
  repo: string;
  /** The secret; undefined: webhooks are refused (none set). */
  secret?: string;
  /** The variable it comes from, to name in a refusal (never its value). */
  secretEnv: string;
  /** "owner/name" of [forge]: a delivery about another repository wakes nothing. */
  forgeRepo?: string;
}

/** The signature GitHub sends for `body` with `secret`. */
export function signature(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export class GitHubWebhooks {
  /** Recent deliveries, oldest first: a redelivery is answered as a duplicate. */
  private readonly seen: string[] = [];

  constructor(private readonly o: WebhookOptions) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refuse = (status: number, code: string, path: string, message: string) => answer(res, status, { error: { code, path, message } });
    if (req.method !== 'POST')
      return refuse(405, 'TRON_USAGE', WEBHOOK_PATH, `GitHub's webhook deliveries are POSTs; point the webhook at ${WEBHOOK_PATH}`);
    if (!this.o.secret) {
      req.resume();
      return refuse(
        404,
        'TRON_WEBHOOK_OFF',
        WEBHOOK_PATH,
        `webhooks are off in this tron serve: export ${this.o.secretEnv} with the webhook's secret and start tron serve again`,
      );
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MAX_PAYLOAD) return refuse(413, 'TRON_USAGE', 'body', 'a webhook payload is at most 25 MB');
      chunks.push(c as Buffer);
    }
    const body = Buffer.concat(chunks);
    const given = header(req, 'x-hub-signature-256');
    if (!given)
      return refuse(
        401,
        'TRON_WEBHOOK_SIGNATURE',
        'X-Hub-Signature-256',
        `unsigned: give the webhook on GitHub a secret, the same as ${this.o.secretEnv} here; nothing was woken`,
      );
    const want = Buffer.from(signature(this.o.secret, body));
    const got = Buffer.from(given);
    if (got.length !== want.length || !timingSafeEqual(got, want))
      return refuse(
        401,
        'TRON_WEBHOOK_SIGNATURE',
        'X-Hub-Signature-256',
        `the signature does not match this payload with the secret in ${this.o.secretEnv}: the webhook on GitHub has another secret; nothing was woken`,
      );
    const event = header(req, 'x-github-event') ?? '';
    const delivery = header(req, 'x-github-delivery');
    if (event === 'ping') return answer(res, 200, { event, pong: true });
    if (!WAKING.has(event)) return answer(res, 202, { event, woke: false, why: 'tron reads nothing this event changes' });
    if (this.o.forgeRepo) {
      let about: string | undefined;
      try {
        about = (JSON.parse(body.toString('utf8')) as { repository?: { full_name?: string } }).repository?.full_name;
      } catch {
        return refuse(400, 'TRON_USAGE', 'body', "not JSON: set the webhook's content type to application/json");
      }
      if (about !== undefined && about.toLowerCase() !== this.o.forgeRepo.toLowerCase())
        return answer(res, 202, { event, woke: false, why: `about ${about}, not ${this.o.forgeRepo}` });
    }
    if (delivery !== undefined) {
      if (this.seen.includes(delivery)) return answer(res, 200, { event, delivery, woke: false, duplicate: true });
      this.seen.push(delivery);
      if (this.seen.length > 1000) this.seen.shift();
    }
    ringWake(this.o.repo, { event, ...(delivery !== undefined && { delivery }) });
    answer(res, 202, { event, ...(delivery !== undefined && { delivery }), woke: true });
  }
}
