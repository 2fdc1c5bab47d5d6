/**
 * Processes are identified by pid *and* start time, never by name: a pid reused by an
 * unrelated process after a crash must never be killed by recovery. Recovery also asks
 * for the run's marker in the process's environment: a log line naming a stranger's pid
 * and start time (a forged one) does not make tron kill it.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { MARKER_ENV } from '../workers/env.ts';

/** The process start time (clock ticks since boot, from /proc/<pid>/stat), or undefined if gone. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); start time is field 22.
    if (rest[0] === 'Z') return undefined;
    return rest[19];
  } catch {
    return undefined;
  }
}

/** Whether the process with this pid is still the one that started at `startTime`. */
export function isSameProcess(pid: number, startTime: string): boolean {
  return processStartTime(pid) === startTime;
}

/** CPU time used so far (utime + stime, clock ticks), or undefined if gone: a sign of life. */
export function processCpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return undefined;
  }
}

/**
 * Whether process `pid` carries `TRON_RUN_MARKER=<marker>` in its environment (as it was
 * when it started: /proc/<pid>/environ). False when it does not, or when it cannot be read.
 */
export function hasMarker(pid: number, marker: string): boolean {
  let env: Buffer;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return false;
  }
  const entry = Buffer.from(`${MARKER_ENV}=${marker}\0`);
  return env.subarray(0, entry.length).equals(entry) || env.includes(Buffer.concat([Buffer.from('\0'), entry]));
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
 */
export function heldOpen(file: string): boolean {
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
