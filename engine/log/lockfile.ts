/**
 * A lock file held by one live process: one writer per event log, one engine per
 * repository (`.tron/engine.lock`).
 *
 * The holder is named by pid *and* process start time, so a lock left behind by a
 * crash is recognised at once (no stale timeout) even when the pid was reused. Every
 * state the file can be in is a complete JSON document: it is created by writing a
 * temporary file and hard-linking it into place (exclusive), and taken over from a
 * dead holder by renaming a fresh temporary file over it. Processes are known by pid and
 * start time (engine/os/proc.ts: /proc, or `ps` where there is none).
 */
import { closeSync, fsyncSync, linkSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { systemClock, type Clock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import type { InputCode } from '../core/problems.ts';
import { isSameProcess, processStartTime } from '../os/proc.ts';

const holderSchema = z.object({
  pid: z.number().int().positive(),
  startTime: z.string(),
  purpose: z.string(),
  command: z.string().optional(),
  hostname: z.string(),
  since: z.number().describe('ms since the epoch when the lock was taken'),
  token: z.string().describe('tells two locks of one process apart'),
});

/** What a lock file says about its holder. */
export type LockHolder = z.infer<typeof holderSchema>;

/** A held lock. */
export interface Lock {
  readonly path: string;
  readonly holder: LockHolder;
  /** Removes the lock file, only if it is still this lock's (never someone else's). */
  release(): void;
}

/** A live process holds the lock: the message names it and says what to do. */
export class LockHeldError extends InputError {
  readonly code = 'TRON_LOCKED' satisfies InputCode;
  constructor(
    readonly path: string,
    readonly holder: LockHolder,
  ) {
    super([{ code: 'TRON_LOCKED', path, message: describeHolder(holder) }]);
    this.name = 'LockHeldError';
  }
}

function describeHolder(h: LockHolder): string {
  const command = h.command ? `\`${h.command}\`` : '(command not recorded)';
  const since = Number.isFinite(h.since) ? new Date(h.since).toISOString() : 'an unknown time';
  const local = h.hostname === hostname();
  const where = local ? '' : ` on host ${h.hostname}, which this machine cannot check`;
  const fix = local
    ? 'stop that process, or wait for it'
    : `stop that process, or wait for it; if nothing runs there any more, delete the lock file`;
  return `held by pid ${h.pid} ${command} since ${since}${where} (${h.purpose}); ${fix}`;
}

/** Whether the holder is still the process that took the lock. Another host's holder counts as alive. */
export function isHolderAlive(h: LockHolder): boolean {
  if (h.hostname !== hostname()) return true;
  return isSameProcess(h.pid, h.startTime);
}

/** The holder recorded in the lock file, or undefined when there is none (or it is unreadable). */
export function readLock(path: string): LockHolder | undefined {
  const raw = readRaw(path);
  return raw === undefined ? undefined : parseHolder(raw);
}

/**
 * Takes the lock for this process, or throws LockHeldError naming the live holder.
 * A lock whose holder is dead (pid gone, or reused by another process) is taken over.
 */
export function acquireLock(path: string, info: { purpose: string; command?: string; clock?: Clock }): Lock {
  const startTime = processStartTime(process.pid);
  // Only when neither /proc nor `ps` can see this very process (a broken system).
  if (startTime === undefined) throw new Error(`cannot read the start time of this process (pid ${process.pid}) from /proc or ps`);
  const me: LockHolder = {
    pid: process.pid,
    startTime,
    purpose: info.purpose,
    command: info.command ?? process.argv.slice(1).join(' '),
    hostname: hostname(),
    since: (info.clock ?? systemClock).now(),
    token: randomUUID(),
  };
  const raw = `${JSON.stringify(me)}\n`;
  // Each pass ends in a win, a refusal, or a change made by another process; a few
  // passes settle any realistic race.
  for (let pass = 0; pass < 8; pass++) {
    if (createExclusive(path, raw)) return held(path, me, raw);
    const seen = readRaw(path);
    if (seen === undefined) continue; // released meanwhile
    const holder = parseHolder(seen);
    if (holder && isHolderAlive(holder)) throw new LockHeldError(path, holder);
    if (takeOver(path, seen, raw)) return held(path, me, raw);
  }
  const holder = readLock(path);
  if (holder) throw new LockHeldError(path, holder);
  throw new Error(`${path}: the lock kept changing hands while it was being taken; try again`);
}

function held(path: string, holder: LockHolder, raw: string): Lock {
  return {
    path,
    holder,
    release() {
      if (readRaw(path) === raw) {
        unlinkQuiet(path);
        fsyncDir(dirname(path));
      }
    },
  };
}

/**
 * Replaces a dead holder's lock (whose exact text is `seen`) with ours. Contenders for
 * the same dead lock are serialised by an exclusive `<path>.takeover` guard, and the
 * guard holder re-checks that the lock is still the dead one before renaming over it,
 * so two processes can never both believe they took it over.
 */
function takeOver(path: string, seen: string, raw: string): boolean {
  const guard = `${path}.takeover`;
  if (!createExclusive(guard, raw)) {
    const other = readRaw(guard);
    if (other === undefined) return false;
    const taker = parseHolder(other);
    // A live process is taking the lock over right now: it is the holder to name.
    if (taker && isHolderAlive(taker)) throw new LockHeldError(path, taker);
    // A takeover died half-way: clear its guard (only if unchanged) and start again.
    if (readRaw(guard) === other) unlinkQuiet(guard);
    return false;
  }
  try {
    if (readRaw(path) !== seen) return false; // changed hands meanwhile: look again
    const tmp = writeTemp(path, raw);
    renameSync(tmp, path);
    fsyncDir(dirname(path));
    return readRaw(path) === raw;
  } finally {
    if (readRaw(guard) === raw) unlinkQuiet(guard);
  }
}

/** Creates `path` holding `raw` only if it does not exist; the content is complete from the first instant. */
function createExclusive(path: string, raw: string): boolean {
  const tmp = writeTemp(path, raw);
  try {
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    unlinkQuiet(tmp);
  }
  fsyncDir(dirname(path));
  return true;
}

function writeTemp(path: string, raw: string): string {
  const tmp = `${path}.${process.pid}.${randomUUID()}.tmp`;
  const fd = openSync(tmp, 'wx');
  try {
    writeSync(fd, raw);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return tmp;
}

function parseHolder(raw: string): LockHolder | undefined {
  try {
    const parsed = holderSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function readRaw(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Makes a directory entry (creation, rename, removal) durable. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
