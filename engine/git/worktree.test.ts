import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  clearEngineRefLocks,
  clearStaleLocks,
  createReviewCheckout,
  createWorktree,
  pruneWorktrees,
  removeWorktree,
  resetWorktree,
  reuseBuildWorktree,
  revParse,
} from './index.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
async function repo() {
  const r = await makeRepo({ 'a.txt': 'a\n' });
  repos.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

describe('createWorktree', () => {
  it('checks out a new branch tron/<id> at the base sha, with no upstream', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    await r.write('a.txt', 'later\n');
    await r.commitAll('trunk moves on');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    expect(wt).toEqual({ path: join(r.dir, '.tron/worktrees/login'), branch: 'tron/login' });
    const tree = r.at(wt.path);
    expect(await tree.git('symbolic-ref', 'HEAD')).toBe('refs/heads/tron/login');
    expect(await tree.git('rev-parse', 'HEAD')).toBe(base);
    expect(await tree.read('a.txt')).toBe('a\n');
    expect(await r.git('config', '--list', '--local')).not.toContain('branch.tron/login');
    await expect(r.git('rev-parse', '--abbrev-ref', 'tron/login@{upstream}')).rejects.toThrow();
  });

  it('refuses with TRON_WORKTREE_EXISTS when the branch is left from an earlier run, changing nothing', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    await r.git('branch', 'tron/login');
    const err = await createWorktree(r.dir, { id: 'login', base }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'TRON_WORKTREE_EXISTS' });
    expect(String(err)).toContain('branch tron/login');
    expect(existsSync(join(r.dir, '.tron/worktrees/login'))).toBe(false);
  });

  it('refuses with TRON_WORKTREE_EXISTS when the folder is left from an earlier run, keeping its files', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await r.at(wt.path).write('wip.txt', 'unsaved work');
    await expect(createWorktree(r.dir, { id: 'login', base })).rejects.toMatchObject({ code: 'TRON_WORKTREE_EXISTS' });
    expect(await r.at(wt.path).read('wip.txt')).toBe('unsaved work');
  });

  it('succeeds again once a removed worktree and its branch are gone, pruning the stale registration', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await removeWorktree(r.dir, wt.path);
    await r.git('branch', '-D', 'tron/login');
    expect((await createWorktree(r.dir, { id: 'login', base })).path).toBe(wt.path);
  });
});

describe('a worktree whose folder was deleted by hand', () => {
  it('is made again at the same path: git forgets the stale registration first', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await rm(wt.path, { recursive: true, force: true });
    await r.git('update-ref', '-d', 'refs/heads/tron/login');
    expect((await createWorktree(r.dir, { id: 'login', base })).path).toBe(wt.path);
    expect(await r.at(wt.path).git('symbolic-ref', 'HEAD')).toBe('refs/heads/tron/login');
  });

  it('is forgotten by git when the engine removes it', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await rm(wt.path, { recursive: true, force: true });
    await removeWorktree(r.dir, wt.path);
    expect(await r.git('worktree', 'list', '--porcelain')).not.toContain('login');
  });
});

