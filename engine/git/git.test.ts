import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import {
  branchesOf,
  commitsOver,
  currentTrunkSha,
  deleteBranch,
  diffStat,
  gitEnv,
  headAndTrunk,
  headOf,
  isAncestor,
  isClean,
  mergeBase,
  patchId,
  preserveOrphan,
  revParse,
} from './index.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
async function repo(files: Record<string, string> = { 'a.txt': 'one\ntwo\nthree\n', 'b.txt': 'bee\n' }, trunk?: string) {
  const r = await makeRepo(files, { trunk });
  repos.push(r);
  return r;
}
afterEach(async () => {
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

describe('refs', () => {
  it('revParse names the commit of a ref and is undefined for a missing one', async () => {
    const r = await repo();
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(await r.git('rev-parse', 'HEAD'));
    expect(await revParse(r.dir, 'refs/heads/nope')).toBeUndefined();
    expect(await revParse(r.dir, 'HEAD~5')).toBeUndefined();
  });

  it('currentTrunkSha reports a missing trunk as TRON_TRUNK_MISSING, a user error with the fix', async () => {
    const r = await repo({ 'a.txt': 'a\n' }, 'trunk');
    expect(await currentTrunkSha(r.dir, 'trunk')).toBe(await r.git('rev-parse', 'HEAD'));
    const err = await currentTrunkSha(r.dir, 'main').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect(err).toMatchObject({ code: 'TRON_TRUNK_MISSING', problems: [{ path: '.tron/config.toml: trunk' }] });
    expect(String((err as Error).message)).toContain('git branch main');
  });

  it('branchesOf lists only the branches matching the pattern', async () => {
    const r = await repo();
    await r.git('branch', 'tron/x');
    await r.git('branch', 'tron/y', 'HEAD');
    await r.git('branch', 'other');
    const head = await r.git('rev-parse', 'HEAD');
    expect(await branchesOf(r.dir, 'tron/*')).toEqual(
      new Map([
        ['tron/x', head],
        ['tron/y', head],
      ]),
    );
  });

  it('branchesOf reads the same listing whatever colour or column settings the config holds', async () => {
    const r = await repo();
    await r.git('branch', 'tron/x');
    await r.git('config', 'color.branch', 'always');
    await r.git('config', 'column.branch', 'always');
    expect(await branchesOf(r.dir, 'tron/*')).toEqual(new Map([['tron/x', await r.git('rev-parse', 'HEAD')]]));
  });

  it('deleteBranch removes a branch whatever it holds and is fine when it is gone', async () => {
    const r = await repo();
    await r.git('checkout', '-q', '-b', 'tron/x');
    await r.write('c.txt', 'unmerged work\n');
    await r.commitAll('work');
    await r.git('checkout', '-q', 'main');
    await deleteBranch(r.dir, 'tron/x');
    expect(await revParse(r.dir, 'refs/heads/tron/x')).toBeUndefined();
    await deleteBranch(r.dir, 'tron/x');
  });

  it('preserveOrphan numbers orphans after the highest taken, per block id', async () => {
    const r = await repo();
    const head = await r.git('rev-parse', 'HEAD');
    expect(await preserveOrphan(r.dir, 'a', head)).toBe('orphan/a-1');
    expect(await preserveOrphan(r.dir, 'a', head)).toBe('orphan/a-2');
    expect(await preserveOrphan(r.dir, 'a-1', head)).toBe('orphan/a-1-1');
    await r.git('branch', '-D', 'orphan/a-1');
    expect(await preserveOrphan(r.dir, 'a', head)).toBe('orphan/a-3');
    expect(await revParse(r.dir, 'refs/heads/orphan/a-3')).toBe(head);
    expect([...(await branchesOf(r.dir, 'orphan/*')).keys()].sort()).toEqual(['orphan/a-1-1', 'orphan/a-2', 'orphan/a-3']);
  });
});

describe('headAndTrunk', () => {
  it('reads the checked-out commit and trunk’s at once, and says when trunk does not exist', async () => {
    const r = await repo();
    const trunk = await r.git('rev-parse', 'main');
    await r.git('checkout', '-q', '-b', 'work');
    await r.write('c.txt', 'c\n');
    const head = await r.commitAll('more');
    expect(head).not.toBe(trunk);
    expect(await headAndTrunk(r.dir, 'main')).toEqual({ head, trunk });
    expect(await headAndTrunk(r.dir, 'no-such-trunk')).toEqual({ head, trunk: undefined });
  });
});

describe('history', () => {
  it('commitsOver lists what head adds over base, oldest first', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    const shas: string[] = [];
    for (const n of [1, 2, 3]) {
      await r.write('a.txt', `v${n}\n`);
      shas.push(await r.commitAll(`c${n}`));
    }
    expect(await commitsOver(r.dir, base, shas[2]!)).toEqual(shas);
    expect(await commitsOver(r.dir, shas[2]!, base)).toEqual([]);
    expect(await headOf(r.dir)).toBe(shas[2]);
  });

  it('isAncestor and mergeBase follow the commit graph', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    await r.git('checkout', '-q', '-b', 'side');
    await r.write('s.txt', 's\n');
    const side = await r.commitAll('side');
    await r.git('checkout', '-q', 'main');
    await r.write('m.txt', 'm\n');
    const main = await r.commitAll('main');
    expect(await isAncestor(r.dir, base, side)).toBe(true);
    expect(await isAncestor(r.dir, side, main)).toBe(false);
    expect(await isAncestor(r.dir, main, main)).toBe(true);
    expect(await mergeBase(r.dir, side, main)).toBe(base);
  });

  it('diffStat names the changed files', async () => {
    const r = await repo();
    const base = await r.git('rev-parse', 'HEAD');
    await r.write('src/new.ts', 'export {};\n');
    const head = await r.commitAll('add');
    const stat = await diffStat(r.dir, base, head);
    expect(stat).toContain('src/new.ts');
    expect(stat).toContain('1 file changed');
  });
});

