/**
 * The worktrees the engine owns, all under `.tron/worktrees/`: `<id>` is a block's
 * build worktree on branch `tron/<id>`; `<id>.review` is a detached checkout pinned to
 * the attested sha, so a reviewer never sees the live worktree; `_<name>` (block ids
 * cannot start with `_`) are the engine's own checkouts, where it rebases and runs the
 * tests (`_lane`, `_check-<n>`, `_trunk`). Nothing outside that folder is ever created
 * or removed here.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, rm } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { GitFailure, GitStateError, commandFailed, gitOut, isFullSha, runGit, type Sha } from './run.ts';
import { heldOpen } from '../os/proc.ts';
import { revParse } from './query.ts';

export const WORKTREES_DIR = join('.tron', 'worktrees');

/** Where block `id`'s build worktree lives. */
export function worktreePath(repo: string, id: string): string {
  return join(resolve(repo), WORKTREES_DIR, id);
}

/** Where block `id`'s review checkout lives (ids cannot contain '.', so this never collides). */
export function reviewPath(repo: string, id: string): string {
  return join(resolve(repo), WORKTREES_DIR, `${id}.review`);
}

/**
 * Makes block `id`'s build worktree: branch `tron/<id>` at `base`, with no upstream.
 * Leftovers of an earlier run (the folder or the branch) are not touched: deciding
 * whether they hold work to preserve is recovery's job, so this fails with
 * TRON_WORKTREE_EXISTS instead.
 */
export async function createWorktree(repo: string, opts: { id: string; base: string }): Promise<{ path: string; branch: string }> {
  const path = worktreePath(repo, opts.id);
  const branch = `tron/${opts.id}`;
  const leftOver = async (): Promise<GitStateError | undefined> => {
    const branchSha = await revParse(repo, `refs/heads/${branch}`);
    if (!existsSync(path) && branchSha === undefined) return undefined;
    const what = [existsSync(path) ? `folder ${relative(resolve(repo), path)}` : '', branchSha ? `branch ${branch}` : '']
      .filter(Boolean)
      .join(' and ');
    return new GitStateError(
      'TRON_WORKTREE_EXISTS',
      relative(resolve(repo), path),
      `${what} from an earlier run still exist; tron start preserves unverified work as orphan/${opts.id}-<n> ` +
        `by itself — to discard it by hand: \`git worktree remove --force ${relative(resolve(repo), path)}; git branch -D ${branch}\``,
    );
  };
  await clearStaleLocks(repo, opts.id, branch);
  if (existsSync(path)) throw await leftOver();
  // A registration whose folder is gone would make git refuse the path (after making the branch).
  if (await registered(repo, path)) await gitOut(repo, ['worktree', 'prune']);
  // A full object name is checked by `worktree add` itself; a branch left over makes it refuse, changing nothing.
  const base = isFullSha(opts.base) ? opts.base : await resolveCommit(repo, opts.base);
  await mkdir(join(resolve(repo), WORKTREES_DIR), { recursive: true });
  const args = ['worktree', 'add', '--quiet', '--no-track', '-b', branch, path, base];
  const made = await runGit(repo, args);
  if (made.exitCode !== 0) {
    const refused = /already exists/.test(made.stderr) ? await leftOver() : undefined;
    if (refused) throw refused;
    await resolveCommit(repo, base);
    throw commandFailed(repo, args, made);
  }
  return { path, branch };
}

/** Whether git has a worktree registered at `path` (its admin folder's `gitdir` names it), read from the files. */
async function registered(repo: string, path: string): Promise<boolean> {
  const admin = join(await commonDir(repo), 'worktrees');
  const names = await readdir(admin).catch(() => [] as string[]);
  const dotGit = join(resolve(path), '.git');
  for (const name of names) {
    const named = await readFile(join(admin, name, 'gitdir'), 'utf8').catch(() => '');
    if (named.trim() !== '' && resolve(named.trim()) === dotGit) return true;
  }
  return false;
}

