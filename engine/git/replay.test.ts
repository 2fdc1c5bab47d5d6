import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkoutAt, engineCheckoutPath, patchId, replayInStore, replayOnto, type Sha } from './index.ts';
import { commitAsAda, makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

async function repo(files: Record<string, string>): Promise<TestRepo> {
  const r = await makeRepo(files);
  repos.push(r);
  return r;
}

/** Commits on top of `from` (detached, in the main checkout): files written (text) or deleted (null). */
async function commitOn(r: TestRepo, from: Sha, changes: Record<string, string | null>, message = 'change'): Promise<Sha> {
  await r.git('checkout', '-q', '-f', '--detach', from);
  await r.git('clean', '-fdq');
  for (const [path, text] of Object.entries(changes)) {
    if (text === null) await rm(join(r.dir, path), { force: true });
    else await r.write(path, text);
  }
  await r.git('add', '-A');
  await r.git('commit', '-q', '--allow-empty', '-m', message);
  return r.git('rev-parse', 'HEAD');
}

/** The stack replayed one block at a time (stack.ts, merge-tree or cherry-pick): each block's commit, or its outcome when not clean. */
async function oneByOne(r: TestRepo, trunk: Sha, heads: readonly Sha[]): Promise<Array<Sha | string>> {
  const out: Array<Sha | string> = [];
  let top = trunk;
  for (const sha of heads) {
    const x = await replayOnto(r.dir, (onto) => checkoutAt(r.dir, '_lane', onto), { sha, onto: top, trunk });
    if (x.outcome === 'conflict' || x.patchAfter !== x.patchBefore) {
      out.push(x.outcome === 'conflict' ? 'conflict' : 'changed');
      continue;
    }
    out.push(x.sha);
    top = x.sha;
  }
  return out;
}

const treeOf = (r: TestRepo, sha: Sha) => r.git('rev-parse', `${sha}^{tree}`);

describe('replayInStore', () => {
  it('stacks blocks on different files in one go: the trees merge-tree would make, each on the one before, author, date, message and patch kept', async () => {
    const r = await repo({ 'list.txt': 'a\n', 'src/x.txt': 'x\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const a = await commitOn(r, base, { 'a.txt': 'a\n' }, 'Add a');
    const b = await commitOn(r, base, { 'src/b.txt': 'b\n' }, 'Add b\n\nwith a body');
    await r.git('checkout', '-q', '--detach', a);
    await r.write('a.txt', 'a\nmore\n');
    await r.git('add', '-A');
    const a2 = await commitAsAda(r, 'More a');
    const trunk = await commitOn(r, base, { 'list.txt': 'a\nt\n' }, 'Trunk moves');

    const out = await replayInStore(r.dir, trunk, [
      { block: 'a', sha: a2 },
      { block: 'b', sha: b },
    ]);
    expect(out.map((x) => [x.block, x.outcome, x.upstream])).toEqual([
      ['a', 'rebased', base],
      ['b', 'rebased', base],
    ]);
    // No ref left behind, no checkout made.
    expect(await r.git('for-each-ref', 'refs/tron/')).toBe('');
    expect(existsSync(engineCheckoutPath(r.dir, '_lane'))).toBe(false);
    const reference = await oneByOne(r, trunk, [a2, b]);
    for (const [i, x] of out.entries()) expect(await treeOf(r, x.sha)).toBe(await treeOf(r, reference[i]!));
    // a's two commits, then b's one, in a line on trunk.
    expect((await r.git('rev-list', '--reverse', `${trunk}..${out[1]!.sha}`)).split('\n')).toHaveLength(3);
    expect(await r.git('rev-parse', `${out[1]!.sha}^`)).toBe(out[0]!.sha);
    const show = (sha: string) => r.git('show', '-s', '--format=%B%x00%an <%ae> %ad%x00%cn <%ce>', '--date=raw', sha);
    const made = (await r.git('rev-list', '--reverse', `${trunk}..${out[1]!.sha}`)).split('\n');
    for (const [i, original] of [a, a2, b].entries()) {
      const [message, author, committer] = (await show(made[i]!)).split('\0');
      const [message0, author0] = (await show(original)).split('\0');
      expect([message, author, committer]).toEqual([message0, author0, 'tron <tron@localhost>']);
    }
    for (const x of out) expect(x.patch).toBe(await patchId(r.dir, base, x.sha === out[0]!.sha ? a2 : b));
    expect(out[0]!.patch).not.toBe('');
  });

  it('takes the bottom block as it is when it already sits on trunk', async () => {
    const r = await repo({ 'list.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const a = await commitOn(r, base, { 'a.txt': 'a\n' });
    const b = await commitOn(r, base, { 'b.txt': 'b\n' });
    const out = await replayInStore(r.dir, base, [
      { block: 'a', sha: a },
      { block: 'b', sha: b },
    ]);
    expect(out.map((x) => x.outcome)).toEqual(['fast_forward', 'rebased']);
    expect(out[0]!.sha).toBe(a);
    expect(await r.git('rev-parse', `${out[1]!.sha}^`)).toBe(a);
  });

  it('stops at the first block whose paths meet the stack below it, and takes none after it', async () => {
    const r = await repo({ 'list.txt': 'a\nb\nc\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const one = await commitOn(r, base, { 'list.txt': 'A\nb\nc\n' });
    const two = await commitOn(r, base, { 'list.txt': 'a\nb\nC\n' });
    const three = await commitOn(r, base, { 'three.txt': '3\n' });
    const out = await replayInStore(r.dir, base, [
      { block: 'one', sha: one },
      { block: 'two', sha: two },
      { block: 'three', sha: three },
    ]);
    expect(out.map((x) => x.block)).toEqual(['one']);
  });

  it('leaves to the one-by-one replay a block adding a file to a folder trunk emptied — a rename git may follow', async () => {
    const r = await repo({ 'old/a.txt': 'a\n', 'old/b.txt': 'b\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const block = await commitOn(r, base, { 'old/new.txt': 'new\n' });
    await r.git('checkout', '-q', '--detach', base);
    await r.git('mv', 'old', 'moved');
    await r.git('commit', '-q', '-m', 'rename the folder');
    const trunk = await r.git('rev-parse', 'HEAD');
    expect(await replayInStore(r.dir, trunk, [{ block: 'x', sha: block }])).toEqual([]);
  });

  it('keeps paths and messages byte for byte: quotes, newlines, non-UTF-8', async () => {
    const r = await repo({ 'list.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const odd = ['"quoted" name.txt', 'new\nline.txt', 'tab\there.txt', 'sp ace/ü.txt'];
    const block = await commitOn(r, base, Object.fromEntries(odd.map((p) => [p, `${p}\n`])));
    // A message in latin1 bytes, with no encoding header: kept as it is.
    await r.git('checkout', '-q', '--detach', block);
    await r.write('latin.txt', 'x\n');
    await r.git('add', '-A');
    const message = join(r.dir, '.git', 'MSG');
    await import('node:fs/promises').then((fs) => fs.writeFile(message, Buffer.from('caf\xe9 \xe0 la carte\n', 'latin1')));
    await r.git('commit', '-q', '-F', message);
    const head = await r.git('rev-parse', 'HEAD');
    const trunk = await commitOn(r, base, { 'list.txt': 'a\nb\n' });
    const out = await replayInStore(r.dir, trunk, [{ block: 'odd', sha: head }]);
    expect(out).toHaveLength(1);
    const [reference] = await oneByOne(r, trunk, [head]);
    expect(await treeOf(r, out[0]!.sha)).toBe(await treeOf(r, reference!));
    const body = async (sha: string) => {
      const { execa } = await import('execa');
      const raw = (await execa('git', ['cat-file', 'commit', sha], { cwd: r.dir, encoding: 'buffer' })).stdout;
      return Buffer.from(raw).subarray(Buffer.from(raw).indexOf('\n\n') + 2);
    };
    expect((await body(out[0]!.sha)).equals(await body(head))).toBe(true);
  });

  it('agrees with merge-tree and cherry-pick on every block it takes, over random stacks', async () => {
    let seed = 20261130;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    const start = ['a.txt', 'b.txt', 'c.txt', 'h.txt', 'i.txt', 'd/x.txt', 'd/y.txt', 'd/e/z.txt', 'f/g.txt', 'k/l.txt', 'k/m.txt'];
    const fresh = ['n.txt', 'd/n.txt', 'd/e/n.txt', 'f/n.txt', 'g/n.txt', 'd', 'f/g.txt/h'];
    const r = await repo(Object.fromEntries(start.map((p) => [p, `${p}\n1\n2\n3\n4\n5\n`])));
    const base = await r.git('rev-parse', 'HEAD');
    /** A random change of one or two files: edit (first or last line), delete or add. */
    const change = (salt: string): Record<string, string | null> => {
      const out: Record<string, string | null> = {};
      for (let n = 0; n < 1 + Math.floor(random() * 2); n++) {
        const kind = random();
        if (kind < 0.5) {
          const p = pick(start);
          out[p] = random() < 0.5 ? `${p}\n1\n2\n3\n4\n5\n${salt}\n` : `${salt}\n${p}\n1\n2\n3\n4\n5\n`;
        } else if (kind < 0.7) out[pick(start)] = null;
        else out[pick(fresh)] = `${salt}\n`;
      }
      return out;
    };
    let taken = 0;
    for (let round = 0; round < 16; round++) {
      const trunk = random() < 0.3 ? base : await commitOn(r, base, change(`t${round}`)).catch(() => base);
      const heads: Sha[] = [];
      for (let i = 0; i < 3; i++) {
        let head = await commitOn(r, base, change(`b${round}.${i}`)).catch(() => base);
        if (random() < 0.3) head = await commitOn(r, head, change(`c${round}.${i}`)).catch(() => head);
        if (head !== base) heads.push(head);
      }
      const out = await replayInStore(
        r.dir,
        trunk,
        heads.map((sha, i) => ({ block: `b${i}`, sha })),
      );
      const reference = await oneByOne(r, trunk, heads);
      for (const [i, x] of out.entries()) {
        expect(reference[i], `round ${round}, block ${i}`).toMatch(/^[0-9a-f]{40}$/);
        expect(await treeOf(r, x.sha), `round ${round}, block ${i}`).toBe(await treeOf(r, reference[i]!));
      }
      taken += out.length;
    }
    // Not vacuous: these stacks overlap often (the one-by-one replay finds most of them
    // conflicting or changed), yet the bulk replay takes a block in over half the rounds.
    expect(taken).toBeGreaterThanOrEqual(8);
  });
});