describe('a worktree whose `git worktree add` was killed half-way', () => {
  it('is undone at boot, so the repository passes git fsck and the worktree can be made again', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await r.git('update-ref', '-d', 'refs/heads/tron/login');
    // What git leaves when killed after registering the worktree: a null HEAD, its lock, an
    // empty commondir, and a folder holding only its .git file.
    const admin = join(r.dir, '.git/worktrees/login');
    await writeFile(join(admin, 'HEAD'), `${'0'.repeat(40)}\n`);
    await writeFile(join(admin, 'locked'), 'initializing');
    await writeFile(join(admin, 'commondir'), '');
    for (const name of ['a.txt', '.tron']) await rm(join(wt.path, name), { recursive: true, force: true });
    await expect(r.git('fsck', '--full')).rejects.toThrow(/commondir/);
    await pruneWorktrees(r.dir);
    expect(existsSync(admin)).toBe(false);
    expect(existsSync(wt.path)).toBe(false);
    await r.git('fsck', '--full');
    expect((await createWorktree(r.dir, { id: 'login', base })).path).toBe(wt.path);
  });

  it('is undone at boot when git was killed before it wrote the HEAD', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await r.git('update-ref', '-d', 'refs/heads/tron/login');
    // Its lock and gitdir written, no HEAD yet: `worktree add` refuses the path as "missing but locked".
    const admin = join(r.dir, '.git/worktrees/login');
    for (const name of ['HEAD', 'commondir', 'index']) await rm(join(admin, name), { force: true });
    await writeFile(join(admin, 'locked'), 'initializing');
    await rm(wt.path, { recursive: true, force: true });
    await expect(r.git('fsck', '--full')).rejects.toThrow(/HEAD/);
    await pruneWorktrees(r.dir);
    expect(existsSync(admin)).toBe(false);
    await r.git('fsck', '--full');
    expect((await createWorktree(r.dir, { id: 'login', base })).path).toBe(wt.path);
  });

  it("leaves a registration outside tron's folder alone", async () => {
    const r = await repo();
    const elsewhere = join(r.dir, 'mine');
    await r.git('worktree', 'add', '--quiet', '--detach', elsewhere);
    await writeFile(join(r.dir, '.git/worktrees/mine/HEAD'), `${'0'.repeat(40)}\n`);
    await writeFile(join(r.dir, '.git/worktrees/mine/locked'), 'initializing');
    await pruneWorktrees(r.dir);
    expect(existsSync(join(elsewhere, '.git'))).toBe(true);
    expect(existsSync(join(r.dir, '.git/worktrees/mine'))).toBe(true);
    await rm(join(r.dir, '.git/worktrees/mine/locked'));
    await r.git('worktree', 'remove', '--force', elsewhere);
  });
});

describe('clearStaleLocks', () => {
  it("removes a crashed git's index and branch locks so work in the worktree can go on", async () => {
    const r = await repo();
    const wt = await createWorktree(r.dir, { id: 'login', base: 'HEAD' });
    await writeFile(join(r.dir, '.git/worktrees/login/index.lock'), '');
    await writeFile(join(r.dir, '.git/refs/heads/tron/login.lock'), '');
    const tree = r.at(wt.path);
    await tree.write('b.txt', 'b\n');
    await expect(tree.commitAll('blocked')).rejects.toThrow(/lock/);
    await clearStaleLocks(r.dir, 'login', 'tron/login');
    const sha = await tree.commitAll('unblocked');
    expect(await revParse(r.dir, 'refs/heads/tron/login')).toBe(sha);
  });
});

describe('createReviewCheckout', () => {
  it('makes a detached checkout pinned to the exact sha', async () => {
    const r = await repo();
    const first = await r.git('rev-parse', 'HEAD');
    await r.write('a.txt', 'second\n');
    await r.commitAll('second');
    const path = await createReviewCheckout(r.dir, { id: 'login', sha: first });
    expect(path).toBe(join(r.dir, '.tron/worktrees/login.review'));
    const tree = r.at(path);
    await expect(tree.git('symbolic-ref', '-q', 'HEAD')).rejects.toThrow();
    expect(await tree.git('rev-parse', 'HEAD')).toBe(first);
    expect(await tree.read('a.txt')).toBe('a\n');
  });

  it('recreates an existing review checkout at the new sha, dropping stray edits', async () => {
    const r = await repo();
    const first = await r.git('rev-parse', 'HEAD');
    const path = await createReviewCheckout(r.dir, { id: 'login', sha: first });
    await r.at(path).write('a.txt', 'reviewer scribbled\n');
    await r.write('a.txt', 'second\n');
    const second = await r.commitAll('second');
    expect(await createReviewCheckout(r.dir, { id: 'login', sha: second })).toBe(path);
    expect(await r.at(path).git('rev-parse', 'HEAD')).toBe(second);
    expect(await r.at(path).read('a.txt')).toBe('second\n');
    expect(await r.at(path).git('status', '--porcelain')).toBe('');
  });
});