/** A fresh detached checkout of exactly `sha` for reviewing block `id`; an old one is replaced. */
export async function createReviewCheckout(repo: string, opts: { id: string; sha: string }): Promise<string> {
  const path = reviewPath(repo, opts.id);
  // A full object name is checked by `worktree add` itself (which refuses anything but a commit).
  const sha = isFullSha(opts.sha) ? opts.sha : await resolveCommit(repo, opts.sha);
  await removeWorktree(repo, path);
  await clearStaleLocks(repo, `${opts.id}.review`);
  await mkdir(join(resolve(repo), WORKTREES_DIR), { recursive: true });
  const args = ['worktree', 'add', '--quiet', '--detach', path, sha];
  const made = await runGit(repo, args);
  if (made.exitCode !== 0) {
    await resolveCommit(repo, sha);
    throw commandFailed(repo, args, made);
  }
  return path;
}

/** Where the engine's own checkout `name` lives (`_lane`, `_check-1`, …). */
export function engineCheckoutPath(repo: string, name: string): string {
  if (!name.startsWith('_')) throw new GitFailure('TRON_WORKTREE_OUTSIDE', `engine checkout names start with '_': ${name}`);
  return join(resolve(repo), WORKTREES_DIR, name);
}

/**
 * Puts the engine's checkout `name` at exactly `sha`, detached, holding nothing but that
 * sha's tree: made once (`worktree add`), then reused — `checkout --detach -f` and
 * `clean -ffdx`, which remove every change and every untracked or ignored file an earlier
 * run left there (build output, node_modules), so what is tested is the commit and nothing
 * else. An interrupted cherry-pick there is dropped first. Returns the path.
 */
export async function checkoutAt(repo: string, name: string, sha: string): Promise<string> {
  const path = engineCheckoutPath(repo, name);
  // A full object name is checked by the checkout itself (which refuses anything but a commit).
  let commit = isFullSha(sha) ? sha : await resolveCommit(repo, sha);
  if (existsSync(join(path, '.git'))) {
    const admin = await adminDir(repo, name);
    if (existsSync(join(admin, 'CHERRY_PICK_HEAD')) || existsSync(join(admin, 'sequencer'))) await runGit(path, ['cherry-pick', '--quit']);
    const moved = await runGit(path, ['checkout', '--quiet', '--detach', '--force', commit]);
    if (moved.exitCode === 0) {
      await gitOut(path, ['clean', '-ffdxq']);
      return path;
    }
    commit = await resolveCommit(repo, commit);
    // A checkout git no longer knows (pruned, or half made by a crash): make it again.
    await removeWorktree(repo, path);
  }
  await clearStaleLocks(repo, name);
  await mkdir(join(resolve(repo), WORKTREES_DIR), { recursive: true });
  await gitOut(repo, ['worktree', 'add', '--quiet', '--detach', path, commit]);
  return path;
}

/**
 * Removes an engine worktree whatever it holds (uncommitted work included), then
 * forgets it; a worktree that is already gone is fine. Refuses paths outside
 * `.tron/worktrees/`, so a bad argument can never delete the user's files.
 */
export async function removeWorktree(repo: string, path: string): Promise<void> {
  const root = join(resolve(repo), WORKTREES_DIR);
  const target = resolve(repo, path);
  const rel = relative(root, target);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new GitFailure('TRON_WORKTREE_OUTSIDE', `refusing to remove ${target}: it is not inside ${root}`);
  }
  if (existsSync(target)) {
    // What `worktree remove --force --force` does, without a process: the folder, then git's record of it.
    const admin = await soundAdmin(repo, target);
    if (admin !== undefined) {
      await rm(target, { recursive: true, force: true });
      await rm(admin, { recursive: true, force: true });
      return;
    }
    // Double force also removes a locked worktree; failure is fine when it was never registered.
    const removed = await runGit(repo, ['worktree', 'remove', '--force', '--force', target]);
    await rm(target, { recursive: true, force: true });
    if (removed.exitCode === 0) return;
  }
  // Its folder is gone but git still lists it: forget it.
  if (await registered(repo, target)) await gitOut(repo, ['worktree', 'prune']);
}

/**
 * Removes lock files a crashed git left behind for worktree `name` (its index and HEAD)
 * and for its `branch`, so a resumed or re-created worktree is not stuck on them. Safe
 * only because the engine holds the repository lock: no git of ours is running there.
 */
