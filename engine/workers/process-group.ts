/**
 * A command worker runs in its own process group (pgid = the worker's pid), so a turn
 * owns every process the worker starts: its CPU counts as the worker's, and stopping the
 * turn stops all of them, grandchildren that ignore SIGTERM included.
 *
 * Members are found in the process table (engine/runtime/proc.ts: /proc, or `ps` where
 * there is none). The number is only signalled while a live member still carries it: a
 * pid still in use as a process group id is not handed out again, so a non-empty group is
 * ours, never a stranger's.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { listProcesses, type ProcessInfo } from '../runtime/proc.ts';

/** The live members of the group; a zombie has finished and can neither work nor be killed. */
function groupStats(pgid: number): ProcessInfo[] {
  return listProcesses().filter((p) => p.pgid === pgid && !p.zombie);
}

/** Pids of the live (not zombie) processes in the process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return groupStats(pgid).map((s) => s.pid);
}

/**
 * CPU used so far by the live members of the group, in hundredths of a second. From /proc
 * it includes what their reaped children used, so a shell running many short commands
 * still shows work; `ps` counts each member's own.
 */
export function groupCpuTicks(pgid: number): number {
  return groupStats(pgid).reduce((sum, s) => sum + s.cpu, 0);
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
