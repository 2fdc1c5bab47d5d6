import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { blockFile, project } from '../testing/project.ts';
import { allRuns, BIN } from '../testing/crash.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
import type { TronEvent } from '../core/events.ts';
import { startCommand } from '../commands/start.ts';
import { ManualClock } from '../os/clock.ts';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function watchEngine(repo: TestRepo): ResultPromise {
  const child = execa('node', [BIN, 'start', '--watch', '--repo', repo.dir], {
    reject: false,
    stdin: 'ignore',
    // The engine's own stop is what is tested: no SIGKILL from execa 5 s after our SIGTERM
    // (on a busy machine, stopping the turns and closing the log can take longer).
    forceKillAfterDelay: false,
    env: { ...GIT_IDENTITY_ENV },
  });
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await child;
  });
  return child;
}

/** Waits (bounded) until the current run's log satisfies `done`. */
async function until(repo: TestRepo, done: (events: TronEvent[]) => boolean, what: string): Promise<TronEvent[]> {
  for (let i = 0; i < 600; i += 1) {
    const events = allRuns(repo).at(-1) ?? [];
    if (done(events)) return events;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const landed = (id: string) => (events: TronEvent[]) => events.some((e) => e.type === 'block.phase' && e.block === id && e.to === 'landed');

describe('tron start --watch', () => {
  it('dispatches a block file created while it runs, and stops cleanly on SIGTERM', async () => {
    const builds = (id: string) => `[[blocks.${id}.builder]]\nwrite = { "${id}.txt" = "${id}\\n" }\ncommit = "${id}"\nreply = ">>DONE"\n\n`;
    const repo = await project({ blocks: { first: {} }, sim: builds('first') + builds('second') });
    const child = watchEngine(repo);
    await until(repo, landed('first'), 'first to land');
    writeFileSync(join(repo.dir, '.tron', 'blocks', 'second.md'), blockFile('second', {}));
    const events = await until(repo, landed('second'), 'second to land');
    expect(events.filter((e) => e.type === 'register.loaded')).toHaveLength(2);
    expect(events.some((e) => e.type === 'run.finished')).toBe(false);
    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(143);
    const last = allRuns(repo).at(-1)!.at(-1)!;
    expect(last).toMatchObject({ type: 'run.finished', reason: 'signal', landed: ['first', 'second'] });
  });

  it('consumes an operator answer written while it runs and lands the block', async () => {
    const repo = await project({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"which API?"}'\n\n[[blocks.stuck.builder]]\nwrite = { "stuck.txt" = "done\\n" }\ncommit = "Unstuck"\nreply = ">>DONE"\n`,
    });
    const child = watchEngine(repo);
    await until(repo, (ev) => ev.some((e) => e.type === 'page.sent'), 'the page');
    const answer = await execa('node', [BIN, 'answer', '--repo', repo.dir, 'stuck', '>>RETRY {"guidance":"use the v2 API"}'], {
      reject: false,
    });
    expect(answer.exitCode).toBe(0);
    expect(answer.stdout).toContain('the running engine');
    const events = await until(repo, landed('stuck'), 'stuck to land');
    expect(events.filter((e) => e.type === 'run.started')).toHaveLength(1);
    expect(events.find((e) => e.type === 'operator.answered')).toMatchObject({ word: 'RETRY', payload: { guidance: 'use the v2 API' } });
    child.kill('SIGTERM');
    expect((await child).exitCode).toBe(143);
  });

  it('stops a running turn on SIGTERM, records it, and closes the log with run.finished', async () => {
    const repo = await project({ blocks: { busy: {} }, sim: `[[blocks.busy.builder]]\nhang = true\n` });
    const child = watchEngine(repo);
    await until(repo, (ev) => ev.some((e) => e.type === 'block.dispatched'), 'the dispatch');
    child.kill('SIGTERM');
    const result = await child;
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(143);
    // The stop is said once, not by the signal handler and again by the narration.
    expect(String(result.stdout).match(/SIGTERM — no new work/g)).toEqual(['SIGTERM — no new work']);
    const events = allRuns(repo).at(-1)!;
    const last = events.at(-1)!;
    expect(last).toMatchObject({ type: 'run.finished', reason: 'signal' });
    expect(events.find((e) => e.type === 'reply.received')).toMatchObject({ block: 'busy', ok: false, failure: 'aborted' });
    expect(events.filter((e) => e.type === 'block.dispatched')).toHaveLength(1);
  });
});

describe('tron start --watch, in process', () => {
  it('writes a heartbeat each period its clock passes while it waits, and stops when asked', async () => {
    const repo = await project({ blocks: {} });
    const stop = new AbortController();
    const output: string[] = [];
    const clock = new ManualClock();
    const running = startCommand({
      repo: repo.dir,
      watch: true,
      heartbeatMs: 60_000,
      stop: stop.signal,
      clock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      print: (l) => output.push(l),
    });
    const heartbeats = (ev: TronEvent[]) => ev.filter((e) => e.type === 'run.heartbeat').length;
    // Once recovery is done the heartbeat is armed: none comes before its period has passed.
    await until(repo, (ev) => ev.some((e) => e.type === 'recovery.finished'), 'the run to start');
    clock.advance(59_999);
    expect(heartbeats(allRuns(repo).at(-1)!)).toBe(0);
    clock.advance(60_001);
    await until(repo, (ev) => heartbeats(ev) === 2, 'two heartbeats');
    stop.abort();
    expect(await running).toBe(143);
    const events = allRuns(repo).at(-1)!;
    expect(events.at(-1)).toMatchObject({ type: 'run.finished', reason: 'signal' });
    expect(events.find((e) => e.type === 'run.heartbeat')).toMatchObject({ running: 0, parked: 0 });
  });
});