export async function clearStaleLocks(repo: string, name: string, branch?: string): Promise<void> {
  const admin = await adminDir(repo, name);
  const locks = [join(admin, 'index.lock'), join(admin, 'HEAD.lock')];
  if (branch !== undefined) locks.push(join(await commonDir(repo), 'refs', 'heads', `${branch}.lock`));
  await Promise.all(locks.map((file) => rm(file, { force: true })));
}

/** The folder the `.git` file of the worktree at `path` names (resolved against it); undefined when there is none. */
async function namedByDotGit(path: string): Promise<string | undefined> {
  const named = /^gitdir: (.*)$/m.exec(await readFile(join(path, '.git'), 'utf8').catch(() => ''))?.[1]?.trim();
  return named ? resolve(path, named) : undefined;
}

/** The worktree's folder inside the common git dir: read from its `.git` file when it exists, else git's default admin name. */
async function adminDir(repo: string, name: string): Promise<string> {
  return (await namedByDotGit(join(resolve(repo), WORKTREES_DIR, name))) ?? join(await commonDir(repo), 'worktrees', name);
}

/** Each folder's common git directory, asked of git once per process: where a repository keeps it does not move. */
const commonDirs = new Map<string, Promise<string>>();

export function commonDir(repo: string): Promise<string> {
  const key = resolve(repo);
  let dir = commonDirs.get(key);
  if (!dir) {
    dir = gitOut(repo, ['rev-parse', '--git-common-dir']).then((out) => resolve(repo, out.trim()));
    // A failure is not remembered: the next call asks again.
    dir.catch(() => commonDirs.delete(key));
    commonDirs.set(key, dir);
  }
  return dir;
}

async function resolveCommit(repo: string, ref: string): Promise<Sha> {
  const sha = await revParse(repo, ref);
  if (sha === undefined) {
    throw commandFailed(repo, ['rev-parse', ref], { exitCode: 1, stdout: '', stderr: `no commit named ${ref}` });
  }
  return sha;
}

/**
 * Forgets worktrees whose folders are gone (git's own bookkeeping; safe at boot), and
 * undoes tron's own `git worktree add`s that were killed half-way: git registers the
 * worktree first, with a lock, then a null HEAD, and a kill there leaves a registration that
 * `git fsck` reports as damage in the user's repository and that prune keeps (it is
 * locked). No worker ever ran in such a folder — it is dispatched only once the
 * worktree is made — so the registration and the folder go.
 */
export async function pruneWorktrees(repo: string): Promise<void> {
  const admin = join(await commonDir(repo), 'worktrees');
  const ours = await realpath(join(resolve(repo), WORKTREES_DIR)).catch(() => join(resolve(repo), WORKTREES_DIR));
  let names: string[] = [];
  try {
    names = await readdir(admin);
  } catch {
    // No worktree was ever registered.
  }
  for (const name of names) {
    // A null HEAD, or none yet (killed between the gitdir and the HEAD git writes): the
    // add did not get as far as a checkout. A made worktree always has its HEAD.
    const head = await readFile(join(admin, name, 'HEAD'), 'utf8').catch(() => '');
    if (!/^0*\s*$/.test(head)) continue;
    const gitdir = (await readFile(join(admin, name, 'gitdir'), 'utf8').catch(() => '')).trim();
    const folder = gitdir ? dirname(resolve(admin, name, gitdir)) : '';
    if (!folder.startsWith(`${ours}${sep}`)) continue;
    await rm(folder, { recursive: true, force: true });
    await rm(join(admin, name), { recursive: true, force: true });
  }
  await gitOut(repo, ['worktree', 'prune']);
}

/**
 * The folder where git keeps its record of the worktree at `path` (`<common dir>/worktrees/<name>`),
 * when the worktree's `.git` file names it and it names the worktree back; else undefined.
 * The `.git` file is the worker's to write: one naming anything else is not believed.
 */
async function soundAdmin(repo: string, path: string): Promise<string | undefined> {
  const admin = await namedByDotGit(resolve(path));
  if (admin === undefined) return undefined;
  if (dirname(admin) !== join(await commonDir(repo), 'worktrees')) return undefined;
  const back = (await readFile(join(admin, 'gitdir'), 'utf8').catch(() => '')).trim();
  return back !== '' && resolve(back) === join(resolve(path), '.git') ? admin : undefined;
}