describe('isClean', () => {
  it('sees modified and untracked files but not ignored ones', async () => {
    const r = await repo({ 'a.txt': 'a\n', '.gitignore': 'build/\n' });
    expect(await isClean(r.dir)).toEqual({ clean: true, status: '' });
    await r.write('build/out.js', 'ignored');
    expect((await isClean(r.dir)).clean).toBe(true);
    await r.write('a.txt', 'changed\n');
    expect(await isClean(r.dir)).toEqual({ clean: false, status: ' M a.txt' });
    await r.git('checkout', '--', 'a.txt');
    await r.write('deep/dir/new.txt', 'n');
    expect(await isClean(r.dir)).toEqual({ clean: false, status: '?? deep/dir/new.txt' });
  });
});

describe('patchId', () => {
  async function feature() {
    const r = await repo();
    const oldBase = await r.git('rev-parse', 'HEAD');
    await r.git('checkout', '-q', '-b', 'feature');
    await r.write('a.txt', 'one\nTWO\nthree\n');
    const oldHead = await r.commitAll('feature');
    await r.git('checkout', '-q', 'main');
    await r.write('b.txt', 'bee\nmore\n');
    const newBase = await r.commitAll('trunk moved');
    await r.git('rebase', '-q', 'main', 'feature');
    const newHead = await r.git('rev-parse', 'feature');
    return { r, oldBase, oldHead, newBase, newHead };
  }

  it('is equal for a patch carried unchanged by a rebase', async () => {
    const { r, oldBase, oldHead, newBase, newHead } = await feature();
    expect(newHead).not.toBe(oldHead);
    const before = await patchId(r.dir, oldBase, oldHead);
    expect(before).toMatch(/^[0-9a-f]{40}$/);
    expect(await patchId(r.dir, newBase, newHead)).toBe(before);
  });

  it('differs when the rebase changed the patch', async () => {
    const { r, oldBase, oldHead, newBase } = await feature();
    await r.write('a.txt', 'one\nTWO\nthree\nfour\n');
    const changed = await r.commitAll('more');
    expect(await patchId(r.dir, newBase, changed)).not.toBe(await patchId(r.dir, oldBase, oldHead));
  });

  it('is empty for an empty diff', async () => {
    const r = await repo();
    const head = await r.git('rev-parse', 'HEAD');
    expect(await patchId(r.dir, head, head)).toBe('');
  });

  it("does not depend on the user's diff settings", async () => {
    const { r, oldBase, oldHead } = await feature();
    const plain = await patchId(r.dir, oldBase, oldHead);
    await r.git('config', 'diff.noprefix', 'true');
    await r.git('config', 'diff.context', '0');
    await r.git('config', 'color.diff', 'always');
    expect(await patchId(r.dir, oldBase, oldHead)).toBe(plain);
  });
});

describe('gitEnv', () => {
  it('passes on PATH, HOME, LANG and TERM only, and adds the switches that keep git from prompting or reading HOME', () => {
    const env = gitEnv({
      PATH: '/bin',
      HOME: '/home/u',
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      OPENAI_API_KEY: 'sk-secret',
      SSH_AUTH_SOCK: '/tmp/agent',
      XDG_CONFIG_HOME: '/home/u/.config',
      GIT_DIR: '/elsewhere',
      GIT_INDEX_FILE: '/x',
      GIT_EXTERNAL_DIFF: '/evil',
      GIT_TERMINAL_PROMPT: '1',
    });
    expect(Object.keys(env).filter((name) => !name.startsWith('GIT_'))).toEqual(['PATH', 'HOME', 'LANG', 'TERM']);
    expect(env).toMatchObject({ HOME: '/home/u', GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' });
    for (const name of ['GIT_DIR', 'GIT_INDEX_FILE', 'GIT_EXTERNAL_DIFF']) expect(env).not.toHaveProperty(name);
  });
});
