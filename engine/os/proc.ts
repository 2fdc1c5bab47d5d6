/**
 * Processes are identified by pid *and* start time, never by name: a pid reused by an
 * unrelated process after a crash must never be killed by recovery. Recovery also asks
 * for the run's marker in the process's environment: a log line naming a stranger's pid
 * and start time (a forged one) does not make tron kill it.
 *
 * Where tron reads single processes of the process table (its sibling process-tree.ts
 * walks whole trees of them from /proc), from one of two sources:
 * - `/proc` (Linux): start times in clock ticks since boot, CPU in ticks, open files by
 *   their descriptors — exact and cheap;
 * - `ps` (and `lsof` for open files), on systems without `/proc` (macOS, the BSDs):
 *   start times to the second (`lstart`, recorded as `ps:<epoch seconds>`), CPU to the
 *   hundredth of a second (`time`).
 * TRON_PROC=ps (or =proc) forces one, so the portable path is tested on Linux. A start
 * time recorded by either source is understood by both, so a lock taken under one is
 * judged correctly under the other.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { MARKER_ENV } from './marker.ts';

export type ProcSource = 'proc' | 'ps';

/** What tron needs to know of one process. */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  /** Finished, waiting to be reaped: it can neither work nor be killed. */
  zombie: boolean;
  /** CPU used, in hundredths of a second (/proc: own and reaped children's; ps: its own). */
  cpu: number;
  /** The start time as recorded in locks and events: clock ticks (/proc) or `ps:<epoch seconds>`. */
  startTime: string;
}

const HAS_PROC = existsSync('/proc/self/stat');

/** Which source this process reads: TRON_PROC when set to `ps` or `proc`, else /proc where it exists. */
export function procSource(env: Readonly<Record<string, string | undefined>> = process.env): ProcSource {
  const forced = env.TRON_PROC;
  if (forced === 'ps' || (forced === 'proc' && HAS_PROC)) return forced;
  return HAS_PROC ? 'proc' : 'ps';
}

// ---- /proc ----

/** Clock ticks per second of /proc's times (USER_HZ: 100 on every Linux tron knows). */
const TICKS_PER_SECOND = 100;
let bootSeconds: number | undefined;

/** The boot time in epoch seconds (/proc/stat btime), to turn start ticks into a wall-clock time. */
function bootTime(): number {
  if (bootSeconds === undefined) {
    const line = readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('btime '));
    bootSeconds = Number(line?.slice(6));
  }
  return bootSeconds;
}

function fromProc(pid: number): ProcessInfo | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), rest[1] field 4 (ppid), rest[2] field 5 (pgrp),
  // rest[11..14] fields 14–17 (utime, stime, cutime, cstime), rest[19] field 22 (start time).
  const ticks = Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]);
  return {
    pid,
    ppid: Number(rest[1]),
    pgid: Number(rest[2]),
    zombie: rest[0] === 'Z' || rest[0] === 'X',
    cpu: Math.round((ticks * 100) / TICKS_PER_SECOND),
    startTime: rest[19] ?? '',
  };
}

function listFromProc(): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const name of safeReaddir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const info = fromProc(Number(name));
    if (info) out.push(info);
  }
  return out;
}

// ---- ps ----

const PS_COLUMNS = 'pid=,ppid=,pgid=,stat=,time=,lstart=';

