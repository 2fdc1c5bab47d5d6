import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { hasMarker, isSameProcess, killGroup, processCpuTicks, processStartTime } from './proc.ts';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Runs a bash script; returns the child and a reader of its stdout lines. */
function bash(script: string, detached = false): { child: ChildProcess; line: () => Promise<string> } {
  const child = spawn('bash', ['-c', script], { stdio: ['pipe', 'pipe', 'inherit'], detached });
  children.push(child);
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    child,
    line: async () => {
      const next = await lines.next();
      if (next.done) throw new Error('the script ended early');
      return next.value;
    },
  };
}

/** Waits (bounded) until the pid no longer names a live process. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (processStartTime(pid) === undefined) return true;
    await sleep(10);
  }
  return false;
}

describe('processStartTime', () => {
  it('reads the start time of this process, the same every time', () => {
    const t = processStartTime(process.pid);
    expect(t).toMatch(/^\d+$/);
    expect(processStartTime(process.pid)).toBe(t);
    expect(Number.isFinite(processCpuTicks(process.pid))).toBe(true);
  });

  it('reads the right field when the process name holds spaces and parentheses', async () => {
    const { child, line } = bash('read go; printf "x) y (z 1 2" > /proc/$$/comm; echo renamed; read end');
    await once(child, 'spawn');
    const before = processStartTime(child.pid!);
    expect(before).toMatch(/^\d+$/);
    child.stdin!.write('go\n');
    expect(await line()).toBe('renamed');
    expect(processStartTime(child.pid!)).toBe(before);
    expect(Number.isFinite(processCpuTicks(child.pid!))).toBe(true);
    child.stdin!.end();
  });

  it('reports a process that has exited as gone', async () => {
    const child = spawn('true');
    children.push(child);
    await once(child, 'exit');
    expect(processStartTime(child.pid!)).toBeUndefined();
    expect(processCpuTicks(child.pid!)).toBeUndefined();
  });
});

describe('isSameProcess', () => {
  it('holds only for the pid together with its own start time', () => {
    const t = processStartTime(process.pid)!;
    expect(isSameProcess(process.pid, t)).toBe(true);
    expect(isSameProcess(process.pid, String(Number(t) + 1))).toBe(false);
  });
});

describe('killGroup', () => {
  it('leaves a process alone when its start time does not match (a reused pid)', async () => {
    const { child } = bash('read end', true);
    await once(child, 'spawn');
    const t = processStartTime(child.pid!)!;
    expect(killGroup(child.pid!, String(Number(t) + 1))).toBe(false);
    expect(isSameProcess(child.pid!, t)).toBe(true);
    child.stdin!.end();
    await once(child, 'exit');
  });

  it('kills the whole process group of the recorded process, grandchildren included', async () => {
    const { child, line } = bash('sleep 30 & echo $!; wait', true);
    const grandchild = Number(await line());
    const t = processStartTime(child.pid!)!;
    expect(processStartTime(grandchild)).toMatch(/^\d+$/);
    const exited = once(child, 'exit');
    expect(killGroup(child.pid!, t)).toBe(true);
    await exited;
    expect(await gone(grandchild)).toBe(true);
    expect(killGroup(child.pid!, t)).toBe(false);
  });
});

describe('hasMarker', () => {
  it("holds only for a process whose environment carries the run's marker, whatever else it carries", async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore', env: { PATH: process.env.PATH, TRON_RUN_MARKER: 'abc123', OTHER: 'x' } });
    children.push(child);
    await once(child, 'spawn');
    expect(hasMarker(child.pid!, 'abc123')).toBe(true);
    expect(hasMarker(child.pid!, 'abc12')).toBe(false);
    expect(hasMarker(process.pid, 'abc123')).toBe(false);
    const first = spawn('sleep', ['30'], { stdio: 'ignore', env: { TRON_RUN_MARKER: 'abc123' } });
    children.push(first);
    await once(first, 'spawn');
    expect(hasMarker(first.pid!, 'abc123')).toBe(true);
    // Where the process table comes from ps (macOS, the BSDs), the environment does too.
    expect(hasMarker(child.pid!, 'abc123', 'ps')).toBe(true);
    expect(hasMarker(child.pid!, 'abc12', 'ps')).toBe(false);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(hasMarker(child.pid!, 'abc123')).toBe(false);
  });
});
