import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkoutAt, createWorktree, engineCheckoutPath, worktreePath, landStack, landedRefs, replayOnto, revParse } from './index.ts';
import { commitAsAda, makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];

/** The engine's `_lane` checkout, put at each `onto` it is asked for (blocks of several commits). */
const lane = (repo: string) => (onto: string) => checkoutAt(repo, '_lane', onto);
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

/** A repo with trunk at `base` and blocks built from it, each in its own worktree with one commit. */
async function blocks(
  files: Record<string, Record<string, string>>,
  start: Record<string, string> = { 'list.txt': 'a\nb\nc\nd\ne\nf\ng\n' },
) {
  const r = await makeRepo({ ...start, '.gitignore': '/.tron/\n' });
  repos.push(r);
  const base = await r.git('rev-parse', 'HEAD');
  const heads: Record<string, string> = {};
  for (const [id, content] of Object.entries(files)) {
    const wt = await createWorktree(r.dir, { id, base });
    const tree = r.at(wt.path);
    for (const [path, text] of Object.entries(content)) await tree.write(path, text);
    heads[id] = await tree.commitAll(`Build ${id}`);
  }
  return { r, base, heads };
}

describe('replayOnto', () => {
  it('takes a head that already contains trunk as it is', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' } });
    const out = await replayOnto(r.dir, lane(r.dir), { sha: heads.a!, onto: base, trunk: base });
    expect(out).toMatchObject({ outcome: 'fast_forward', sha: heads.a, upstream: base });
    expect(out.outcome !== 'conflict' && out.patchAfter).toBe(out.patchBefore);
  });

  it('stacks one-commit blocks that touch different files, each on the one before, keeping author and patch, with no checkout', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' }, b: { 'b.txt': 'b\n' } });
    const a = await replayOnto(r.dir, lane(r.dir), { sha: heads.a!, onto: base, trunk: base });
    if (a.outcome === 'conflict') throw new Error('conflict');
    const b = await replayOnto(r.dir, lane(r.dir), { sha: heads.b!, onto: a.sha, trunk: base });
    expect(b).toMatchObject({ outcome: 'rebased', upstream: base });
    if (b.outcome === 'conflict') throw new Error('conflict');
    expect(b.patchAfter).toBe(b.patchBefore);
    expect(await r.git('rev-parse', `${b.sha}^`)).toBe(a.sha);
    expect(await r.git('show', '-s', '--format=%an <%ae> / %cn <%ce> / %s', b.sha)).toBe(
      'Tron Test <tron-test@example.invalid> / tron <tron@localhost> / Build b',
    );
    expect(await r.git('ls-tree', '--name-only', b.sha)).toContain('a.txt');
    expect(existsSync(engineCheckoutPath(r.dir, '_lane'))).toBe(false);
  });

  it('keeps each commit of a block — its message, author and author date — replaying them in order', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' }, b: { 'b.txt': 'b\n' } });
    const tree = r.at(worktreePath(r.dir, 'b'));
    await tree.write('b.txt', 'b\nmore\n');
    await tree.git('add', 'b.txt');
    const head = await commitAsAda(tree, 'More b\n\nwith a body line');
    const out = await replayOnto(r.dir, lane(r.dir), { sha: head, onto: heads.a!, trunk: base });
    if (out.outcome === 'conflict') throw new Error('conflict');
    const replayed = (await r.git('rev-list', '--reverse', `${heads.a}..${out.sha}`)).split('\n');
    expect(replayed).toHaveLength(2);
    const original = [heads.b!, head];
    for (const [i, sha] of replayed.entries()) {
      const show = (c: string) => r.git('show', '-s', '--format=%B%x00%an <%ae>%x00%ad', '--date=raw', c);
      expect(await show(sha)).toBe(await show(original[i]!));
    }
    expect(await r.git('show', '-s', '--format=%B', replayed[1]!)).toBe('More b\n\nwith a body line');
    expect(await r.git('show', `${out.sha}:b.txt`)).toBe('b\nmore');
  });

  it('tells a clean rebase whose patch changed (new context) from one that kept it', async () => {
    const { r, base, heads } = await blocks({
      upper: { 'list.txt': 'A\nb\nc\nd\ne\nf\ng\n' },
      lower: { 'list.txt': 'a\nb\nc\nD\ne\nf\ng\n' },
    });
    const upper = await replayOnto(r.dir, lane(r.dir), { sha: heads.upper!, onto: base, trunk: base });
    if (upper.outcome === 'conflict') throw new Error('conflict');
    const lower = await replayOnto(r.dir, lane(r.dir), { sha: heads.lower!, onto: upper.sha, trunk: base });
    expect(lower.outcome).toBe('rebased');
    if (lower.outcome === 'conflict') throw new Error('conflict');
    expect(lower.patchAfter).not.toBe(lower.patchBefore);
    expect(await r.git('show', `${lower.sha}:list.txt`)).toBe('A\nb\nc\nD\ne\nf\ng');
  });

  it('abandons a conflict and names its paths, with no checkout made and no ref moved', async () => {
    const { r, base, heads } = await blocks({ first: { 'list.txt': 'first\n' }, second: { 'list.txt': 'second\n' } });
    const first = await replayOnto(r.dir, lane(r.dir), { sha: heads.first!, onto: base, trunk: base });
    if (first.outcome === 'conflict') throw new Error('conflict');
    const second = await replayOnto(r.dir, lane(r.dir), { sha: heads.second!, onto: first.sha, trunk: base });
    expect(second).toMatchObject({ outcome: 'conflict', files: ['list.txt'] });
    expect(existsSync(engineCheckoutPath(r.dir, '_lane'))).toBe(false);
    expect(await r.git('rev-parse', 'main')).toBe(base);
    expect(await r.git('status', '--porcelain')).toBe('');
  });

  it('replays only the block’s own commits onto a new trunk, not what trunk had when it was built', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' }, b: { 'b.txt': 'b\n' } });
    await r.git('update-ref', 'refs/heads/main', heads.a!);
    const b = await replayOnto(r.dir, lane(r.dir), { sha: heads.b!, onto: heads.a!, trunk: heads.a! });
    if (b.outcome === 'conflict') throw new Error('conflict');
    expect(await r.git('rev-list', '--count', `${heads.a}..${b.sha}`)).toBe('1');
    expect(await r.git('rev-list', '--count', `${base}..${b.sha}`)).toBe('2');
  });

  it('runs no merge driver the repository configures: the merge it would make is a conflict', async () => {
    const { r, base, heads } = await blocks(
      { first: { 'list.txt': 'first\n' }, second: { 'list.txt': 'second\n' } },
      {
        'list.txt': 'start\n',
        '.gitattributes': 'list.txt merge=planted\n',
      },
    );
    const marker = join(r.dir, 'driver-ran');
    await r.git('config', 'merge.planted.driver', `touch ${marker}; cp %B %A`);
    const first = await replayOnto(r.dir, lane(r.dir), { sha: heads.first!, onto: base, trunk: base });
    if (first.outcome === 'conflict') throw new Error('conflict');
    expect(await replayOnto(r.dir, lane(r.dir), { sha: heads.second!, onto: first.sha, trunk: base })).toMatchObject({
      outcome: 'conflict',
    });
    expect(existsSync(marker)).toBe(false);
  });
});

