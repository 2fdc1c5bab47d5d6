/**
 * The portable process path (`ps`, `lsof`), for systems without /proc, tested on Linux by
 * asking both sources the same questions and by running tron with TRON_PROC=ps.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import {
  heldOpen,
  isSameProcess,
  killGroup,
  listProcesses,
  parsePsLine,
  parsePsTime,
  procSource,
  processInfo,
  processStartTime,
  type ProcessInfo,
} from './proc.ts';
import { makeProject } from '../testing/project.ts';
import { commandConfig, slowBuilder } from '../testing/workers.ts';
import { BIN } from '../testing/crash.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { readLog } from '../log/eventlog.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A bash script in its own process group; resolves once it printed its first line. */
async function family(script: string): Promise<{ child: ChildProcess; first: string }> {
  const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  cleanups.push(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = (await lines.next()).value as string;
  return { child, first };
}

/** Epoch seconds of a /proc start time (ticks since boot). */
function procStartSeconds(ticks: string): number {
  const btime = Number(
    readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('btime '))!
      .slice(6),
  );
  return btime + Math.floor(Number(ticks) / 100);
}

const byPid = (list: ProcessInfo[]) => new Map(list.map((p) => [p.pid, p]));

/** Runs `work` with TRON_PROC set, as a tron process started with it would see it. */
async function withSource<T>(source: 'ps' | 'proc', work: () => Promise<T> | T): Promise<T> {
  const before = process.env.TRON_PROC;
  process.env.TRON_PROC = source;
  try {
    return await work();
  } finally {
    if (before === undefined) delete process.env.TRON_PROC;
    else process.env.TRON_PROC = before;
  }
}

describe('the ps process path, against /proc', () => {
  it('is chosen by TRON_PROC=ps; /proc stays the default on Linux', () => {
    expect(procSource({})).toBe('proc');
    expect(procSource({ TRON_PROC: 'ps' })).toBe('ps');
    expect(procSource({ TRON_PROC: 'nonsense' })).toBe('proc');
  });

  it('lists the same processes with the same parents, groups and start times', () => {
    const before = byPid(listProcesses('proc'));
    const ps = byPid(listProcesses('ps'));
    const after = byPid(listProcesses('proc'));
    // Only processes that were the same before and after ps: a child that was just forked
    // moves to its own group (setpgid) while the three listings are taken, on a busy machine.
    const stable = [...before.values()].filter((p) => {
      const a = after.get(p.pid);
      return a?.startTime === p.startTime && a.ppid === p.ppid && a.pgid === p.pgid && !p.zombie;
    });
    expect(stable.length).toBeGreaterThan(3);
    const differ: string[] = [];
    for (const p of stable) {
      const q = ps.get(p.pid);
      if (!q) differ.push(`${p.pid}: missing from ps`);
      else if (q.ppid !== p.ppid || q.pgid !== p.pgid) differ.push(`${p.pid}: ${q.ppid}/${q.pgid} vs ${p.ppid}/${p.pgid}`);
      else if (Math.abs(Number(q.startTime.slice(3)) - procStartSeconds(p.startTime)) > 1)
        differ.push(`${p.pid}: started ${q.startTime} vs ${procStartSeconds(p.startTime)}`);
    }
    expect(differ).toEqual([]);
  });

  it("sees a busy process's CPU rise, to the resolution ps gives (whole seconds with Linux's procps)", async () => {
    const { child } = await family('echo up; while :; do :; done');
    const first = processInfo(child.pid!, 'ps')!;
    // A busy machine may give it less than a second per second: wait (bounded) for the rise.
    let ps = first;
    for (let i = 0; i < 50 && ps.cpu <= first.cpu; i++) {
      await sleep(200);
      ps = processInfo(child.pid!, 'ps')!;
    }
    const proc = processInfo(child.pid!, 'proc')!;
    expect(ps.cpu).toBeGreaterThan(first.cpu);
    expect(Math.abs(ps.cpu - proc.cpu)).toBeLessThanOrEqual(150);
  });

  it('knows a process by its start time from either source, and a wrong start time from neither', async () => {
    const { child } = await family('echo up; sleep 30');
    const pid = child.pid!;
    const [fromProc, fromPs] = [processStartTime(pid, 'proc')!, processStartTime(pid, 'ps')!];
    expect(fromPs).toMatch(/^ps:\d+$/);
    for (const source of ['proc', 'ps'] as const) {
      expect(isSameProcess(pid, fromProc, source), `${source} judging a /proc time`).toBe(true);
      expect(isSameProcess(pid, fromPs, source), `${source} judging a ps time`).toBe(true);
      expect(isSameProcess(pid, `ps:${Number(fromPs.slice(3)) - 60}`, source)).toBe(false);
      expect(isSameProcess(1, fromPs, source)).toBe(false);
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(processStartTime(pid, 'ps')).toBeUndefined();
    expect(isSameProcess(pid, fromPs, 'ps')).toBe(false);
  });

  it('finds and signals a whole process group through ps, grandchildren included', async () => {
    const { child, first } = await family('trap "" TERM; sleep 30 & echo $!; wait');
    const grandchild = Number(first);
    const pgid = child.pid!;
    await withSource('ps', async () => {
      const members = () =>
        listProcesses()
          .filter((p) => p.pgid === pgid && !p.zombie)
          .map((p) => p.pid);
      expect(members().sort()).toEqual([pgid, grandchild].sort());
      const start = processStartTime(pgid)!;
      // A start time that is not the group leader's: not ours to signal.
      expect(killGroup(pgid, `ps:${Number(start.slice(3)) - 60}`, 'SIGTERM')).toBe(false);
      expect(killGroup(pgid, start, 'SIGKILL')).toBe(true);
      for (let i = 0; i < 100 && members().length > 0; i += 1) await new Promise((r) => setTimeout(r, 20));
      expect(members()).toEqual([]);
    });
    expect(listProcesses('proc').filter((p) => p.pgid === pgid && !p.zombie)).toEqual([]);
  });

  it('tells whether a file is held open (lsof) as /proc does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-held-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'index.lock');
    writeFileSync(file, '');
    expect([heldOpen(file, 'proc'), heldOpen(file, 'ps')]).toEqual([false, false]);
    const { child } = await family(`exec 3<"${file}"; echo up; sleep 30`);
    expect([heldOpen(file, 'proc'), heldOpen(file, 'ps')]).toEqual([true, true]);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect([heldOpen(file, 'proc'), heldOpen(file, 'ps')]).toEqual([false, false]);
  });
});

