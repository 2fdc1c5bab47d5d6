import { existsSync } from 'node:fs';
import { utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  allOnTrunk,
  catchUpCheckout,
  checkMainCheckout,
  clearLandingLocks,
  createWorktree,
  land,
  landedRefs,
  mainCheckout,
  revParse,
} from './index.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

/** A repo whose block `login` has one commit over trunk: edits a.txt, adds new.txt, deletes old.txt. */
async function built() {
  const r = await makeRepo({ 'a.txt': 'a\n', 'old.txt': 'old\n', 'keep.txt': 'keep\n', '.gitignore': '/.tron/\n' });
  repos.push(r);
  const base = await r.git('rev-parse', 'HEAD');
  const wt = await createWorktree(r.dir, { id: 'login', base });
  const tree = r.at(wt.path);
  await tree.write('a.txt', 'a, improved\n');
  await tree.write('new.txt', 'new\n');
  await tree.git('rm', '-q', 'old.txt');
  const head = await tree.commitAll('login');
  return { r, base, head, tree };
}

const refsOf = async (r: TestRepo) => r.git('for-each-ref', '--format=%(refname) %(objectname)');

describe('land', () => {
  it('moves trunk and creates refs/tron/landed/<id> together', async () => {
    const { r, base, head } = await built();
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toMatchObject({ ok: true });
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(head);
    expect(await landedRefs(r.dir)).toEqual(new Map([['login', head]]));
    expect(await r.git('reflog', '-1', '--format=%gs', 'refs/heads/main')).toBe('tron: land login');
  });

  it('changes neither ref when trunk is not at expectedOld, and returns the actual trunk', async () => {
    const { r, base, head } = await built();
    await r.write('other.txt', 'someone else landed\n');
    const moved = await r.commitAll('moved');
    const before = await refsOf(r);
    expect(await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' })).toEqual({
      ok: false,
      actual: moved,
      reason: 'trunk-moved',
    });
    expect(await refsOf(r)).toBe(before);
    expect(await landedRefs(r.dir)).toEqual(new Map());
  });

  it('changes nothing when the block already has a landed ref', async () => {
    const { r, base, head } = await built();
    await r.git('update-ref', 'refs/tron/landed/login', base);
    const before = await refsOf(r);
    expect(await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' })).toEqual({
      ok: false,
      actual: base,
      reason: 'already-landed',
    });
    expect(await refsOf(r)).toBe(before);
  });

  it('refuses a sha that does not fast-forward trunk, changing nothing', async () => {
    const { r, base, head } = await built();
    await r.git('checkout', '-q', '-b', 'elsewhere', base);
    await r.write('x.txt', 'x\n');
    const sideways = await r.commitAll('sideways');
    await r.git('checkout', '-q', 'main');
    await r.git('update-ref', 'refs/heads/main', head);
    await r.git('reset', '-q', '--hard');
    const before = await refsOf(r);
    await expect(land(r.dir, { trunk: 'main', expectedOld: head, sha: sideways, id: 'login' })).rejects.toMatchObject({
      code: 'TRON_LAND_NOT_FAST_FORWARD',
    });
    expect(await refsOf(r)).toBe(before);
  });

  it("brings the user's checked-out trunk files along, keeping unrelated local edits", async () => {
    const { r, base, head } = await built();
    await r.write('keep.txt', 'my local edit\n');
    await r.write('scratch.txt', 'untracked\n');
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toEqual({ ok: true, checkout: { state: 'updated', path: r.dir } });
    expect(await r.read('a.txt')).toBe('a, improved\n');
    expect(await r.read('new.txt')).toBe('new\n');
    expect(existsSync(join(r.dir, 'old.txt'))).toBe(false);
    expect(await r.read('keep.txt')).toBe('my local edit\n');
    // (the helper trims stdout, hence no leading space before M)
    expect(await r.git('status', '--porcelain')).toBe('M keep.txt\n?? scratch.txt');
  });

  it('follows a file that was only touched (same content, new timestamp)', async () => {
    const { r, base, head } = await built();
    await utimes(join(r.dir, 'a.txt'), new Date('2001-01-01T00:00:00Z'), new Date('2001-01-01T00:00:00Z'));
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toMatchObject({ ok: true, checkout: { state: 'updated' } });
    expect(await r.read('a.txt')).toBe('a, improved\n');
  });

  it('never overwrites an untracked file where the landing adds one', async () => {
    const { r, base, head } = await built();
    await r.write('new.txt', 'my own new.txt\n');
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toMatchObject({ ok: true, checkout: { state: 'failed' } });
    expect(await r.read('new.txt')).toBe('my own new.txt\n');
    expect(await r.read('a.txt')).toBe('a\n');
  });

  it('leaves a checkout on another branch untouched', async () => {
    const { r, base, head } = await built();
    await r.git('checkout', '-q', '-b', 'mine');
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toEqual({ ok: true, checkout: { state: 'not-checked-out' } });
    expect(await r.read('a.txt')).toBe('a\n');
    expect(await r.git('status', '--porcelain')).toBe('');
  });

  it('never overwrites a local edit to a file the landing changes: trunk lands, the checkout reports how to follow', async () => {
    const { r, base, head } = await built();
    await r.write('a.txt', 'my conflicting edit\n');
    const result = await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(result).toMatchObject({ ok: true, checkout: { state: 'failed', path: r.dir } });
    expect(result.ok && result.checkout.state === 'failed' && result.checkout.message).toContain(`git read-tree -m -u ${base} ${head}`);
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(head);
    expect(await r.read('a.txt')).toBe('my conflicting edit\n');
  });
});

