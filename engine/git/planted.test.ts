/**
 * The engine's own git runs nothing a worker planted. Each test plants one kind of
 * program where a worker can reach (the shared git directory, its own worktree's config,
 * HOME), first shows that plain git does run it, then drives every engine git operation
 * that would trigger it and expects no trace.
 */
import { mkdir, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  allOnTrunk,
  branchesOf,
  catchUpCheckout,
  checkMainCheckout,
  clearEngineRefLocks,
  clearLandingLocks,
  commitsOver,
  createReviewCheckout,
  createWorktree,
  deleteBranch,
  diffStat,
  firstParentLog,
  headOf,
  isAncestor,
  isClean,
  land,
  landedRefs,
  mergeBase,
  patchId,
  preserveOrphan,
  pruneWorktrees,
  removeWorktree,
  resetWorktree,
  revParse,
} from './index.ts';
import { runGit } from './run.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

/** Every hook git knows by name. */
const HOOKS = [
  'applypatch-msg',
  'pre-applypatch',
  'post-applypatch',
  'pre-commit',
  'pre-merge-commit',
  'prepare-commit-msg',
  'commit-msg',
  'post-commit',
  'pre-rebase',
  'post-checkout',
  'post-merge',
  'pre-push',
  'pre-receive',
  'update',
  'proc-receive',
  'post-receive',
  'post-update',
  'reference-transaction',
  'push-to-checkout',
  'pre-auto-gc',
  'post-rewrite',
  'sendemail-validate',
  'fsmonitor-watchman',
  'post-index-change',
];

/** The plain git a worker or the user would run: the test identity, no HOME config. */
const TEST_ENV = {
  GIT_AUTHOR_NAME: 'Tron Test',
  GIT_AUTHOR_EMAIL: 'tron-test@example.invalid',
  GIT_COMMITTER_NAME: 'Tron Test',
  GIT_COMMITTER_EMAIL: 'tron-test@example.invalid',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
};

interface Scene {
  r: TestRepo;
  /** Trunk at the start. */
  base: string;
  /** The block's commit over base: changes a.txt, adds new.txt. */
  feature: string;
  /** A commit over feature that changes notes.md (trunk moves there in the tour). */
  later: string;
  /** Where planted programs leave a file named after themselves when they run. */
  marks: string;
}

/** A repository with trunk `main` checked out, built before anything is planted. */
async function scene(): Promise<Scene> {
  const r = await makeRepo({
    'a.txt': 'a\n',
    'notes.md': 'notes\n',
    '.gitignore': '/.tron/\n',
    // Attributes only name drivers; config defines them, and none is defined yet.
    '.gitattributes': '*.txt filter=evil diff=evil\n*.md filter=x=y\n',
  });
  repos.push(r);
  const base = await r.git('rev-parse', 'HEAD');
  await r.git('checkout', '-q', '-b', 'feature');
  await r.write('a.txt', 'a, improved\n');
  await r.write('new.txt', 'new\n');
  const feature = await r.commitAll('login');
  await r.write('notes.md', 'notes, later\n');
  const later = await r.commitAll('later');
  await r.git('checkout', '-q', 'main');
  const marks = join(r.dir, '.git', 'marks');
  await mkdir(marks);
  return { r, base, feature, later, marks };
}

/** An executable script `dir/name` that leaves mark `name` and then runs `then`; returns its path. */
async function program(s: Scene, name: string, then = 'exit 0', dir = join(s.r.dir, '.git', 'planted')): Promise<string> {
  const file = join(dir, name);
  await mkdir(dir, { recursive: true });
  await writeFile(file, `#!/bin/sh\ntouch '${join(s.marks, name)}'\n${then}\n`, { mode: 0o755 });
  return file;
}

/** A filter that leaves its mark and passes content through unchanged. */
const filter = (s: Scene, name: string) => program(s, name, 'exec cat');

async function plantHooks(s: Scene, dir: string, names: readonly string[] = HOOKS): Promise<void> {
  for (const name of names) await program(s, name, 'exit 0', dir);
}

/** The marks left so far, which are then cleared. */
async function marksLeft(s: Scene): Promise<string[]> {
  const names = (await readdir(s.marks)).sort();
  await Promise.all(names.map((n) => rm(join(s.marks, n))));
  return names;
}

/** Runs plain git (not the engine's) in `cwd`, whatever its exit. */
function plainGit(cwd: string, args: string[], env: Record<string, string> = TEST_ENV) {
  return execa('git', args, { cwd, env, reject: false, stdin: 'ignore' });
}

