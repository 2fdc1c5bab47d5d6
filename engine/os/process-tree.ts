/**
 * Everything a turn or a test run started, found from /proc, so it can be measured and
 * ended as one: the process group, every descendant (a sandbox's processes are children
 * of `bwrap`, in sessions of their own), the processes carrying the run's marker in their
 * environment (`TRON_MARK`, inherited by whatever a worker starts, `setsid` or not) and
 * the processes holding the run's output open (a pipe, which a straggler would otherwise
 * keep the engine waiting on for end-of-file, or the run's log file).
 *
 * A process group alone is not enough: `setsid` leaves it, and a daemonised child is
 * re-parented to init, out of the tree. The sandbox's PID namespace catches all of them;
 * without a sandbox the marker and the pipes are what is left to go by. A process that
 * both scrubs its environment and closes its output still escapes: SECURITY.md says so.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';

/** The variable every process the engine starts for a worker or a test carries. */
export const MARK_VAR = 'TRON_MARK';

/** A fresh marker for one turn, one command or one test run. */
export function newMark(): string {
  return randomBytes(12).toString('hex');
}

interface Proc {
  pid: number;
  ppid: number;
  pgid: number;
  /** utime + stime + cutime + cstime: own CPU plus that of reaped children. */
  ticks: number;
  /** Start time, clock ticks since boot. */
  start: number;
}

function pids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return [];
  }
}

/** Live (not zombie) processes; a zombie has finished and can neither work nor be killed. */
function scan(): Proc[] {
  const found: Proc[] = [];
  for (const pid of pids()) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (rest[0] === 'Z' || rest[0] === 'X') continue;
      const ticks = Number(rest[11]) + Number(rest[12]) + Number(rest[13]) + Number(rest[14]);
      found.push({ pid, ppid: Number(rest[1]), pgid: Number(rest[2]), ticks, start: Number(rest[19]) });
    } catch {
      // gone while scanning
    }
  }
  return found;
}

/** The live members of `root`'s process group and every live descendant of `root`. */
function treeOf(root: number, procs: readonly Proc[]): Proc[] {
  const children = new Map<number, Proc[]>();
  for (const p of procs) {
    const list = children.get(p.ppid);
    if (list) list.push(p);
    else children.set(p.ppid, [p]);
  }
  const seen = new Map<number, Proc>();
  for (const p of procs) if (p.pgid === root) seen.set(p.pid, p);
  const pending = [root, ...seen.keys()];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    for (const child of children.get(pid) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.set(child.pid, child);
      pending.push(child.pid);
    }
  }
  const self = procs.find((p) => p.pid === root);
  if (self) seen.set(root, self);
  return [...seen.values()];
}

/** Pids of `root`, its process group and its descendants, alive now. */
export function treeMembers(root: number): number[] {
  return treeOf(root, scan()).map((p) => p.pid);
}

/**
 * CPU used so far by `root`'s tree (its group and descendants), in clock ticks, reaped
 * children included: a sandboxed worker is a descendant of `bwrap`, not in its group.
 */
export function treeCpuTicks(root: number): number {
  return treeOf(root, scan()).reduce((sum, p) => sum + p.ticks, 0);
}