/** `ps` in the C locale (English month names, a fixed date format). */
function ps(args: string[]): string {
  const r = spawnSync('ps', args, { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C', LANG: 'C' } });
  return r.status === 0 ? r.stdout : '';
}

/** `[[dd-]hh:]mm:ss[.cc]` as hundredths of a second. */
export function parsePsTime(text: string): number {
  const [days, clock] = text.includes('-') ? [Number(text.slice(0, text.indexOf('-'))), text.slice(text.indexOf('-') + 1)] : [0, text];
  const seconds = clock.split(':').reduce((sum, part) => sum * 60 + Number(part), 0);
  return Math.round((days * 86_400 + seconds) * 100);
}

/** One line of `ps -o pid=,ppid=,pgid=,stat=,time=,lstart=` (lstart has spaces: it comes last). */
export function parsePsLine(line: string): ProcessInfo | undefined {
  const parts = line.trim().split(/\s+/);
  if (parts.length < 6) return undefined;
  const [pid, ppid, pgid, stat, time, ...lstart] = parts;
  const started = Date.parse(lstart.join(' '));
  if (!Number.isFinite(started)) return undefined;
  return {
    pid: Number(pid),
    ppid: Number(ppid),
    pgid: Number(pgid),
    zombie: stat!.startsWith('Z'),
    cpu: parsePsTime(time!),
    startTime: `ps:${Math.floor(started / 1000)}`,
  };
}

function fromPs(pid: number): ProcessInfo | undefined {
  return parsePsLine(ps(['-o', PS_COLUMNS, '-p', String(pid)]).split('\n')[0] ?? '');
}

function listFromPs(): ProcessInfo[] {
  return ps(['-A', '-o', PS_COLUMNS])
    .split('\n')
    .map(parsePsLine)
    .filter((p): p is ProcessInfo => p !== undefined);
}

// ---- the interface ----

/** One process, from the given source (default: this system's), or undefined when there is none. */
export function processInfo(pid: number, source: ProcSource = procSource()): ProcessInfo | undefined {
  return source === 'proc' ? fromProc(pid) : fromPs(pid);
}

/** Every process of the system, from the given source. */
export function listProcesses(source: ProcSource = procSource()): ProcessInfo[] {
  return source === 'proc' ? listFromProc() : listFromPs();
}

/** The process start time (see ProcessInfo.startTime), or undefined if it is gone or a zombie. */
export function processStartTime(pid: number, source: ProcSource = procSource()): string | undefined {
  const info = processInfo(pid, source);
  return info && !info.zombie ? info.startTime : undefined;
}

/** A start time as epoch seconds, whichever source recorded it (undefined: ticks without /proc). */
function startSeconds(startTime: string): number | undefined {
  if (startTime.startsWith('ps:')) return Number(startTime.slice(3));
  if (!HAS_PROC || !/^\d+$/.test(startTime)) return undefined;
  return bootTime() + Math.floor(Number(startTime) / TICKS_PER_SECOND);
}

/** Whether the process with this pid is still the one that started at `startTime`. */
export function isSameProcess(pid: number, startTime: string, source: ProcSource = procSource()): boolean {
  const now = processStartTime(pid, source);
  if (now === undefined || startTime === '') return false;
  if (now === startTime) return true;
  // Recorded by the other source: compare wall-clock seconds (lstart rounds, so allow one).
  const [a, b] = [startSeconds(now), startSeconds(startTime)];
  if (a === undefined || b === undefined) return false;
  return (now.startsWith('ps:') || startTime.startsWith('ps:')) && Math.abs(a - b) <= 1;
}

/** CPU time used so far (hundredths of a second), or undefined if gone: a sign of life. */
export function processCpuTicks(pid: number, source: ProcSource = procSource()): number | undefined {
  return processInfo(pid, source)?.cpu;
}

/**
 * Whether process `pid` carries `TRON_RUN_MARKER=<marker>` in its environment (as it was
 * when it started: /proc/<pid>/environ). False when it does not, or when it cannot be read.
 */
export function hasMarker(pid: number, marker: string, source: ProcSource = procSource()): boolean {
  const entry = `${MARKER_ENV}=${marker}`;
  if (source === 'proc') {
    let env: Buffer;
    try {
      env = readFileSync(`/proc/${pid}/environ`);
    } catch {
      return false;
    }
    const exact = Buffer.from(`${entry}\0`);
    return env.subarray(0, exact.length).equals(exact) || env.includes(Buffer.concat([Buffer.from('\0'), exact]));
  }
  // ps prints a process's environment after its command line with `e` (BSD and procps alike).
  const out = spawnSync('ps', ['eww', '-o', 'command=', '-p', String(pid)], { encoding: 'utf8' });
  if (out.status !== 0) return false;
  return out.stdout.split(/\s+/).includes(entry);
}

/**
 * Signals the whole process group led by `pid`, only if that pid is still the process
 * that started at `startTime`. Returns whether a signal was sent.
 */
export function killGroup(pid: number, startTime: string, signal: NodeJS.Signals = 'SIGKILL'): boolean {
  if (!isSameProcess(pid, startTime)) return false;
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }
}

/**
 * Whether any process has `file` open: a git lock file that no process holds is stale
 * (its git was killed) and safe to remove; one that is open belongs to a live git.
 * When it cannot tell (no /proc, no lsof), it says held: a lock is never removed on a guess.
 */
export function heldOpen(file: string, source: ProcSource = procSource()): boolean {
  if (source === 'ps') {
    const r = spawnSync('lsof', ['-t', '--', file], { encoding: 'utf8' });
    if (r.error) return true; // no lsof: cannot tell
    return r.stdout.trim() !== '';
  }
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return true; // cannot tell: assume it is held
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === file) return true;
      } catch {
        // closed meanwhile
      }
    }
  }
  return false;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