describe('mainCheckout', () => {
  it('sees uncommitted tracked changes on trunk as dirty, untracked files as clean', async () => {
    const r = await makeRepo({ 'a.txt': 'a\n' });
    repos.push(r);
    await r.write('untracked.txt', 'u');
    expect(await mainCheckout(r.dir, 'main')).toEqual({ onTrunk: true, dirty: false, status: '', path: r.dir });
    expect(await checkMainCheckout(r.dir, 'main')).toBeUndefined();
    await r.write('a.txt', 'edited\n');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: true, dirty: true, status: ' M a.txt' });
    const problem = await checkMainCheckout(r.dir, 'main');
    expect(problem).toMatchObject({ code: 'TRON_DIRTY_TRUNK_CHECKOUT', path: r.dir });
    expect(problem?.message).toContain('a.txt');
  });

  it('does not object to a dirty checkout of another branch', async () => {
    const r = await makeRepo({ 'a.txt': 'a\n' });
    repos.push(r);
    await r.git('checkout', '-q', '-b', 'mine');
    await r.write('a.txt', 'edited\n');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: false, dirty: true });
    expect(await checkMainCheckout(r.dir, 'main')).toBeUndefined();
  });

  it('finds trunk checked out in a linked worktree of the user, but never in the engine worktrees', async () => {
    const r = await makeRepo({ 'a.txt': 'a\n' });
    repos.push(r);
    await r.git('checkout', '-q', '-b', 'mine');
    const linked = join(r.dir, 'linked-main');
    await r.git('worktree', 'add', '-q', linked, 'main');
    await r.at(linked).write('a.txt', 'edited\n');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: true, dirty: true, path: linked });
    await r.git('worktree', 'remove', '--force', linked);
    await r.git('worktree', 'add', '-q', join(r.dir, '.tron/worktrees/odd'), 'main');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: false, path: r.dir });
  });
});

describe('your checkout of trunk, told from its HEAD', () => {
  it('is not a detached checkout at trunk’s commit, and is one whose HEAD git keeps as a link', async () => {
    const r = await makeRepo({ 'a.txt': 'a\n' });
    repos.push(r);
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: true, path: r.dir });
    await r.git('checkout', '-q', '--detach', 'main');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: false });
    await r.git('-c', 'core.preferSymlinkRefs=true', 'symbolic-ref', 'HEAD', 'refs/heads/main');
    expect(await mainCheckout(r.dir, 'main')).toMatchObject({ onTrunk: true, path: r.dir });
  });
});

describe('allOnTrunk', () => {
  it('is true once a branch has landed and false while it has a commit trunk lacks', async () => {
    const { r, base, head, tree } = await built();
    expect(await allOnTrunk(r.dir, head, 'main')).toBe(false);
    await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' });
    expect(await allOnTrunk(r.dir, head, 'main')).toBe(true);
    await tree.write('extra.txt', 'extra\n');
    const extra = await tree.commitAll('extra');
    expect(await allOnTrunk(r.dir, extra, 'main')).toBe(false);
  });
});

describe('catchUpCheckout', () => {
  it('moves a checkout a killed landing left behind, index.lock and all, and leaves a checkout with your changes alone', async () => {
    const { r, base, head } = await built();
    // The ref transaction went through; the engine died while moving the checkout, holding its index.lock.
    await r.git('update-ref', 'refs/heads/main', head, base);
    await writeFile(join(r.dir, '.git', 'index.lock'), '');
    expect(await catchUpCheckout(r.dir, 'main', [base])).toBe(base);
    expect(await r.read('a.txt')).toBe('a, improved\n');
    expect(existsSync(join(r.dir, '.git', 'index.lock'))).toBe(false);
    expect(await r.git('status', '--porcelain')).toBe('');
  });

  it('takes no lock while it only looks, and touches nothing that is not as a landing left it', async () => {
    const { r, base, head } = await built();
    await r.git('update-ref', 'refs/heads/main', head, base);
    await r.write('keep.txt', 'my edit\n');
    await writeFile(join(r.dir, '.git', 'index.lock'), '');
    expect(await catchUpCheckout(r.dir, 'main', [base])).toBeUndefined();
    expect(existsSync(join(r.dir, '.git', 'index.lock'))).toBe(true);
    expect(await r.read('a.txt')).toBe('a\n');
  });
});

describe('clearLandingLocks', () => {
  it('removes the lock files a landing killed midway leaves behind, after which the landing goes through', async () => {
    const { r, base, head } = await built();
    const stale = [join(r.dir, '.git', 'refs', 'heads', 'main.lock'), join(r.dir, '.git', 'index.lock'), join(r.dir, '.git', 'HEAD.lock')];
    for (const file of stale) await writeFile(file, '');
    await expect(land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' })).rejects.toThrow(/main\.lock/);
    expect((await clearLandingLocks(r.dir, 'main', ['login'])).sort()).toEqual(stale.sort());
    for (const file of stale) expect(existsSync(file)).toBe(false);
    expect(await land(r.dir, { trunk: 'main', expectedOld: base, sha: head, id: 'login' })).toMatchObject({ ok: true });
    expect(await clearLandingLocks(r.dir, 'main', ['login'])).toEqual([]);
  });
});
