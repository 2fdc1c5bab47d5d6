/**
 * Read-only questions the engine asks git to derive facts (the truth gate never trusts
 * a claim): where refs point, what a branch adds, whether a tree is clean, whether a
 * rebase changed the patch. Nothing here changes the repository.
 */
import type { StatusResult } from 'simple-git';
import { keepParentLines, keepPatch, knownAncestor, knownPatch } from './known.ts';
import { resolveCommitName } from './resolver.ts';
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DIFF_FLAGS, GitStateError, commandFailed, gitDirsOf, gitOut, isFullSha, runGit, type Sha, withSimpleGit } from './run.ts';

/** The commit `ref` names, or undefined when there is no such commit. */
export async function revParse(repo: string, ref: string): Promise<Sha | undefined> {
  const answer = await resolveCommitName(repo, ref);
  if (answer !== 'unsure') return answer;
  const args = ['rev-parse', '--verify', '--quiet', '--end-of-options', `${ref}^{commit}`];
  const result = await runGit(repo, args);
  if (result.exitCode === 0) return result.stdout.trim();
  if (result.exitCode === 1 && result.stderr.trim() === '') return undefined;
  throw commandFailed(repo, args, result);
}

/** Where trunk points now; a missing trunk is the user's configuration to fix. */
export async function currentTrunkSha(repo: string, trunk: string): Promise<Sha> {
  const sha = await revParse(repo, `refs/heads/${trunk}`);
  if (sha === undefined) {
    throw new GitStateError(
      'TRON_TRUNK_MISSING',
      '.tron/config.toml: trunk',
      `the trunk branch "${trunk}" does not exist in ${repo}; set trunk to an existing branch ` +
        `(see \`git branch --list\`) or create it with \`git branch ${trunk} <commit>\``,
    );
  }
  return sha;
}

/**
 * The commit checked out in working tree `dir` and the commit trunk names, by one
 * process (a gate asks both first); either missing: asked as headOf and revParse do.
 */
export async function headAndTrunk(dir: string, trunk: string): Promise<{ head: Sha; trunk: Sha | undefined }> {
  // Both arguments start with a name, never a dash: no option can hide in them.
  const both = await runGit(dir, ['rev-parse', 'HEAD^{commit}', `refs/heads/${trunk}^{commit}`]);
  const [head, at] = both.stdout.split('\n');
  if (both.exitCode === 0 && isFullSha(head) && isFullSha(at)) return { head, trunk: at };
  return { head: await headOf(dir), trunk: await revParse(dir, `refs/heads/${trunk}`) };
}

/** The commit checked out in working tree `dir`. */
export async function headOf(dir: string): Promise<Sha> {
  return (await gitOut(dir, ['rev-parse', '--verify', 'HEAD^{commit}'])).trim();
}

/** The commits `head` adds over `base` (base..head), oldest first; their parents are kept (known.ts) for the lane. */
export async function commitsOver(repo: string, base: string, head: string): Promise<Sha[]> {
  const listed = await gitOut(repo, ['rev-list', '--topo-order', '--reverse', '--parents', `${base}..${head}`, '--']);
  keepParentLines(repo, listed);
  return listed
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[0]!);
}

/** `ref`'s first-parent history, newest first, as `<short sha> <subject>` lines (what `git log --oneline` shows). */
export async function firstParentLog(repo: string, ref: string): Promise<string[]> {
  // simple-git passes a key whose value is null as a bare argument: here the revision.
  const options = { format: { sha: '%h', subject: '%s' }, '--first-parent': null, [ref]: null };
  const log = await withSimpleGit(repo, `log --first-parent ${ref}`, false, (git) => git.log(options));
  return log.all.map((c) => `${c.sha} ${c.subject}`);
}

/**
 * Whether working tree `dir` has no changes: staged, unstaged, or untracked files
 * (ignored files do not count). `status` is the porcelain listing, for messages.
 */
export async function isClean(dir: string): Promise<{ clean: boolean; status: string }> {
  const status = await statusOf(dir, 'all');
  return { clean: status === '', status };
}

/**
 * The porcelain (v1) listing of working tree `dir`'s changes, one `XY path` line each;
 * untracked files listed (`all`) or not (`no`). "" when there are none.
 */
export async function statusOf(dir: string, untracked: 'all' | 'no'): Promise<string> {
  const args = [`--untracked-files=${untracked}`, '--ignore-submodules=none'];
  const result = await withSimpleGit(dir, `status ${args.join(' ')}`, true, (git) => git.status(args));
  return porcelain(result);
}

function porcelain(status: StatusResult): string {
  return status.files.map((f) => `${f.index}${f.working_dir} ${f.from ? `${f.from} -> ` : ''}${f.path}`).join('\n');
}

/**
 * A stable id of the change base..head (`git patch-id --stable`), "" when the diff is
 * empty. Equal ids mean a rebase carried the same patch; different ids mean the
 * reviewed change is not the one about to land.
 */
export async function patchId(repo: string, base: string, head: string): Promise<string> {
  const known = knownPatch(repo, base, head);
  if (known !== undefined) return known;
  // Commit to commit, by the plumbing command: no working tree is read, so no filter can run.
  const diff = await gitOut(repo, ['diff-tree', '-p', ...DIFF_FLAGS, base, head, '--']);
  const id = diff === '' ? '' : ((await gitOut(repo, ['patch-id', '--stable'], `${diff}\n`)).split(/\s+/)[0] ?? '');
  keepPatch(repo, base, head, id);
  return id;
}