describe('landStack', () => {
  it('moves trunk to the top and points every landed ref and branch at the block’s own commit, in one transaction', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' }, b: { 'b.txt': 'b\n' } });
    const a = await replayOnto(r.dir, lane(r.dir), { sha: heads.a!, onto: base, trunk: base });
    const b = await replayOnto(r.dir, lane(r.dir), { sha: heads.b!, onto: a.outcome === 'conflict' ? base : a.sha, trunk: base });
    if (a.outcome === 'conflict' || b.outcome === 'conflict') throw new Error('conflict');
    const result = await landStack(r.dir, {
      trunk: 'main',
      expectedOld: base,
      top: b.sha,
      blocks: [
        { id: 'a', sha: a.sha },
        { id: 'b', sha: b.sha },
      ],
    });
    expect(result).toMatchObject({ ok: true });
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(b.sha);
    expect(await landedRefs(r.dir)).toEqual(
      new Map([
        ['a', a.sha],
        ['b', b.sha],
      ]),
    );
    expect(await revParse(r.dir, 'refs/heads/tron/b')).toBe(b.sha);
    expect(await r.git('reflog', '-1', '--format=%gs', 'refs/heads/main')).toBe('tron: land a, b');
    expect(await r.read('b.txt')).toBe('b\n');
  });

  it('changes nothing when one block of the stack has already landed', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' } });
    await r.git('update-ref', 'refs/tron/landed/a', base);
    const before = await r.git('for-each-ref');
    expect(await landStack(r.dir, { trunk: 'main', expectedOld: base, top: heads.a!, blocks: [{ id: 'a', sha: heads.a! }] })).toEqual({
      ok: false,
      actual: base,
      reason: 'already-landed',
    });
    expect(await r.git('for-each-ref')).toBe(before);
  });

  it('refuses a block commit that is not below the top', async () => {
    const { r, base, heads } = await blocks({ a: { 'a.txt': 'a\n' }, b: { 'b.txt': 'b\n' } });
    await expect(
      landStack(r.dir, {
        trunk: 'main',
        expectedOld: base,
        top: heads.a!,
        blocks: [
          { id: 'a', sha: heads.a! },
          { id: 'b', sha: heads.b! },
        ],
      }),
    ).rejects.toMatchObject({ code: 'TRON_LAND_NOT_FAST_FORWARD' });
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(base);
  });
});