/** Pids of the processes (among `among`, else all) whose environment carries `TRON_MARK=<mark>`. */
export function markedWith(mark: string, among: readonly number[] = pids()): number[] {
  const needle = Buffer.from(`\0${MARK_VAR}=${mark}\0`);
  const first = Buffer.from(`${MARK_VAR}=${mark}\0`);
  const found: number[] = [];
  for (const pid of among) {
    if (pid === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`);
      if (env.includes(needle) || env.subarray(0, first.length).equals(first)) found.push(pid);
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** What this process's file descriptors `fds` point at (`pipe:[inode]`, a file's path…). */
export function fdTargets(fds: readonly (number | undefined)[]): string[] {
  const names: string[] = [];
  for (const fd of fds) {
    if (fd === undefined || fd < 0) continue;
    try {
      names.push(readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // closed already
    }
  }
  return names;
}

/** Pids of the processes (among `among`, else all; never this one) holding open any of `targets` (pipes, files). */
export function holdersOf(targets: readonly string[], among: readonly number[] = pids()): number[] {
  if (targets.length === 0) return [];
  const wanted = new Set(targets);
  const found: number[] = [];
  for (const pid of among) {
    if (pid === process.pid) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (wanted.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) {
          found.push(pid);
          break;
        }
      } catch {
        // closed meanwhile
      }
    }
  }
  return found;
}

/** What belongs to one turn or test run. */
export interface RunProcesses {
  /** The process the engine spawned (leader of its own group). */
  root: number;
  /** The run's `TRON_MARK` value. */
  mark?: string;
  /** What the run's output goes to (its pipes, its log file; see `fdTargets`): a holder is a straggler. */
  outputs?: readonly string[];
  /**
   * The root's start time (clock ticks since boot, see `processStartTime`): whatever the
   * run started began at or after it, so only those are searched for the marker and the
   * outputs — far fewer reads of /proc than every process on the machine.
   */
  since?: number;
}

/** Every live process of the run now, and whether its process group still has members. */
function members(run: RunProcesses): { pids: number[]; group: boolean } {
  const procs = scan();
  const all = new Set(treeOf(run.root, procs).map((p) => p.pid));
  // The engine's own children are never a run's stragglers (those descend from the root,
  // or were re-parented away from it); one just forked — a git of the engine's, between
  // fork and exec — briefly holds every file the engine has open, the run's log included.
  const younger = procs.filter((p) => p.start >= (run.since ?? 0) && (p.ppid !== process.pid || p.pid === run.root)).map((p) => p.pid);
  if (run.mark) for (const pid of markedWith(run.mark, younger)) all.add(pid);
  if (run.outputs) for (const pid of holdersOf(run.outputs, younger)) all.add(pid);
  all.delete(process.pid);
  return { pids: [...all], group: procs.some((p) => p.pgid === run.root) };
}

/** Every live process of the run now: tree, marked processes, pipe holders. */
export function runMembers(run: RunProcesses): number[] {
  return members(run).pids;
}

function signalAll(run: RunProcesses, signal: NodeJS.Signals): number {
  const now = members(run);
  // The group by its id while a member still carries it (so it is ours, never a
  // stranger's): that takes members that appear while we look.
  if (now.group) {
    try {
      process.kill(-run.root, signal);
    } catch {
      // no group left
    }
  }
  for (const pid of now.pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
  return now.pids.length;
}

const POLL_MS = 25;

async function waitGone(run: RunProcesses, ms: number): Promise<boolean> {
  for (let waited = 0; ; waited += POLL_MS) {
    if (runMembers(run).length === 0) return true;
    if (waited >= ms) return false;
    await delay(POLL_MS);
  }
}

/**
 * Ends every process of the run: SIGTERM so they can clean up, SIGKILL after `graceMs`
 * for whatever is left, and resolves once none is left (or after a last bounded wait).
 */
export async function endRun(run: RunProcesses, graceMs: number): Promise<void> {
  if (signalAll(run, 'SIGTERM') === 0) return;
  if (await waitGone(run, graceMs)) return;
  signalAll(run, 'SIGKILL');
  await waitGone(run, 2000);
}

/** SIGKILLs every process of the run at once (no grace); returns how many there were. */
export function killRun(run: RunProcesses): number {
  return signalAll(run, 'SIGKILL');
}

/**
 * SIGKILLs every process of the run and resolves once none is left (a killed process is
 * gone only when the kernel next runs it: on a busy machine, some milliseconds later), or
 * after `ms`, sending the signal again to any that appeared meanwhile.
 */
export async function killRunAndWait(run: RunProcesses, ms = 2000): Promise<void> {
  for (let waited = 0; killRun(run) > 0 && waited < ms; waited += POLL_MS) await delay(POLL_MS);
}