describe('removeWorktree', () => {
  it('removes a worktree with uncommitted work, and a second call is fine', async () => {
    const r = await repo();
    const wt = await createWorktree(r.dir, { id: 'login', base: 'HEAD' });
    await r.at(wt.path).write('wip.txt', 'x');
    await removeWorktree(r.dir, wt.path);
    expect(existsSync(wt.path)).toBe(false);
    expect(await r.git('worktree', 'list', '--porcelain')).not.toContain('login');
    await removeWorktree(r.dir, wt.path);
    expect(await revParse(r.dir, 'refs/heads/tron/login')).toBeDefined();
  });

  it('removes a locked worktree, and leaves alone the record another repository’s worktree has when a .git file names it', async () => {
    const r = await repo();
    const locked = await createWorktree(r.dir, { id: 'locked', base: 'HEAD' });
    await r.git('worktree', 'lock', locked.path);
    await removeWorktree(r.dir, locked.path);
    expect(existsSync(locked.path)).toBe(false);
    expect(await r.git('worktree', 'list', '--porcelain')).not.toContain('locked');
    // A worker points its worktree's .git at another repository's worktree record.
    const other = await repo();
    const theirs = await createWorktree(other.dir, { id: 'theirs', base: 'HEAD' });
    const wt = await createWorktree(r.dir, { id: 'login', base: 'HEAD' });
    await writeFile(join(wt.path, '.git'), `gitdir: ${join(other.dir, '.git', 'worktrees', 'theirs')}\n`);
    await removeWorktree(r.dir, wt.path);
    expect(existsSync(wt.path)).toBe(false);
    expect(await r.git('worktree', 'list', '--porcelain')).not.toContain('login');
    expect(existsSync(join(other.dir, '.git', 'worktrees', 'theirs'))).toBe(true);
    expect(await other.at(theirs.path).git('status', '--porcelain')).toBe('');
  });

  it('refuses any path outside .tron/worktrees', async () => {
    const r = await repo();
    await expect(removeWorktree(r.dir, r.dir)).rejects.toMatchObject({ code: 'TRON_WORKTREE_OUTSIDE' });
    await expect(removeWorktree(r.dir, join(r.dir, '.tron/worktrees/../..'))).rejects.toMatchObject({ code: 'TRON_WORKTREE_OUTSIDE' });
    expect(await r.read('a.txt')).toBe('a\n');
  });
});

describe('resetWorktree', () => {
  it('puts a worktree left mid-rebase with stray changes back at its branch head', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    const tree = r.at(wt.path);
    await tree.write('a.txt', 'branch\n');
    const head = await tree.commitAll('branch change');
    await r.write('a.txt', 'trunk\n');
    await r.commitAll('trunk change');
    await expect(tree.git('rebase', 'main')).rejects.toThrow();
    await tree.write('junk.txt', 'half-done\n');
    await resetWorktree(r.dir, 'login');
    expect(await tree.git('symbolic-ref', 'HEAD')).toBe('refs/heads/tron/login');
    expect(await tree.git('rev-parse', 'HEAD')).toBe(head);
    expect(await tree.git('status', '--porcelain')).toBe('');
    expect(existsSync(join(wt.path, 'junk.txt'))).toBe(false);
  });

  it('attaches a fresh folder to the branch when the worktree folder is gone', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const wt = await createWorktree(r.dir, { id: 'login', base });
    await rm(wt.path, { recursive: true, force: true });
    await resetWorktree(r.dir, 'login');
    expect(await r.at(wt.path).git('symbolic-ref', 'HEAD')).toBe('refs/heads/tron/login');
  });
});

