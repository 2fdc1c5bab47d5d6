import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { acquireLock, isHolderAlive, LockHeldError, readLock, type LockHolder } from './lockfile.ts';
import { processStartTime } from '../os/proc.ts';

let dir: string;
let lockPath: string;
const children: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tron-lock-'));
  lockPath = join(dir, 'engine.lock');
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A real process that stays alive until its stdin closes. */
async function liveChild(): Promise<{ child: ChildProcess; pid: number; startTime: string }> {
  const child = spawn('cat', [], { stdio: ['pipe', 'ignore', 'ignore'] });
  children.push(child);
  await once(child, 'spawn');
  const pid = child.pid!;
  const startTime = processStartTime(pid);
  expect(startTime).toMatch(/^\d+$/);
  return { child, pid, startTime: startTime! };
}

/** A real process that ran and exited: its pid and start time as a lock would have recorded them. */
async function deadChild(): Promise<{ pid: number; startTime: string }> {
  const { child, pid, startTime } = await liveChild();
  child.stdin!.end();
  await once(child, 'exit');
  expect(processStartTime(pid)).toBeUndefined();
  return { pid, startTime };
}

function writeHolder(path: string, h: Partial<LockHolder> & { pid: number; startTime: string }): void {
  const holder: LockHolder = { purpose: 'test', command: 'tron start', hostname: hostname(), since: 0, token: 'theirs', ...h };
  writeFileSync(path, `${JSON.stringify(holder)}\n`);
}

