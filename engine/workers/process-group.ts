/**
 * A command worker runs in its own process group (pgid = the worker's pid), so a turn
 * owns every process the worker starts: its CPU counts as the worker's, and stopping the
 * turn stops all of them, grandchildren that ignore SIGTERM included.
 *
 * Members are found by scanning /proc for the pgid. The number is only signalled while
 * a live member still carries it: Linux does not hand out a pid that is still in use as
 * a process group id, so a non-empty group is ours, never a stranger's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

interface ProcStat {
  pid: number;
  state: string;
  pgid: number;
  /** utime + stime + cutime + cstime: own CPU plus that of reaped children. */
  ticks: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state), rest[2] field 5 (pgrp), rest[11..14] fields 14–17 (times).
    const ticks = Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]);
    return { pid, state: rest[0] ?? '', pgid: Number(rest[2]), ticks };
  } catch {
    return undefined;
  }
}

function groupStats(pgid: number): ProcStat[] {
  const found: ProcStat[] = [];
  for (const name of safeReaddir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readStat(Number(name));
    // A zombie has finished; it only waits to be reaped and can neither work nor be killed.
    if (stat && stat.pgid === pgid && stat.state !== 'Z') found.push(stat);
  }
  return found;
}

/** Pids of the live (not zombie) processes in the process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return groupStats(pgid).map((s) => s.pid);
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * CPU used so far by the live members of the group, in clock ticks. It includes what
 * their reaped children used, so a shell running many short commands still shows work.
 */
export function groupCpuTicks(pgid: number): number {
  return groupStats(pgid).reduce((sum, s) => sum + s.ticks, 0);
}

/** Sends `signal` to the whole group if any live member remains. Returns whether it did. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (groupMembers(pgid).length === 0) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

const POLL_MS = 25;

async function waitEmpty(pgid: number, ms: number): Promise<boolean> {
  for (let waited = 0; ; waited += POLL_MS) {
    if (groupMembers(pgid).length === 0) return true;
    if (waited >= ms) return false;
    await delay(POLL_MS);
  }
}

/**
 * Stops every process of the group: SIGTERM so workers can clean up, then SIGKILL for
 * whatever is still there after `graceMs`. Resolves once the group is empty (or, should
 * the kernel be slow to tear processes down, after a last bounded wait).
 */
export async function stopGroup(pgid: number, graceMs: number): Promise<void> {
  if (!signalGroup(pgid, 'SIGTERM')) return;
  if (await waitEmpty(pgid, graceMs)) return;
  signalGroup(pgid, 'SIGKILL');
  await waitEmpty(pgid, 2000);
}
