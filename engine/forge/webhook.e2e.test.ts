/**
 * Webhooks end to end: `tron start` and `tron serve` run (in process) on one repository,
 * with every timer of the forge set to an hour — the issue poll and the wait between
 * asks of a pull request — so only a webhook can make tron read the forge in time. The
 * test acts as GitHub: a person closes an issue, approves a pull request, and GitHub
 * POSTs the signed deliveries to `tron serve`.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { serveCommand } from '../commands/serve.ts';
import { startCommand } from '../commands/start.ts';
import { systemClock } from '../os/clock.ts';
import type { TronEvent } from '../core/events.ts';
import { replay } from '../core/replay.ts';
import { signature } from '../serve/webhook.ts';
import { allRuns } from '../testing/crash.ts';
import { ctx } from '../testing/driver.ts';
import { forgeProject } from '../testing/github/project.ts';
import { ofType } from '../testing/project.ts';
import { until } from '../testing/in-process.ts';
import { stoppableBuilder } from '../testing/workers.ts';

const SECRET = 'whsec-0b7d1e55aa';

describe('webhooks wake tron', () => {
  it('stops a block whose issue was closed and lands an approved pull request as soon as GitHub says so, with every timer at an hour', async () => {
    const p = await forgeProject({
      builder: stoppableBuilder,
      forge: 'land = "pr"\nrequire_human_approval = true\nbackoff = "1h"\n',
      intake: 'poll = "1h"\n',
    });
    onTestFinished(() => p.cleanup());
    p.gh.openIssue({ title: 'Greet', body: '- [ ] greet.txt', labels: ['tron'] });
    p.gh.openIssue({ title: 'A slow one', body: '- [ ] slow.txt', labels: ['tron'] });
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env, TRON_WEBHOOK_SECRET: SECRET };
    const stopServe = new AbortController();
    let listening!: (url: string) => void;
    const ready = new Promise<string>((ok) => {
      listening = ok;
    });
    const serving = serveCommand({
      repo: p.repo.dir,
      port: 0,
      clock: systemClock,
      env,
      print: () => {},
      signal: stopServe.signal,
      onListening: (s) => listening(s.url),
    });
    onTestFinished(async () => {
      stopServe.abort();
      await serving;
    });
    const url = await ready;
    let delivery = 0;
    const deliver = async (event: string, payload: object) => {
      const body = JSON.stringify({ ...payload, repository: { full_name: 'acme/app' } });
      const res = await fetch(`${url}webhooks/github`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': event,
          'x-github-delivery': `delivery-${++delivery}`,
          'x-hub-signature-256': signature(SECRET, body),
        },
        body,
      });
      expect(res.status).toBe(202);
    };
    const events = (): TronEvent[] => allRuns(p.repo).at(-1) ?? [];

    const running = startCommand({ repo: p.repo.dir, clock: systemClock, env, print: () => {} });
    await until(
      () => ofType(events(), 'pr.wait').length > 0 && ofType(events(), 'worker.spawned').some((e) => e.block === 'gh-2-a-slow-one'),
      'the pull request to wait for approval while the slow block builds',
    );
    p.gh.editIssue(2, { state: 'closed', by: 'ada', comment: 'Out of scope.' });
    await deliver('issues', { action: 'closed', issue: { number: 2 } });
    await until(() => ofType(events(), 'issue.withdrawn').length > 0, 'the closed issue to reach tron');
    const pull = p.gh.pulls().find((x) => x.head.ref === 'tron/gh-1-greet')!;
    await p.gh.review(pull.number, { state: 'APPROVED', user: 'ada' });
    await deliver('pull_request_review', { action: 'submitted', pull_request: { number: pull.number } });
    expect(await running).toBe(3);

    const run = events();
    expect(ofType(run, 'block.landed').map((e) => e.block)).toEqual(['gh-1-greet']);
    expect(ofType(run, 'block.abandoned')).toEqual([
      expect.objectContaining({ block: 'gh-2-a-slow-one', reason: expect.stringContaining('ada closed its issue #2') }),
    ]);
    // Woken, tron read the forge once more and recorded what it found: the run replays as any other.
    expect(ofType(run, 'pr.waited').length).toBeGreaterThan(0);
    expect(replay(run, ctx)).toMatchObject({ ok: true });
  });
});