describe('acquireLock', () => {
  it('records this process by pid, start time, purpose, command, host and time', () => {
    const lock = acquireLock(lockPath, { purpose: 'the engine of repo x', command: 'tron start', clock: new ManualClock(5) });
    const h = readLock(lockPath)!;
    expect(h).toMatchObject({
      pid: process.pid,
      startTime: processStartTime(process.pid),
      purpose: 'the engine of repo x',
      command: 'tron start',
      hostname: hostname(),
      since: 5,
    });
    expect(h).toEqual(lock.holder);
    expect(isHolderAlive(h)).toBe(true);
    lock.release();
  });

  it('refuses a second acquire while the holder lives, naming its pid, command, start and the fix', () => {
    const lock = acquireLock(lockPath, {
      purpose: 'the event log',
      command: 'tron start --repo ../app',
      clock: new ManualClock(Date.UTC(2026, 0, 2)),
    });
    let err: unknown;
    try {
      acquireLock(lockPath, { purpose: 'the event log', command: 'tron start' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LockHeldError);
    const held = err as LockHeldError;
    expect(held.code).toBe('TRON_LOCKED');
    expect(held.holder.pid).toBe(process.pid);
    expect(held.message).toContain(`TRON_LOCKED: ${lockPath}`);
    expect(held.message).toContain(`pid ${process.pid}`);
    expect(held.message).toContain('`tron start --repo ../app`');
    expect(held.message).toContain('since 2026-01-02T00:00:00.000Z');
    expect(held.message).toContain('stop that process, or wait for it');
    expect(readLock(lockPath)).toEqual(lock.holder);
    lock.release();
  });

  it('refuses when another live process holds the lock', async () => {
    const { pid, startTime } = await liveChild();
    writeHolder(lockPath, { pid, startTime });
    expect(() => acquireLock(lockPath, { purpose: 'x' })).toThrow(`held by pid ${pid} \`tron start\``);
    expect(readLock(lockPath)?.pid).toBe(pid);
  });

  it('takes over at once a lock left by a process that has exited', async () => {
    const { pid, startTime } = await deadChild();
    writeHolder(lockPath, { pid, startTime });
    const lock = acquireLock(lockPath, { purpose: 'x' });
    expect(readLock(lockPath)).toEqual(lock.holder);
    expect(lock.holder.pid).toBe(process.pid);
    lock.release();
  });

  it('takes over a lock whose pid is alive but belongs to a different process (start time differs)', async () => {
    const { pid, startTime } = await liveChild();
    writeHolder(lockPath, { pid, startTime: String(Number(startTime) + 1) });
    const lock = acquireLock(lockPath, { purpose: 'x' });
    expect(readLock(lockPath)?.pid).toBe(process.pid);
    lock.release();
  });

  it('takes over a lock file that is not a holder record', () => {
    writeFileSync(lockPath, 'garbage');
    const lock = acquireLock(lockPath, { purpose: 'x' });
    expect(readLock(lockPath)?.token).toBe(lock.holder.token);
    lock.release();
  });

  it('treats a holder on another host as alive, and says how to clear it', () => {
    writeHolder(lockPath, { pid: 1, startTime: '1', hostname: 'elsewhere.example' });
    expect(() => acquireLock(lockPath, { purpose: 'x' })).toThrow(/on host elsewhere\.example.*delete the lock file/);
  });

  it('refuses while a live process is taking a dead lock over, naming that process', async () => {
    const dead = await deadChild();
    const taker = await liveChild();
    writeHolder(lockPath, dead);
    writeHolder(`${lockPath}.takeover`, { pid: taker.pid, startTime: taker.startTime });
    expect(() => acquireLock(lockPath, { purpose: 'x' })).toThrow(`pid ${taker.pid}`);
  });

  it('clears the guard of a takeover that died half-way, then takes the lock', async () => {
    const dead = await deadChild();
    writeHolder(lockPath, dead);
    writeHolder(`${lockPath}.takeover`, dead);
    const lock = acquireLock(lockPath, { purpose: 'x' });
    expect(readLock(lockPath)?.token).toBe(lock.holder.token);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('leaves no temporary files behind', async () => {
    const dead = await deadChild();
    writeHolder(lockPath, dead);
    const lock = acquireLock(lockPath, { purpose: 'x' });
    expect(() => acquireLock(lockPath, { purpose: 'x' })).toThrow(LockHeldError);
    expect(readdirSync(dir)).toEqual(['engine.lock']);
    lock.release();
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('contention', () => {
  /** A separate process that tries to take the lock when told "go", reports, and holds on until its stdin closes. */
  const CONTENDER = `
    import { createInterface } from 'node:readline';
    import { acquireLock } from ${JSON.stringify(fileURLToPath(new URL('./lockfile.ts', import.meta.url)))};
    const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    console.log('ready');
    await lines.next();
    let lock;
    try { lock = acquireLock(process.argv[1], { purpose: 'contention test' }); console.log('won'); }
    catch (e) { console.log('refused ' + (e.code ?? e.message)); }
    await lines.next();
    lock?.release();
  `;

  it('lets exactly one of several processes racing for a dead lock take it', async () => {
    const dead = await deadChild();
    writeHolder(lockPath, dead);
    const racers = Array.from({ length: 4 }, () => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CONTENDER, lockPath], {
        stdio: ['pipe', 'pipe', 'inherit'],
        // tsx would keep its compile cache in the temporary folder (tsx-<uid>) after the test.
        env: { ...process.env, TSX_DISABLE_CACHE: '1' },
      });
      children.push(child);
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      return { child, next: async () => (await lines.next()).value as string };
    });
    for (const r of racers) expect(await r.next()).toBe('ready');
    for (const r of racers) r.child.stdin!.write('go\n');
    const results = await Promise.all(racers.map((r) => r.next()));
    expect(results.filter((x) => x === 'won')).toHaveLength(1);
    expect(results.filter((x) => x === 'refused TRON_LOCKED')).toHaveLength(3);
    const winner = racers[results.indexOf('won')]!.child.pid;
    expect(readLock(lockPath)?.pid).toBe(winner);
    await Promise.all(
      racers.map((r) => {
        r.child.stdin!.end();
        return once(r.child, 'exit');
      }),
    );
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe('Lock.release', () => {
  it('removes the lock so the next acquire succeeds', () => {
    acquireLock(lockPath, { purpose: 'x' }).release();
    expect(readLock(lockPath)).toBeUndefined();
    acquireLock(lockPath, { purpose: 'x' }).release();
  });

  it('does not remove a lock that another process took over', async () => {
    const lock = acquireLock(lockPath, { purpose: 'x' });
    const other = await liveChild();
    writeHolder(`${lockPath}.new`, { pid: other.pid, startTime: other.startTime });
    renameSync(`${lockPath}.new`, lockPath);
    lock.release();
    expect(readLock(lockPath)?.pid).toBe(other.pid);
  });

  it('does not remove a newer lock of the same process', () => {
    const first = acquireLock(lockPath, { purpose: 'x' });
    first.release();
    const second = acquireLock(lockPath, { purpose: 'x' });
    first.release();
    expect(readFileSync(lockPath, 'utf8')).toContain(second.holder.token);
    second.release();
  });
});
