/**
 * Signs of life of a process worker, for the liveness probe ("talk before you page",
 * docs/operating.md): a worker that overruns its budget is not killed on silence alone. The
 * engine takes one snapshot, waits, takes another and compares: the process is alive
 * and it used CPU, wrote output, or changed its worktree.
 *
 * Taking a snapshot reads the system; comparing two is pure, so the decision can be
 * replayed from the recorded snapshots.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isSameProcess } from '../os/proc.ts';
import { treeCpuTicks } from '../os/process-tree.ts';

/** A cheap summary of a worktree that changes when files are written, added or removed. */
export interface WorktreePrint {
  /** Newest mtime (ms) of any file or directory seen. */
  newestMtimeMs: number;
  files: number;
  bytes: number;
}

export interface LifeSnapshot {
  /** The process with that pid and start time still exists. */
  exists: boolean;
  /** CPU ticks of the whole process tree (the worker, its group and its descendants: in a sandbox, bwrap's). */
  cpuTicks: number;
  outputBytes: number;
  worktree: WorktreePrint;
}

export type LifeSign = 'cpu' | 'output' | 'worktree' | 'exited' | 'silent';

/** Directories whose churn says nothing about the worker's progress, and are costly to walk. */
const SKIP = new Set(['.git', 'node_modules']);
/** Entries walked at most: the print must stay cheap on a huge tree. */
const MAX_ENTRIES = 50_000;

/** Walks `cwd` (skipping .git and node_modules) for its newest mtime, file count and size. */
export async function worktreePrint(cwd: string): Promise<WorktreePrint> {
  const print: WorktreePrint = { newestMtimeMs: 0, files: 0, bytes: 0 };
  const pending = [cwd];
  let seen = 0;
  while (pending.length > 0 && seen < MAX_ENTRIES) {
    const dir = pending.pop()!;
    let entries: import('node:fs').Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
      const own = await lstat(dir);
      print.newestMtimeMs = Math.max(print.newestMtimeMs, own.mtimeMs);
    } catch {
      continue; // removed while walking: the next print shows it
    }
    for (const entry of entries) {
      if (++seen > MAX_ENTRIES) break;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIP.has(entry.name)) pending.push(path);
        continue;
      }
      try {
        const st = await lstat(path);
        print.files += 1;
        print.bytes += st.size;
        print.newestMtimeMs = Math.max(print.newestMtimeMs, st.mtimeMs);
      } catch {
        // removed while walking
      }
    }
  }
  return print;
}

/** Reads what can be seen of a worker process now. */
export async function takeSnapshot(input: { pid: number; startTime: string; outputBytes: number; cwd: string }): Promise<LifeSnapshot> {
  const exists = isSameProcess(input.pid, input.startTime);
  return {
    exists,
    cpuTicks: exists ? treeCpuTicks(input.pid) : 0,
    outputBytes: input.outputBytes,
    worktree: await worktreePrint(input.cwd),
  };
}

/**
 * Whether the worker showed life between two snapshots, and which signs it showed:
 * alive when the process still exists and CPU rose, output grew or the worktree changed.
 * Otherwise `['exited']` (the process is gone) or `['silent']`.
 */
export function signsOfLife(before: LifeSnapshot, after: LifeSnapshot): { alive: boolean; signs: LifeSign[] } {
  if (!after.exists) return { alive: false, signs: ['exited'] };
  const signs: LifeSign[] = [];
  if (after.cpuTicks > before.cpuTicks) signs.push('cpu');
  if (after.outputBytes > before.outputBytes) signs.push('output');
  const a = before.worktree;
  const b = after.worktree;
  if (a.newestMtimeMs !== b.newestMtimeMs || a.files !== b.files || a.bytes !== b.bytes) signs.push('worktree');
  return signs.length > 0 ? { alive: true, signs } : { alive: false, signs: ['silent'] };
}
