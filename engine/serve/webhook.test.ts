/**
 * GitHub's webhooks into `tron serve`, over real HTTP: a delivery signed with the secret
 * wakes the engine's forge reads (the wake file changes), a duplicate delivery changes
 * nothing, and an unsigned or wrongly signed one is refused with 401 and wakes nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../core/clock.ts';
import { serveCommand } from '../commands/serve.ts';
import { makeProject } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { signature } from './webhook.ts';

const SECRET = 'webhook-secret-3f9c2a7e11';

let repo: TestRepo | undefined;
let stop: AbortController | undefined;
let running: Promise<number> | undefined;
afterEach(async () => {
  stop?.abort();
  await running;
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