/** Whether commit `a` is reachable from `b` (a commit is its own ancestor). */
export async function isAncestor(repo: string, a: string, b: string): Promise<boolean> {
  // A line of commits git has told the engine about already (known.ts): only "yes" is known there.
  if (isFullSha(a) && isFullSha(b) && knownAncestor(repo, a, b)) return true;
  const args = ['merge-base', '--is-ancestor', a, b];
  const result = await runGit(repo, args);
  if (result.exitCode === 0) return true;
  if (result.exitCode === 1) return false;
  throw commandFailed(repo, args, result);
}

/** The best common ancestor of `a` and `b`; unrelated histories are a GitFailure. */
export async function mergeBase(repo: string, a: string, b: string): Promise<Sha> {
  return (await gitOut(repo, ['merge-base', a, b])).trim();
}

/** Every commit of the branch at `branchSha` is reachable from trunk: its work has landed. */
export async function allOnTrunk(repo: string, branchSha: string, trunk: string): Promise<boolean> {
  try {
    // Trunk by the repository's resolver, so that a branch known to be on it asks no process.
    const at = await revParse(repo, `refs/heads/${trunk}`);
    return await isAncestor(repo, branchSha, at ?? `refs/heads/${trunk}`);
  } catch (error) {
    // No trunk to be on: said as such (TRON_TRUNK_MISSING), else git's own failure.
    await currentTrunkSha(repo, trunk);
    throw error;
  }
}

/** A human summary of base..head (files and line counts), for prompts and reports. */
export async function diffStat(repo: string, base: string, head: string): Promise<string> {
  return gitOut(repo, [
    'diff',
    '--no-color',
    '--no-ext-diff',
    '--no-textconv',
    '--find-renames',
    '--stat=100',
    '--summary',
    base,
    head,
    '--',
  ]);
}

/** The top folder of the work tree `dir` is in; undefined when `dir` is in none. */
export async function topLevel(dir: string): Promise<string | undefined> {
  const result = await runGit(dir, ['rev-parse', '--show-toplevel']);
  const top = result.stdout.trim();
  return result.exitCode === 0 && top !== '' ? top : undefined;
}

/**
 * The ref the HEAD of `dir` (a repository's or a worktree's top folder) names, in full
 * (`git symbolic-ref -q HEAD`); undefined when detached. Read from its HEAD file when that
 * is the plain `ref: <name>` file git writes — this is asked at every gate and landing —
 * and from git otherwise (a link, a ref store of another kind).
 */
export async function branchOfHead(dir: string): Promise<string | undefined> {
  try {
    const dirs = await gitDirsOf(dir);
    const headFile = dirs && join(dirs.gitDir, 'HEAD');
    if (headFile !== undefined && (await lstat(headFile)).isFile()) {
      const text = await readFile(headFile, 'utf8');
      const named = /^ref: (refs\/heads\/\S+)\n?$/.exec(text)?.[1];
      if (named !== undefined && !named.endsWith('/.invalid')) return named;
      // A detached HEAD names no branch.
      if (isFullSha(text.trimEnd())) return undefined;
    }
  } catch {
    // Not plain files: git says.
  }
  const head = await runGit(dir, ['symbolic-ref', '-q', 'HEAD']);
  return head.exitCode === 0 ? head.stdout.trim() : undefined;
}

/** The branch checked out in `dir` (short name); undefined on a detached HEAD. */
export async function currentBranch(dir: string): Promise<string | undefined> {
  const result = await runGit(dir, ['symbolic-ref', '--quiet', '--short', 'HEAD']);
  const branch = result.stdout.trim();
  return result.exitCode === 0 && branch !== '' ? branch : undefined;
}

/**
 * The changes the branch at `head` makes under `dir` since it left `base` (`base...head`,
 * from their merge base, so trunk's own later changes do not count), as `<status> <path>`.
 */
export async function changesUnder(repo: string, base: string, head: string, dir: string): Promise<string[]> {
  const out = await gitOut(repo, [
    'diff',
    '--no-color',
    '--no-ext-diff',
    '--no-textconv',
    '--no-relative',
    '--no-renames',
    '--name-status',
    `${base}...${head}`,
    '--',
    `:(literal)${dir}`,
  ]);
  return out
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.replace('\t', ' '));
}

/**
 * Tracked files of working tree `dir` whose index entry tells git not to look at them:
 * skip-worktree (`S`) or assume-unchanged (a lower-case tag). `git status` does not show
 * an edit to such a file, so facts about the checkout must look at them by hand.
 */
export async function hiddenByIndex(dir: string): Promise<{ flag: 'skip-worktree' | 'assume-unchanged'; path: string }[]> {
  const out = await gitOut(dir, ['ls-files', '-v', '-z']);
  const hidden: { flag: 'skip-worktree' | 'assume-unchanged'; path: string }[] = [];
  for (const entry of out.split('\0')) {
    const tag = entry[0];
    if (tag === undefined || entry[1] !== ' ') continue;
    const path = entry.slice(2);
    if (tag === 'S' || tag === 's') hidden.push({ flag: 'skip-worktree', path });
    else if (tag !== tag.toUpperCase()) hidden.push({ flag: 'assume-unchanged', path });
  }
  return hidden;
}

/** Every commit on `ref`'s first-parent chain (the commits trunk itself has pointed at, for a trunk tron lands on). */
export async function firstParentShas(repo: string, ref: string): Promise<Set<Sha>> {
  const out = await gitOut(repo, ['rev-list', '--first-parent', '--end-of-options', ref]);
  return new Set(out.split('\n').filter((line) => line !== ''));
}
