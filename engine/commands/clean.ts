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
 *   recovery, `tron status` and `tron answer` read it, and it is where parked blocks wait;
 * - with [remote]: `tron/<id>` branches on the remote that tron itself pushed
 *   (`push_branches`; a run log records the push of exactly that sha) and whose block is
 *   landed, abandoned or gone. A branch anyone else put or moved is never touched: each is
 *   deleted by lease, only if it still points where tron left it.
 *
 * It takes the engine lock first, so it never runs beside an engine (TRON_LOCKED), and
 * `--dry-run` lists the same plan and changes nothing.
 */
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { Clock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import * as git from '../git/index.ts';
import { LockHeldError, acquireLock, isHolderAlive, readLock } from '../log/lockfile.ts';
import { foldRun, latestRun, runsDir } from '../log/runs.ts';
import { readLog } from '../log/eventlog.ts';
import { loadConfig } from '../project/config.ts';
import { GitFailure } from '../git/run.ts';
import { deleteRemoteBranches, openRemote, readRemote, remoteAccess } from '../git/remote.ts';

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
  kind: 'worktree' | 'orphan' | 'run' | 'remote';
  /** A path relative to the repository, or a branch name. */
  name: string;
  why: string;
  /** A remote branch: where tron left it (the lease of its deletion). */
  sha?: string;
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
      o.print(`tron clean: ${verb} ${KIND_WORD[r.kind]} ${r.name} (${r.why})`);
    }
    if (!o.dryRun && plan.some((r) => r.kind === 'worktree')) await git.pruneWorktrees(repo);
    const count = (kind: Removal['kind'], one: string, many: string) => {
      const n = plan.filter((r) => r.kind === kind).length;
      return `${n} ${n === 1 ? one : many}`;
    };
    o.print(
      plan.length === 0
        ? 'tron clean: nothing to clean'
        : `tron clean: ${verb} ${count('worktree', 'worktree', 'worktrees')}, ${count('orphan', 'orphan branch', 'orphan branches')}, ${count('run', 'run directory', 'run directories')}${plan.some((r) => r.kind === 'remote') ? `, ${count('remote', 'remote branch', 'remote branches')}` : ''}${o.dryRun ? '; nothing was changed' : ''}`,
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

  plan.push(...(await staleRemoteBranches(repo, state, o.print)));

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

const KIND_WORD: Record<Removal['kind'], string> = {
  worktree: 'worktree',
  orphan: 'branch',
  run: 'run directory',
  remote: 'remote branch',
};

/** The remote's `tron/<id>` branches tron pushed and no block needs any more (see the file comment). */
async function staleRemoteBranches(
  repo: string,
  state: ReturnType<typeof foldRun> | undefined,
  print: (line: string) => void,
): Promise<Removal[]> {
  const { config } = loadConfig(repo);
  if (!config?.remote) return [];
  const remote = await openRemote(repo, {
    name: config.remote.name,
    trunk: config.trunk,
    timeoutMs: config.remote.timeoutMs,
    access: await remoteAccess(process.env),
  });
  const read = await readRemote(repo, remote);
  if (!read.ok) {
    print(`tron clean: could not read ${remote.name} (${read.reason}); its branches are left as they are: ${read.message}`);
    return [];
  }
  const pushed = new Set<string>();
  const runs = runsDir(repo);
  for (const id of existsSync(runs) ? readdirSync(runs).sort() : []) {
    const log = join(runs, id, 'events.jsonl');
    if (!existsSync(log)) continue;
    for (const e of readLog(log).events) if (e.type === 'remote.branch.pushed' && e.ok) pushed.add(`${e.block} ${e.sha}`);
  }
  const plan: Removal[] = [];
  for (const [id, sha] of read.refs.branches) {
    if (!pushed.has(`${id} ${sha}`)) continue;
    const phase = state?.blocks.get(id)?.phase;
    if (phase !== undefined && phase !== 'landed' && phase !== 'abandoned') continue;
    plan.push({
      kind: 'remote',
      name: `${remote.name}:tron/${id}`,
      why: `tron pushed it at ${sha.slice(0, 12)}; block ${id} is ${phase ?? 'gone'}`,
      sha,
    });
  }
  return plan;
}

async function remove(repo: string, r: Removal): Promise<void> {
  if (r.kind === 'remote') {
    const { config } = loadConfig(repo);
    const remote = await openRemote(repo, {
      name: config!.remote!.name,
      trunk: config!.trunk,
      timeoutMs: config!.remote!.timeoutMs,
      access: await remoteAccess(process.env),
    });
    const id = r.name.slice(r.name.indexOf(':tron/') + ':tron/'.length);
    const gone = await deleteRemoteBranches(repo, remote, [{ id, expected: r.sha! }]);
    // Moved by someone since it was read: theirs now, left alone.
    if (!gone.ok && gone.kind !== 'moved') throw new GitFailure('TRON_GIT_FAILED', `could not delete ${r.name}: ${gone.message}`);
    return;
  }
  if (r.kind === 'worktree') await git.removeWorktree(repo, join(repo, r.name));
  else if (r.kind === 'orphan') await git.deleteBranch(repo, r.name);
  else rmSync(join(repo, r.name), { recursive: true, force: true });
}
