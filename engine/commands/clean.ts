/**
 * `tron clean [--dry-run] [--all] [--keep N]`: removes what runs leave behind and no run
 * still needs —
 *
 * - worktrees under `.tron/worktrees/` whose block is not in flight: its build worktree
 *   once it is landed or abandoned (or gone from the register), and every review or
 *   trunk checkout (the engine makes those afresh). A parked block keeps its worktree for
 *   the operator to look at; a block the next `tron start` resumes keeps it too. Only
 *   uncommitted changes go with a worktree: its branch and commits stay;
 * - `orphan/<id>-<n>` branches (unverified work recovery preserved) older than two weeks,
 *   or all of them with `--all`;
 * - run directories beyond the newest N (default 10); the latest run is always kept —
 *   recovery, `tron status` and `tron answer` read it, and it is where parked blocks wait.
 *
 * It takes the engine lock first, so it never runs beside an engine (TRON_LOCKED), and
 * `--dry-run` lists the same plan and changes nothing.
 */
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { Clock } from '../core/clock.ts';
import { InputError } from '../core/errors.ts';
import * as git from '../git/index.ts';
import { LockHeldError, acquireLock, isHolderAlive, readLock } from '../log/lockfile.ts';
import { foldRun, latestRun, runsDir } from '../log/runs.ts';

/** Orphan branches younger than this are kept unless `--all`. */
export const ORPHAN_MAX_AGE_MS = 14 * 24 * 3_600_000;
export const DEFAULT_KEEP = 10;

export interface CleanOptions {
  repo: string;
  dryRun: boolean;
  all: boolean;
  /** Run directories to keep, newest first (at least 1). */
  keep?: number;
  clock: Clock;
  print: (line: string) => void;
}

/** One thing to remove, and why it may go. */
interface Removal {
  kind: 'worktree' | 'orphan' | 'run';
  /** A path relative to the repository, or a branch name. */
  name: string;
  why: string;
}

/** `--keep N`: a whole number of at least 1. */
export function parseKeep(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1) {
    throw new InputError([
      {
        code: 'TRON_USAGE',
        path: '--keep',
        message: `"${text}" is not a number of runs to keep; give a whole number of at least 1 (the latest run is always kept: the next tron start recovers from it)`,
      },
    ]);
  }
  return n;
}

export async function cleanCommand(o: CleanOptions): Promise<number> {
  const repo = resolve(o.repo);
  if (!existsSync(join(repo, '.git'))) {
    throw new InputError([
      { code: 'TRON_NOT_A_REPO', path: repo, message: 'is not a git repository; point --repo at the repository tron runs on' },
    ]);
  }
  const lockFile = join(repo, '.tron', 'engine.lock');
  // A dry run only looks; it refuses like a real one, so what it lists is what a real one would do.
  let release = () => {};
  if (o.dryRun) {
    const holder = readLock(lockFile);
    if (holder && isHolderAlive(holder)) throw new LockHeldError(lockFile, holder);
  } else if (existsSync(join(repo, '.tron'))) {
    const lock = acquireLock(lockFile, { purpose: `tron clean of ${repo}`, command: 'tron clean', clock: o.clock });
    release = () => lock.release();
  }
  try {
    const plan = await planClean(repo, o);
    const verb = o.dryRun ? 'would remove' : 'removed';
    for (const r of plan) {
      if (!o.dryRun) await remove(repo, r);
      o.print(
        `tron clean: ${verb} ${r.kind === 'orphan' ? 'branch' : r.kind === 'run' ? 'run directory' : 'worktree'} ${r.name} (${r.why})`,
      );
    }
    if (!o.dryRun && plan.some((r) => r.kind === 'worktree')) await git.pruneWorktrees(repo);
    const count = (kind: Removal['kind'], one: string, many: string) => {
      const n = plan.filter((r) => r.kind === kind).length;
      return `${n} ${n === 1 ? one : many}`;
    };
    o.print(
      plan.length === 0
        ? 'tron clean: nothing to clean'
        : `tron clean: ${verb} ${count('worktree', 'worktree', 'worktrees')}, ${count('orphan', 'orphan branch', 'orphan branches')}, ${count('run', 'run directory', 'run directories')}${o.dryRun ? '; nothing was changed' : ''}`,
    );
    return 0;
  } finally {
    release();
  }
}

/** What a clean removes, in order: worktrees, orphan branches, run directories. */
async function planClean(repo: string, o: CleanOptions): Promise<Removal[]> {
  const latest = latestRun(repo);
  const state = latest ? foldRun(latest) : undefined;
  const plan: Removal[] = [];

  const worktrees = join(repo, git.WORKTREES_DIR);
  if (existsSync(worktrees)) {
    for (const name of readdirSync(worktrees).sort()) {
      const rel = relative(repo, join(worktrees, name));
      if (name.endsWith('.review')) {
        plan.push({ kind: 'worktree', name: rel, why: 'a review or trunk checkout; the engine makes it afresh when needed' });
        continue;
      }
      const phase = state?.blocks.get(name)?.phase;
      if (phase === 'landed' || phase === 'abandoned') plan.push({ kind: 'worktree', name: rel, why: `block ${name} is ${phase}` });
      else if (phase === undefined) plan.push({ kind: 'worktree', name: rel, why: `no block ${name} in the latest run` });
    }
  }

  const now = o.clock.now();
  for (const orphan of await git.orphanBranches(repo)) {
    const age = now - orphan.createdAt;
    if (o.all) plan.push({ kind: 'orphan', name: orphan.branch, why: `--all; at ${orphan.sha.slice(0, 12)}` });
    else if (age > ORPHAN_MAX_AGE_MS)
      plan.push({
        kind: 'orphan',
        name: orphan.branch,
        why: `preserved ${Math.floor(age / 86_400_000)} days ago; at ${orphan.sha.slice(0, 12)}`,
      });
  }

  const runs = runsDir(repo);
  if (existsSync(runs)) {
    const ids = readdirSync(runs, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name)
      .sort();
    const keep = o.keep ?? DEFAULT_KEEP;
    const kept = new Set(ids.slice(-keep));
    if (latest) kept.add(relative(runs, latest));
    for (const id of ids) {
      if (!kept.has(id)) plan.push({ kind: 'run', name: relative(repo, join(runs, id)), why: `older than the newest ${keep}` });
    }
  }
  return plan;
}

async function remove(repo: string, r: Removal): Promise<void> {
  if (r.kind === 'worktree') await git.removeWorktree(repo, join(repo, r.name));
  else if (r.kind === 'orphan') await git.deleteBranch(repo, r.name);
  else rmSync(join(repo, r.name), { recursive: true, force: true });
}