/** Gives a file a new timestamp, so status and refresh read it again (through its clean filter, if any ran). */
const touch = (file: string) => utimes(file, new Date(2001, 1, 1), new Date(2001, 1, 1));

/** Every git operation the engine performs, in the order a block meets them, each checked to have happened. */
async function tour(s: Scene): Promise<void> {
  const { r, base, feature, later } = s;
  expect(await checkMainCheckout(r.dir, 'main')).toBeUndefined();
  const wt = await createWorktree(r.dir, { id: 'login', base });
  await touch(join(wt.path, 'a.txt'));
  expect(await isClean(wt.path)).toEqual({ clean: true, status: '' });
  expect(await headOf(wt.path)).toBe(base);
  expect(await branchesOf(r.dir, 'tron/*')).toEqual(new Map([['tron/login', base]]));
  expect(await commitsOver(r.dir, base, feature)).toEqual([feature]);
  expect(await firstParentLog(r.dir, feature)).toHaveLength(2);
  expect(await patchId(r.dir, base, later)).toMatch(/^[0-9a-f]{40}$/);
  expect(await diffStat(r.dir, base, later)).toMatch(/a\.txt[\s\S]*notes\.md/);
  expect(await isAncestor(r.dir, base, feature)).toBe(true);
  expect(await mergeBase(r.dir, base, feature)).toBe(base);
  const review = await createReviewCheckout(r.dir, { id: 'login', sha: feature });
  expect(await r.at(review).read('a.txt')).toBe('a, improved\n');
  await r.at(wt.path).write('a.txt', 'dirty\n');
  await r.at(wt.path).write('stray.txt', 'stray\n');
  await resetWorktree(r.dir, 'login');
  expect(await r.at(wt.path).read('a.txt')).toBe('a\n');
  await touch(join(r.dir, 'a.txt'));
  expect(await land(r.dir, { trunk: 'main', expectedOld: base, sha: feature, id: 'login' })).toEqual({
    ok: true,
    checkout: { state: 'updated', path: r.dir },
  });
  expect(await r.read('new.txt')).toBe('new\n');
  // As if the engine had died between a landing's ref transaction and its checkout update.
  expect((await runGit(r.dir, ['update-ref', 'refs/heads/main', later, feature])).exitCode).toBe(0);
  expect(await catchUpCheckout(r.dir, 'main', [feature])).toBe(feature);
  expect(await r.read('notes.md')).toBe('notes, later\n');
  expect(await landedRefs(r.dir)).toEqual(new Map([['login', feature]]));
  expect(await allOnTrunk(r.dir, feature, 'main')).toBe(true);
  expect(await preserveOrphan(r.dir, 'login', feature)).toBe('orphan/login-1');
  await removeWorktree(r.dir, review);
  await removeWorktree(r.dir, wt.path);
  await deleteBranch(r.dir, 'tron/login');
  expect(await revParse(r.dir, 'refs/heads/tron/login')).toBeUndefined();
  await pruneWorktrees(r.dir);
  await clearEngineRefLocks(r.dir);
  await clearLandingLocks(r.dir, 'main', ['login']);
  expect(await revParse(r.dir, 'refs/heads/main')).toBe(later);
}

