import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createCommandWorker, type CommandWorker } from './command.ts';
import { silentObserver, type TurnOutcome } from './adapter.ts';
import { signsOfLife, takeSnapshot, worktreePrint, type LifeSnapshot } from './liveness-signs.ts';
import { bwrapSandbox, type Sandbox } from './sandbox.ts';
import { BWRAP, BWRAP_SKIP } from '../testing/bwrap.ts';

let root: string;
beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'tron-liveness-')));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const SESSION = 'builder-b-1';

/** A worker turn running `script` in a fresh directory, with a probe that snapshots it. */
async function startWorker(script: string, sandbox?: Sandbox) {
  const cwd = mkdtempSync(join(root, 'wt-'));
  const worker: CommandWorker = createCommandWorker(
    { adapter: 'command', command: ['sh', '-c', script], env: [], writable: [] },
    { env: { PATH: process.env.PATH }, killGraceMs: 400, ...(sandbox ? { sandbox } : {}) },
  );
  const abort = new AbortController();
  const turn: Promise<TurnOutcome> = worker.runTurn(
    {
      role: 'builder',
      block: 'b',
      session: SESSION,
      turn: 1,
      phase: 'build',
      kind: 'build',
      prompt: '',
      cwd,
      runDir: join(cwd, '.run'),
      timeoutMs: 60_000,
      signal: abort.signal,
    },
    silentObserver,
  );
  while (!worker.running(SESSION)) await delay(10);
  const snapshot = () => takeSnapshot({ ...worker.running(SESSION)!, cwd });
  const stop = async () => {
    abort.abort();
    return turn;
  };
  return { cwd, worker, snapshot, stop, turn };
}

/** Compares snapshots `waitMs` apart until `sign` shows, a few times at most (a busy machine may lag). */
async function probeFor(snapshot: () => Promise<LifeSnapshot>, sign: string) {
  let result = { alive: false, signs: [] as string[] };
  for (let attempt = 0; attempt < 10 && !result.signs.includes(sign); attempt++) {
    const before = await snapshot();
    await delay(250);
    result = signsOfLife(before, await snapshot());
  }
  return result;
}

const quiet: LifeSnapshot = {
  exists: true,
  cpuTicks: 7,
  outputBytes: 120,
  worktree: { newestMtimeMs: 1000, files: 3, bytes: 300 },
};

describe('signs of life', () => {
  it('shows cpu for a process in a busy loop', async () => {
    const w = await startWorker('while :; do :; done');
    const result = await probeFor(w.snapshot, 'cpu');
    await w.stop();
    expect(result.alive).toBe(true);
    expect(result.signs).toContain('cpu');
  });

  it.skipIf(BWRAP_SKIP !== undefined)('shows cpu for a sandboxed worker, which runs in a session of its own under bwrap', async () => {
    const w = await startWorker('while :; do :; done', bwrapSandbox(BWRAP ?? 'bwrap'));
    const result = await probeFor(w.snapshot, 'cpu');
    await w.stop();
    expect(result.alive).toBe(true);
    expect(result.signs).toContain('cpu');
  });

  it('shows output for a process that prints', async () => {
    const w = await startWorker('while :; do echo tick; sleep 0.05; done');
    const result = await probeFor(w.snapshot, 'output');
    await w.stop();
    expect(result.alive).toBe(true);
    expect(result.signs).toContain('output');
  });

  it('shows worktree for a process that writes a file in its cwd', async () => {
    const w = await startWorker('while :; do date >> notes.txt; sleep 0.05; done');
    const result = await probeFor(w.snapshot, 'worktree');
    await w.stop();
    expect(result.alive).toBe(true);
    expect(result.signs).toContain('worktree');
  });

  it('finds a sleeping process silent', async () => {
    const w = await startWorker('exec sleep 100');
    await delay(100); // let it settle into its sleep
    const before = await w.snapshot();
    await delay(300);
    const result = signsOfLife(before, await w.snapshot());
    await w.stop();
    expect(before.exists).toBe(true);
    expect(result).toEqual({ alive: false, signs: ['silent'] });
  });

  it('finds a process that has ended not alive', async () => {
    const w = await startWorker('echo bye');
    const seen = w.worker.running(SESSION)!;
    const before = await takeSnapshot({ ...seen, cwd: w.cwd });
    expect(await w.turn).toEqual({ ok: true, reply: 'bye\n' });
    const after = await takeSnapshot({ ...seen, outputBytes: 4, cwd: w.cwd });
    expect(after.exists).toBe(false);
    expect(signsOfLife(before, after)).toEqual({ alive: false, signs: ['exited'] });
  });

  it('names every sign that changed and none that did not', () => {
    expect(signsOfLife(quiet, { ...quiet, cpuTicks: 8 })).toEqual({ alive: true, signs: ['cpu'] });
    expect(signsOfLife(quiet, { ...quiet, outputBytes: 121 })).toEqual({ alive: true, signs: ['output'] });
    expect(signsOfLife(quiet, { ...quiet, worktree: { ...quiet.worktree, files: 2 } })).toEqual({
      alive: true,
      signs: ['worktree'],
    });
    expect(signsOfLife(quiet, { ...quiet, cpuTicks: 9, outputBytes: 200, worktree: { ...quiet.worktree, bytes: 301 } })).toEqual({
      alive: true,
      signs: ['cpu', 'output', 'worktree'],
    });
    expect(signsOfLife(quiet, quiet)).toEqual({ alive: false, signs: ['silent'] });
    expect(signsOfLife(quiet, { ...quiet, exists: false, cpuTicks: 99 })).toEqual({ alive: false, signs: ['exited'] });
  });

  it('leaves .git and node_modules out of the worktree print', async () => {
    const cwd = mkdtempSync(join(root, 'print-'));
    writeFileSync(join(cwd, 'a.ts'), 'export {};\n');
    const before = await worktreePrint(cwd);
    for (const skipped of ['.git', 'node_modules']) {
      mkdirSync(join(cwd, skipped, 'deep'), { recursive: true });
      writeFileSync(join(cwd, skipped, 'deep', 'x'), 'churn');
    }
    const after = await worktreePrint(cwd);
    expect(after.files).toBe(1);
    expect(after.bytes).toBe(before.bytes);
    writeFileSync(join(cwd, 'b.ts'), 'export {};\n');
    expect((await worktreePrint(cwd)).files).toBe(2);
  });
});