describe('clearEngineRefLocks', () => {
  it("removes stale locks on the engine's own refs and leaves the user's alone", async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    await createWorktree(r.dir, { id: 'login', base });
    const git = join(r.dir, '.git', 'refs');
    await mkdir(join(git, 'heads', 'orphan'), { recursive: true });
    await mkdir(join(git, 'tron', 'landed'), { recursive: true });
    const ours = [
      join(git, 'heads', 'tron', 'login.lock'),
      join(git, 'heads', 'orphan', 'login-1.lock'),
      join(git, 'tron', 'landed', 'login.lock'),
    ];
    const theirs = join(git, 'heads', 'main.lock');
    for (const file of [...ours, theirs]) await writeFile(file, '');
    // A lock some live process holds open is a running git's: never removed.
    const held = join(r.dir, '.git', 'packed-refs.lock');
    await writeFile(held, '');
    const fd = openSync(held, 'r');
    try {
      expect((await clearEngineRefLocks(r.dir)).sort()).toEqual([...ours].sort());
      expect(existsSync(held)).toBe(true);
    } finally {
      closeSync(fd);
    }
    expect(existsSync(theirs)).toBe(true);
    expect(await clearEngineRefLocks(r.dir)).toEqual([held]);
  });
});

describe('reuseBuildWorktree', () => {
  it('puts a sound build worktree at the sha asked, without its changes, untracked or ignored files', async () => {
    const r = await repo();
    await r.write('.gitignore', 'out/\n');
    const base = await r.commitAll('ignore out/');
    const wt = await createWorktree(r.dir, { id: 'x', base });
    const tree = r.at(wt.path);
    await tree.write('a.txt', 'built\n');
    const built = await tree.commitAll('built');
    await tree.write('a.txt', 'uncommitted\n');
    await tree.write('new.txt', 'untracked\n');
    await tree.write('out/cache', 'ignored\n');
    expect(await reuseBuildWorktree(r.dir, 'x', base)).toBe(true);
    expect(await r.git('rev-parse', 'refs/heads/tron/x')).toBe(base);
    expect(await tree.git('symbolic-ref', 'HEAD')).toBe('refs/heads/tron/x');
    expect(await tree.read('a.txt')).toBe('a\n');
    expect(existsSync(join(wt.path, 'new.txt')) || existsSync(join(wt.path, 'out'))).toBe(false);
    expect(await reuseBuildWorktree(r.dir, 'x', built)).toBe(true);
    expect(await tree.read('a.txt')).toBe('built\n');
  });

  it('refuses, changing nothing, a worktree whose .git names another repository, one mid-rebase, one off its branch, and none', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    expect(await reuseBuildWorktree(r.dir, 'x', base)).toBe(false);
    const wt = await createWorktree(r.dir, { id: 'x', base });
    const tree = r.at(wt.path);
    await tree.write('a.txt', 'work\n');
    // A worker rewrote the worktree's .git to point into another repository.
    const other = await repo();
    await other.git('fetch', '-q', r.dir, 'main');
    const otherHead = await other.git('rev-parse', 'HEAD');
    await writeFile(join(wt.path, '.git'), `gitdir: ${join(other.dir, '.git')}\n`);
    expect(await reuseBuildWorktree(r.dir, 'x', base)).toBe(false);
    expect(await other.git('rev-parse', 'HEAD')).toBe(otherHead);
    expect(await other.git('status', '--porcelain')).toBe('');
    await rm(wt.path, { recursive: true, force: true });
    await r.git('worktree', 'prune');
    await r.git('branch', '-D', 'tron/x');
    const again = await createWorktree(r.dir, { id: 'x', base });
    await r.at(again.path).write('a.txt', 'work\n');
    const admin = join(r.dir, '.git', 'worktrees', 'x');
    await mkdir(join(admin, 'rebase-merge'));
    expect(await reuseBuildWorktree(r.dir, 'x', base)).toBe(false);
    await rm(join(admin, 'rebase-merge'), { recursive: true });
    await r.at(again.path).git('checkout', '-q', '--detach');
    expect(await reuseBuildWorktree(r.dir, 'x', base)).toBe(false);
    expect(await r.at(again.path).read('a.txt')).toBe('work\n');
  });
});
