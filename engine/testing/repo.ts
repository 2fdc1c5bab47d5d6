/**
 * Real git repositories for tests, built from a file-tree literal (as changesets'
 * test-utils do). Each has its own identity and ignores the machine's global and system
 * git config, so a test passes or fails the same on every machine.
 */
import { execa } from 'execa';
import { appendFile, mkdir, mkdtemp, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { repoStateDir } from '../log/keys.ts';
import { fsck } from './store.ts';

/** The identity of every test commit; pass it to spawned processes that commit (sim workers, hooks). */
export const GIT_IDENTITY_ENV: Readonly<Record<string, string>> = {
  GIT_AUTHOR_NAME: 'Tron Test',
  GIT_AUTHOR_EMAIL: 'tron-test@example.invalid',
  GIT_COMMITTER_NAME: 'Tron Test',
  GIT_COMMITTER_EMAIL: 'tron-test@example.invalid',
};

/** The environment of the helpers' own git calls: the identity, no global/system config, no prompts. */
const TEST_GIT_ENV: Readonly<Record<string, string>> = {
  ...GIT_IDENTITY_ENV,
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_PAGER: 'cat',
};

/** One working tree of a test repository: the main one, or a worktree via `at(dir)`. */
export interface TestTree {
  dir: string;
  /** Runs git here; resolves to trimmed stdout, rejects on a non-zero exit. */
  git(...args: string[]): Promise<string>;
  /** Writes a file (relative path), creating folders. */
  write(path: string, text: string): Promise<void>;
  read(path: string): Promise<string>;
  /** Stages everything and commits; resolves to the new HEAD sha. */
  commitAll(message: string): Promise<string>;
}

export interface TestRepo extends TestTree {
  /** The same helpers for another working tree of this repository (e.g. an engine worktree). */
  at(dir: string): TestTree;
  /**
   * Runs `git fsck --full` of the repository, deletes it with everything under it, then
   * rejects when fsck found damage: whatever a test's workers did, the user's history is
   * intact, or the test fails. `{ fsck: false }` only for a test that damages the store
   * on purpose.
   */
  cleanup(opts?: { fsck?: boolean }): Promise<void>;
}

/** Runs git in `dir` with the test identity and no global config; trimmed stdout. */
export async function testGit(dir: string, ...args: string[]): Promise<string> {
  const result = await execa('git', args, { cwd: dir, env: TEST_GIT_ENV, stdin: 'ignore' });
  return String(result.stdout).trim();
}

function tree(dir: string): TestTree {
  const git = (...args: string[]) => testGit(dir, ...args);
  return {
    dir,
    git,
    async write(path, text) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    },
    read: (path) => readFile(join(dir, path), 'utf8'),
    async commitAll(message) {
      await git('add', '-A');
      await git('commit', '-q', '-m', message);
      return git('rev-parse', 'HEAD');
    },
  };
}

/**
 * A fresh repository under the OS temp folder holding `files` in one initial commit on
 * the trunk branch (default `main`), with a fixed identity in its local config and
 * commit signing off.
 */
export async function makeRepo(files: Record<string, string>, opts: { trunk?: string } = {}): Promise<TestRepo> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'tron-repo-')));
  const main = tree(dir);
  await main.git('init', '-q', '-b', opts.trunk ?? 'main');
  // One append instead of three `git config` processes: makeRepo runs in many tests.
  await appendFile(
    join(dir, '.git', 'config'),
    `[user]\n\tname = ${GIT_IDENTITY_ENV.GIT_AUTHOR_NAME}\n\temail = ${GIT_IDENTITY_ENV.GIT_AUTHOR_EMAIL}\n[commit]\n\tgpgsign = false\n`,
  );
  for (const [path, text] of Object.entries(files)) await main.write(path, text);
  await main.git('add', '-A');
  await main.git('commit', '-q', '--allow-empty', '-m', 'initial');
  return {
    ...main,
    at: (other) => tree(other),
    async cleanup(opts = {}) {
      const checked = opts.fsck === false ? undefined : await fsck(dir);
      // The repository's signing key (engine/log/keys.ts) goes with it.
      await Promise.all([rm(dir, { recursive: true, force: true }), rm(repoStateDir(dir), { recursive: true, force: true })]);
      if (checked && checked.code !== 0)
        throw new Error(`git fsck of the repository ${dir} failed (exit ${checked.code}): ${checked.said}`);
    },
  };
}

/** Commits what is staged in `tree` as another author (Ada, at a fixed date in +0100): to see a replay keep author and date. */
export async function commitAsAda(tree: TestTree, message: string): Promise<string> {
  await tree.git(
    '-c',
    'user.name=Ada',
    '-c',
    'user.email=ada@example.invalid',
    'commit',
    '-q',
    '-m',
    message,
    '--date=2001-02-03T04:05:06+0100',
  );
  return tree.git('rev-parse', 'HEAD');
}
