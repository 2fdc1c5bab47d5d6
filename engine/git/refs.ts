/**
 * Branches and refs the engine owns: `tron/<id>` build branches, `orphan/<id>-<n>`
 * preserved work, and `refs/tron/landed/<id>`, git's own record of what landed (so
 * recovery never lands a block twice, whatever instant the previous run died at).
 */
import { GitFailure, commandFailed, gitOut, runGit, type Sha, withSimpleGit } from './run.ts';
import { revParse } from './query.ts';

export const LANDED_PREFIX = 'refs/tron/landed/';

/** Branches matching `pattern` under refs/heads (e.g. 'tron/*'): name → sha. */
export async function branchesOf(repo: string, pattern: string): Promise<Map<string, Sha>> {
  // Explicitly plain: a color.branch or column.branch in the config would garble the listing.
  const args = ['--list', '--no-abbrev', '--no-color', '--no-column', '--', pattern];
  const summary = await withSimpleGit(repo, `branch ${args.join(' ')}`, false, (git) => git.branch(args));
  const branches = new Map<string, Sha>();
  // A detached HEAD is listed too when it matches, under a made-up name: not a branch.
  for (const b of Object.values(summary.branches)) if (!(b.current && summary.detached)) branches.set(b.name, b.commit);
  return branches;
}

/** Which blocks git records as landed: id → landed sha. */
export async function landedRefs(repo: string): Promise<Map<string, Sha>> {
  // Not branches, so not a simple-git listing: for-each-ref, one `<sha> <refname>` line each.
  const out = await gitOut(repo, ['for-each-ref', '--format=%(objectname) %(refname)', `${LANDED_PREFIX}*`]);
  const refs = new Map<string, Sha>();
  for (const line of out.split('\n')) {
    const space = line.indexOf(' ');
    const name = line.slice(space + 1);
    if (space > 0 && name.startsWith(LANDED_PREFIX)) refs.set(name.slice(LANDED_PREFIX.length), line.slice(0, space));
  }
  return refs;
}

/**
 * Deletes a local branch, whatever it holds; a branch that is already gone is fine.
 * A branch still checked out in a worktree is refused by git: remove the worktree first.
 * With `at` (the commit the caller saw there, its worktree already removed): deleted only
 * if it still points there, else a GitFailure — work added meanwhile is never dropped.
 */
export async function deleteBranch(repo: string, branch: string, at?: Sha): Promise<void> {
  if (at === undefined && (await revParse(repo, `refs/heads/${branch}`)) === undefined) return;
  // Where the caller knows the branch's commit: deleted only if still there (compare-and-swap).
  const args = at === undefined ? ['branch', '-D', '--', branch] : ['update-ref', '-d', `refs/heads/${branch}`, at];
  const result = await runGit(repo, args);
  if (result.exitCode !== 0 && (await revParse(repo, `refs/heads/${branch}`)) !== undefined) {
    throw commandFailed(repo, args, result);
  }
}

/**
 * Keeps unverified work from a previous run as branch `orphan/<id>-<n>` (n = one more
 * than the highest already there, starting at 1), so nothing a worker did is lost when
 * its block is re-dispatched from trunk. Returns the branch name.
 */
export async function preserveOrphan(repo: string, id: string, sha: string): Promise<string> {
  const commit = await revParse(repo, sha);
  if (commit === undefined) throw new GitFailure('TRON_ORPHAN_MISSING', `cannot preserve ${id}: no commit ${sha} in ${repo}`);
  const taken = await branchesOf(repo, `orphan/${id}-*`);
  const pattern = new RegExp(`^orphan/${escapeRegExp(id)}-(\\d+)$`);
  let n = 1;
  for (const name of taken.keys()) {
    const m = pattern.exec(name);
    if (m) n = Math.max(n, Number(m[1]) + 1);
  }
  for (; ; n++) {
    const branch = `orphan/${id}-${n}`;
    // An empty old value means "create only": never overwrite an orphan someone else made.
    const args = ['update-ref', '-m', `tron: preserve unverified work of ${id}`, `refs/heads/${branch}`, commit, ''];
    const result = await runGit(repo, args);
    if (result.exitCode === 0) return branch;
    if ((await revParse(repo, `refs/heads/${branch}`)) === undefined) throw commandFailed(repo, args, result);
  }
}

/**
 * Moves a `refs/tron/landed/<id>` the engine does not believe out of the way, to
 * `refs/tron/untrusted/<id>-<n>` (kept for the operator to look at), in one ref
 * transaction that checks the ref still points at `sha`. Returns the new ref.
 */
export async function setAsideLanded(repo: string, id: string, sha: string): Promise<string> {
  for (let n = 1; ; n++) {
    const kept = `refs/tron/untrusted/${id}-${n}`;
    if ((await revParse(repo, kept)) !== undefined) continue;
    const script = ['start', `create ${kept} ${sha}`, `delete ${LANDED_PREFIX}${id} ${sha}`, 'prepare', 'commit', ''].join('\n');
    const args = ['update-ref', '-m', `tron: ${LANDED_PREFIX}${id} not believed`, '--stdin'];
    const result = await runGit(repo, args, script);
    if (result.exitCode === 0) return kept;
    if ((await revParse(repo, kept)) === undefined) throw commandFailed(repo, args, result);
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** A preserved `orphan/<id>-<n>` branch and when it was made. */
export interface Orphan {
  branch: string;
  sha: Sha;
  /** ms since the epoch: the branch's first reflog entry (when tron preserved it), else its tip's commit date. */
  createdAt: number;
}

/** Every `orphan/*` branch, oldest first. */
export async function orphanBranches(repo: string): Promise<Orphan[]> {
  const out = await gitOut(repo, [
    'for-each-ref',
    '--format=%(objectname) %(committerdate:unix) %(refname:lstrip=2)',
    'refs/heads/orphan/',
  ]);
  const orphans: Orphan[] = [];
  for (const line of out.split('\n').filter(Boolean)) {
    const [sha, committed, branch] = line.split(' ');
    if (!sha || !committed || !branch) continue;
    const reflog = await runGit(repo, ['reflog', 'show', '--date=unix', '--format=%gd', `refs/heads/${branch}`, '--']);
    const first = /@\{(\d+)\}$/.exec(reflog.stdout.trim().split('\n').at(-1) ?? '');
    orphans.push({ branch, sha, createdAt: 1000 * Number(first?.[1] ?? committed) });
  }
  return orphans.sort((a, b) => a.createdAt - b.createdAt || a.branch.localeCompare(b.branch));
}