describe('reading ps', () => {
  it('reads the TIME formats of procps and of BSD/macOS ps', () => {
    expect(['00:00:03', '0:00.03', '1:02:03', '12:34.56', '2-03:04:05'].map(parsePsTime)).toEqual([300, 3, 372_300, 75_456, 18_384_500]);
  });

  it('reads a line whose start time holds spaces, and a zombie', () => {
    const line = '  4242     1  4242 Ss   00:00:01 Mon Nov 30 10:10:16 2026';
    expect(parsePsLine(line)).toEqual({
      pid: 4242,
      ppid: 1,
      pgid: 4242,
      zombie: false,
      cpu: 100,
      startTime: `ps:${Math.floor(new Date(2026, 10, 30, 10, 10, 16).getTime() / 1000)}`,
    });
    expect(parsePsLine('7 1 7 Z+ 0:00.00 Mon Nov 30 10:10:16 2026')?.zombie).toBe(true);
    expect(parsePsLine('garbage')).toBeUndefined();
  });
});

describe('tron with TRON_PROC=ps', () => {
  it('runs a block to landed, records ps start times, and refuses a second engine on the same repository', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-ps-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const go = join(dir, 'go');
    const repo = await makeProject({ blocks: { widget: {} }, config: commandConfig(slowBuilder(dir, 'working', go)) });
    cleanups.push(() => repo.cleanup());
    const env = { ...GIT_IDENTITY_ENV, TRON_PROC: 'ps' };
    const first = execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false, stdin: 'ignore', env, timeout: 60_000 });
    cleanups.push(async () => {
      first.kill('SIGKILL');
      await first;
    });
    let out = '';
    first.stdout!.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    for (let i = 0; i < 400 && !out.includes('widget: build'); i++) await sleep(50);
    const second = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false, stdin: 'ignore', env });
    expect(second.exitCode).toBe(2);
    expect(second.stderr).toMatch(/TRON_LOCKED: .*engine\.lock: held by pid \d+/);
    writeFileSync(go, '');
    const result = await first;
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(0);
    const runDir = result.stdout.match(/run directory: (\S+)/)![1]!;
    const spawned = readLog(join(runDir, 'events.jsonl')).events.filter((e) => e.type === 'worker.spawned');
    expect(spawned.length).toBeGreaterThan(0);
    for (const e of spawned) expect(e.type === 'worker.spawned' && e.start_time).toMatch(/^ps:\d+$/);
  });
});