describe('hooks planted in the shared git directory', () => {
  it("the landing's ref transaction, and every other ref the engine moves, runs no reference-transaction hook", async () => {
    const s = await scene();
    await plantHooks(s, join(s.r.dir, '.git', 'hooks'), ['reference-transaction']);
    await plainGit(s.r.dir, ['update-ref', 'refs/control', 'HEAD']);
    await plainGit(s.r.dir, ['update-ref', '-d', 'refs/control']);
    expect(await marksLeft(s)).toEqual(['reference-transaction']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('making, reviewing and resetting worktrees runs no post-checkout hook', async () => {
    const s = await scene();
    await plantHooks(s, join(s.r.dir, '.git', 'hooks'), ['post-checkout']);
    await plainGit(s.r.dir, ['checkout', '-q', 'main']);
    expect(await marksLeft(s)).toEqual(['post-checkout']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it("moving the user's checkout of trunk after a landing runs no post-index-change hook", async () => {
    const s = await scene();
    await plantHooks(s, join(s.r.dir, '.git', 'hooks'), ['post-index-change']);
    await plainGit(s.r.dir, ['read-tree', 'HEAD']);
    expect(await marksLeft(s)).toEqual(['post-index-change']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('no hook of any name runs during any engine operation', async () => {
    const s = await scene();
    await plantHooks(s, join(s.r.dir, '.git', 'hooks'));
    await plainGit(s.r.dir, ['read-tree', 'HEAD']);
    expect(await marksLeft(s)).toEqual(['post-index-change']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });
});

describe('programs planted in the repository config', () => {
  it('hooks under a core.hooksPath set in the repository config do not run', async () => {
    const s = await scene();
    const hooks = join(s.r.dir, '.git', 'elsewhere');
    await plantHooks(s, hooks);
    await s.r.git('config', 'core.hooksPath', hooks);
    await plainGit(s.r.dir, ['read-tree', 'HEAD']);
    expect(await marksLeft(s)).toEqual(['post-index-change']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('a core.fsmonitor program does not run when the engine reads status or refreshes an index', async () => {
    const s = await scene();
    await s.r.git('config', 'core.fsmonitor', await program(s, 'fsmonitor'));
    await plainGit(s.r.dir, ['status']);
    expect(await marksLeft(s)).toEqual(['fsmonitor']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('clean, smudge and process filters do not run when the engine checks out, refreshes or inspects files', async () => {
    const s = await scene();
    const { r } = s;
    await r.git('config', 'filter.evil.clean', await filter(s, 'clean'));
    await r.git('config', 'filter.evil.smudge', await filter(s, 'smudge'));
    await r.git('config', 'filter.evil.required', 'true');
    // A driver name `-c filter.<name>.process=` could not express: it holds an '='.
    await r.git('config', 'filter.x=y.process', await program(s, 'process', 'exit 1'));
    await touch(join(r.dir, 'a.txt'));
    await plainGit(r.dir, ['status']);
    await rm(join(r.dir, 'a.txt'));
    await plainGit(r.dir, ['checkout', '--', 'a.txt']);
    await rm(join(r.dir, 'notes.md'));
    await plainGit(r.dir, ['checkout', '--', 'notes.md']);
    expect(await marksLeft(s)).toEqual(['clean', 'process', 'smudge']);
    // The failed process filter left notes.md unwritten.
    await r.write('notes.md', 'notes\n');
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('an external diff or textconv program does not run when the engine computes patch ids and diff stats', async () => {
    const s = await scene();
    const { r, base, feature, later } = s;
    await r.git('config', 'diff.external', await program(s, 'diff.external'));
    await r.git('config', 'diff.evil.command', await program(s, 'diff.command'));
    await r.git('config', 'diff.evil.textconv', await program(s, 'diff.textconv', 'cat "$1"'));
    await plainGit(r.dir, ['diff', base, later]);
    await plainGit(r.dir, ['diff', '--no-ext-diff', base, feature]);
    expect(await marksLeft(s)).toEqual(['diff.command', 'diff.external', 'diff.textconv']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('a gpg.program planted with log.showSignature does not run when the engine lists commits', async () => {
    const s = await scene();
    const { r, base, feature } = s;
    const tree = await r.git('rev-parse', `${feature}^{tree}`);
    const signedCommit =
      `tree ${tree}\nparent ${feature}\nauthor A <a@a> 1700000000 +0000\ncommitter A <a@a> 1700000000 +0000\n` +
      'gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n';
    const signed = (
      await execa('git', ['hash-object', '-t', 'commit', '-w', '--stdin'], { cwd: r.dir, input: signedCommit })
    ).stdout.trim();
    await r.git('config', 'log.showSignature', 'true');
    await r.git('config', 'gpg.program', await program(s, 'gpg', 'exit 1'));
    await plainGit(r.dir, ['log', '--format=%H', `${base}..${signed}`]);
    expect(await marksLeft(s)).toEqual(['gpg']);
    expect(await commitsOver(r.dir, base, signed)).toEqual([feature, signed]);
    expect(await firstParentLog(r.dir, signed)).toHaveLength(3);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('a filter planted after the engine last looked does not run: what it knows of the config is asked again when the config changes', async () => {
    const s = await scene();
    const { r, base } = s;
    const wt = await createWorktree(r.dir, { id: 'login', base });
    // The engine has looked at both, with no filter defined anywhere.
    expect(await isClean(r.dir)).toMatchObject({ clean: true });
    expect(await isClean(wt.path)).toMatchObject({ clean: true });
    await r.git('config', 'filter.evil.clean', await filter(s, 'clean'));
    await r.git('config', 'core.repositoryformatversion', '1');
    await r.git('config', 'extensions.worktreeConfig', 'true');
    await r.at(wt.path).git('config', '--worktree', 'filter.wt.clean', await filter(s, 'worktree-clean'));
    await r.write('.gitattributes', '*.txt filter=evil\n');
    await r.at(wt.path).write('.gitattributes', '*.txt filter=wt\n');
    await plainGit(wt.path, ['add', '--dry-run', 'a.txt']);
    await touch(join(r.dir, 'a.txt'));
    await plainGit(r.dir, ['status']);
    expect(await marksLeft(s)).toEqual(['clean', 'worktree-clean']);
    for (const dir of [r.dir, wt.path]) {
      await touch(join(dir, 'a.txt'));
      expect((await isClean(dir)).status).not.toContain('a.txt');
    }
    expect(await marksLeft(s)).toEqual([]);
  });

  it('hooks, fsmonitor and filters pulled in by include.path do not run', async () => {
    const s = await scene();
    const hooks = join(s.r.dir, '.git', 'included-hooks');
    await plantHooks(s, hooks);
    const included = join(s.r.dir, '.git', 'included.config');
    await writeFile(
      included,
      `[core]\n\thooksPath = ${hooks}\n\tfsmonitor = ${await program(s, 'fsmonitor')}\n` +
        `[filter "evil"]\n\tclean = ${await filter(s, 'clean')}\n\tsmudge = ${await filter(s, 'smudge')}\n`,
    );
    await s.r.git('config', 'include.path', included);
    await touch(join(s.r.dir, 'a.txt'));
    await plainGit(s.r.dir, ['status']);
    expect(await marksLeft(s)).toEqual(['clean', 'fsmonitor', 'post-index-change']);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it("hooks, fsmonitor and filters a worker sets in its own worktree's config do not run when the engine inspects or resets it", async () => {
    const s = await scene();
    const { r, base } = s;
    const wt = await createWorktree(r.dir, { id: 'login', base });
    const tree = r.at(wt.path);
    const hooks = join(r.dir, '.git', 'worker-hooks');
    await plantHooks(s, hooks);
    await r.git('config', 'core.repositoryformatversion', '1');
    await r.git('config', 'extensions.worktreeConfig', 'true');
    await tree.git('config', '--worktree', 'core.hooksPath', hooks);
    await tree.git('config', '--worktree', 'core.fsmonitor', await program(s, 'fsmonitor'));
    await tree.git('config', '--worktree', 'filter.evil.clean', await filter(s, 'clean'));
    await tree.git('config', '--worktree', 'filter.evil.smudge', await filter(s, 'smudge'));
    await touch(join(wt.path, 'a.txt'));
    await plainGit(wt.path, ['status']);
    expect(await marksLeft(s)).toEqual(['clean', 'fsmonitor', 'post-index-change']);
    await touch(join(wt.path, 'a.txt'));
    expect(await isClean(wt.path)).toEqual({ clean: true, status: '' });
    expect(await headOf(wt.path)).toBe(base);
    await tree.write('a.txt', 'dirty\n');
    await resetWorktree(r.dir, 'login');
    expect(await tree.read('a.txt')).toBe('a\n');
    await removeWorktree(r.dir, wt.path);
    await deleteBranch(r.dir, 'tron/login');
    expect(await marksLeft(s)).toEqual([]);
  });
});

describe("HOME's git files", () => {
  it("HOME's ~/.gitconfig, XDG git config and attributes (hooks path, fsmonitor, filters, line endings) are never read", async () => {
    const s = await scene();
    const home = join(s.r.dir, '.git', 'home');
    const hooks = join(home, 'hooks');
    await plantHooks(s, hooks);
    await writeFile(
      join(home, '.gitconfig'),
      // autocrlf is not a program, but no other defence hides it: the tour's checkouts would end lines in CRLF.
      `[core]\n\thooksPath = ${hooks}\n\tautocrlf = true\n[filter "evil"]\n\tclean = ${await filter(s, 'clean')}\n\tsmudge = ${await filter(s, 'smudge')}\n\trequired = true\n`,
    );
    await mkdir(join(home, '.config', 'git'), { recursive: true });
    await writeFile(join(home, '.config', 'git', 'config'), `[core]\n\tfsmonitor = ${await program(s, 'fsmonitor')}\n`);
    await writeFile(join(home, '.config', 'git', 'attributes'), '*.txt eol=crlf\n');
    await touch(join(s.r.dir, 'a.txt'));
    await plainGit(s.r.dir, ['status'], { PATH: process.env.PATH ?? '', HOME: home });
    expect(await marksLeft(s)).toEqual(['clean', 'fsmonitor', 'post-index-change']);
    vi.stubEnv('HOME', home);
    await tour(s);
    expect(await marksLeft(s)).toEqual([]);
  });

  it("an ignore file in HOME does not hide a worker's untracked files from the engine", async () => {
    const s = await scene();
    const home = join(s.r.dir, '.git', 'home');
    await mkdir(join(home, '.config', 'git'), { recursive: true });
    await writeFile(join(home, '.config', 'git', 'ignore'), 'stray.txt\n');
    const wt = await createWorktree(s.r.dir, { id: 'login', base: s.base });
    await s.r.at(wt.path).write('stray.txt', 'unseen?\n');
    const plain = await plainGit(wt.path, ['status', '--porcelain'], { PATH: process.env.PATH ?? '', HOME: home });
    expect(plain.stdout).toBe('');
    vi.stubEnv('HOME', home);
    expect(await isClean(wt.path)).toEqual({ clean: false, status: '?? stray.txt' });
  });
});

describe('what the engine derives', () => {
  it('a planted promisor remote cannot make a missing object start a transport', async () => {
    const s = await scene();
    const { r } = s;
    await r.git('config', 'core.repositoryformatversion', '1');
    await r.git('config', 'extensions.partialClone', 'origin');
    await r.git('config', 'remote.origin.promisor', 'true');
    await r.git('config', 'remote.origin.url', `ext::sh -c touch% ${join(s.marks, 'transport')}`);
    await r.git('config', 'protocol.ext.allow', 'always');
    const missing = '1234567890123456789012345678901234567890';
    await plainGit(r.dir, ['rev-parse', '--verify', '--quiet', `${missing}^{commit}`]);
    expect(await marksLeft(s)).toEqual(['transport']);
    await revParse(r.dir, missing).catch(() => undefined);
    await isAncestor(r.dir, missing, s.base).catch(() => undefined);
    expect(await marksLeft(s)).toEqual([]);
  });

  it('a planted replace ref does not change the history the engine derives facts from', async () => {
    const s = await scene();
    const { r, base, feature } = s;
    const fake = await r.git('commit-tree', `${feature}^{tree}`, '-m', 'a root that replaces the block commit');
    await r.git('replace', feature, fake);
    expect((await plainGit(r.dir, ['merge-base', '--is-ancestor', base, feature])).exitCode).toBe(1);
    expect(await isAncestor(r.dir, base, feature)).toBe(true);
    expect(await commitsOver(r.dir, base, feature)).toEqual([feature]);
  });

  it('refs the engine moves are signed tron in the reflog, not by an identity from config', async () => {
    const s = await scene();
    const { r, base, feature } = s;
    await createWorktree(r.dir, { id: 'login', base });
    expect(await land(r.dir, { trunk: 'main', expectedOld: base, sha: feature, id: 'login' })).toMatchObject({ ok: true });
    expect(await r.git('reflog', '-1', '--format=%gn <%ge> %gs', 'refs/heads/main')).toBe('tron <tron@localhost> tron: land login');
  });
});

describe("the engine's environment", () => {
  it('no secret or other variable of the engine reaches a git process, beyond PATH, HOME, LANG and TERM', async () => {
    const s = await scene();
    const dumps = join(s.r.dir, '.git', 'env-dumps');
    await mkdir(dumps);
    const realGit = (await execa('sh', ['-c', 'command -v git'])).stdout.trim();
    const bin = join(s.r.dir, '.git', 'bin');
    await mkdir(bin);
    await writeFile(join(bin, 'git'), `#!/bin/sh\nenv > "${dumps}/$$"\nexec '${realGit}' "$@"\n`, { mode: 0o755 });
    vi.stubEnv('PATH', `${bin}:${process.env.PATH ?? ''}`);
    vi.stubEnv('TRON_TEST_SECRET', 'hunter2');
    vi.stubEnv('OPENAI_API_KEY', 'sk-do-not-leak');
    vi.stubEnv('GIT_DIR', '/somewhere/else');
    await tour(s);
    vi.unstubAllEnvs();
    const seen = await Promise.all((await readdir(dumps)).map((f) => readFile(join(dumps, f), 'utf8')));
    expect(seen.length).toBeGreaterThan(20);
    // simple-git's own variable: its listings went through the same door.
    expect(seen.some((env) => env.includes('GIT_TEST_DISALLOW_ABBREVIATED_OPTIONS='))).toBe(true);
    for (const env of seen) {
      expect(env).not.toContain('hunter2');
      expect(env).not.toContain('sk-do-not-leak');
      expect(env).not.toContain('GIT_DIR=/somewhere/else');
      expect(env).toContain('GIT_CONFIG_GLOBAL=/dev/null');
    }
  });
});