/** What a worktree's admin folder holds while a git operation is under way in it. */
const UNDER_WAY = ['rebase-merge', 'rebase-apply', 'MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'sequencer', 'BISECT_LOG', 'locked'];

/**
 * Puts block `id`'s build worktree, when it is there and sound, at exactly `sha` on its
 * branch — `reset --hard` and `clean -ffdx`, which drop every change and every untracked or
 * ignored file — instead of removing it and making it again (five git processes and every
 * file written, against two): an agent that built the block holds it where its next job
 * starts. Sound: its `.git` file and git's record of it name each other, HEAD is on
 * `tron/<id>`, and nothing (a rebase, a merge, a lock) is under way there. Returns false
 * when it is not, or a step fails: the caller then makes it afresh.
 */
export async function reuseBuildWorktree(repo: string, id: string, sha: Sha): Promise<boolean> {
  const path = worktreePath(repo, id);
  const admin = await soundAdmin(repo, path);
  if (admin === undefined) return false;
  if ((await readFile(join(admin, 'HEAD'), 'utf8').catch(() => '')).trim() !== `ref: refs/heads/tron/${id}`) return false;
  if (UNDER_WAY.some((f) => existsSync(join(admin, f)))) return false;
  const reset = await runGit(path, ['reset', '--hard', '--quiet', sha]);
  if (reset.exitCode !== 0) return false;
  return (await runGit(path, ['clean', '-ffdxq'])).exitCode === 0;
}

/**
 * Puts a block's worktree back to its branch head after a crash: the engine's stale locks
 * cleared, any rebase or merge the worker had under way aborted, uncommitted changes
 * dropped (uncommitted work is not work). Used for verified work that resumes at review
 * or merge, whose worker will be asked again. A missing folder is made again on the branch.
 */
export async function resetWorktree(repo: string, id: string): Promise<void> {
  const path = worktreePath(repo, id);
  if (!existsSync(path)) {
    // The folder went missing (removed by hand, or mid-creation): attach a fresh one to the branch.
    await gitOut(repo, ['worktree', 'prune']);
    if ((await revParse(repo, `refs/heads/tron/${id}`)) === undefined) return;
    await mkdir(join(resolve(repo), WORKTREES_DIR), { recursive: true });
    await runGit(repo, ['worktree', 'add', '--quiet', path, `tron/${id}`]);
    return;
  }
  await clearStaleLocks(repo, id, `tron/${id}`);
  await runGit(path, ['rebase', '--abort']);
  await runGit(path, ['merge', '--abort']);
  await runGit(path, ['cherry-pick', '--abort']);
  await runGit(path, ['checkout', '-q', '-f', `tron/${id}`]);
  await runGit(path, ['reset', '-q', '--hard']);
  await runGit(path, ['clean', '-q', '-fd']);
}

/**
 * Lock files on the refs only the engine writes — tron/<id> and orphan/<id>-<n> branches,
 * refs/tron/landed/<id> — and packed-refs.lock, left by a git process killed with the
 * engine (or a worker recovery killed). Boot removes them, under the engine lock, once
 * strays are dead, and only when no live process holds them open: a lock a running git
 * holds is never touched. Returns the files removed.
 */
export async function clearEngineRefLocks(repo: string): Promise<string[]> {
  const common = await commonDir(repo);
  const candidates: string[] = [];
  for (const dir of [
    join(common, 'refs', 'heads', 'tron'),
    join(common, 'refs', 'heads', 'orphan'),
    join(common, 'refs', 'tron', 'landed'),
  ]) {
    if (!existsSync(dir)) continue;
    for (const entry of await readdir(dir, { recursive: true })) {
      if (String(entry).endsWith('.lock')) candidates.push(join(dir, String(entry)));
    }
  }
  // Deleting any ref rewrites packed-refs under packed-refs.lock: a killed `git branch -D` leaves it.
  candidates.push(join(common, 'packed-refs.lock'));
  return removeStaleLocks(candidates);
}

/** Removes those of `files` that exist and that no live process holds open; returns them. */
export async function removeStaleLocks(files: readonly string[]): Promise<string[]> {
  const removed: string[] = [];
  for (const file of files) {
    if (!existsSync(file) || heldOpen(file)) continue;
    await rm(file, { force: true });
    removed.push(file);
  }
  return removed;
}
