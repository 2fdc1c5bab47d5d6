import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { revParse } from './index.ts';
import { closeResolvers } from './resolver.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
async function repo(files: Record<string, string> = { 'a.txt': 'a\n' }) {
  const r = await makeRepo(files);
  repos.push(r);
  return r;
}
afterEach(async () => {
  closeResolvers();
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

describe('revParse by a long-lived resolver', () => {
  it('answers from the repository as it is now: a ref made, moved, packed and deleted after the first lookup', async () => {
    const r = await repo();
    const first = await r.git('rev-parse', 'HEAD');
    expect(await revParse(r.dir, 'refs/heads/side')).toBeUndefined();
    await r.git('commit', '-q', '--allow-empty', '-m', 'two');
    const second = await r.git('rev-parse', 'HEAD');
    await r.git('branch', 'side');
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(second);
    expect(await revParse(r.dir, 'refs/heads/side')).toBe(second);
    await r.git('pack-refs', '--all', '--prune');
    await r.git('update-ref', 'refs/heads/side', first);
    expect(await revParse(r.dir, 'refs/heads/side')).toBe(first);
    await r.git('pack-refs', '--all', '--prune');
    expect(await revParse(r.dir, 'refs/heads/side')).toBe(first);
    await r.git('update-ref', '-d', 'refs/heads/side');
    expect(await revParse(r.dir, 'refs/heads/side')).toBeUndefined();
  });

  it('finds a commit that a fetch brought in a pack after the lookup that missed it', async () => {
    const r = await repo();
    const other = await repo({ 'b.txt': 'b\n' });
    await other.git('repack', '-qad');
    const theirs = await other.git('rev-parse', 'HEAD');
    expect(await revParse(r.dir, theirs)).toBeUndefined();
    await r.git('fetch', '-q', '--no-tags', other.dir, 'main:refs/heads/theirs');
    expect(await revParse(r.dir, theirs)).toBe(theirs);
    expect(await revParse(r.dir, 'refs/heads/theirs')).toBe(theirs);
  });

  it('reads a repository removed and made again at the same path afresh, not from the one it first read', async () => {
    const r = await repo();
    const copy = mkdtempSync(join(tmpdir(), 'tron-resolver-'));
    try {
      cpSync(r.dir, copy, { recursive: true });
      const before = await revParse(copy, 'refs/heads/main');
      expect(before).toBe(await r.git('rev-parse', 'HEAD'));
      const again = await repo({ 'c.txt': 'c\n' });
      rmSync(copy, { recursive: true, force: true });
      cpSync(again.dir, copy, { recursive: true });
      expect(await revParse(copy, 'refs/heads/main')).toBe(await again.git('rev-parse', 'HEAD'));
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('leaves what is not a commit to rev-parse: an annotated tag is peeled to its commit, a tree refused', async () => {
    const r = await repo();
    const head = await r.git('rev-parse', 'HEAD');
    await r.git('tag', '-a', '-m', 'v1', 'v1');
    expect(await revParse(r.dir, 'refs/tags/v1')).toBe(head);
    await expect(revParse(r.dir, await r.git('rev-parse', 'HEAD^{tree}'))).rejects.toThrow(/expected commit/);
  });

  it('gives each of many lookups at once its own answer', async () => {
    const r = await repo();
    const shas: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      await r.git('commit', '-q', '--allow-empty', '-m', `c${i}`);
      shas.push(await r.git('rev-parse', 'HEAD'));
      await r.git('branch', `b${i}`);
    }
    const names = [...shas.map((_, i) => `refs/heads/b${i}`), 'refs/heads/none', ...shas.map((s) => s.slice(0, 40))];
    const answers = await Promise.all(names.map((n) => revParse(r.dir, n)));
    expect(answers).toEqual([...shas, undefined, ...shas]);
  });

  it("answers a worktree's HEAD from the worktree, not from the main folder", async () => {
    const r = await repo();
    const main = await r.git('rev-parse', 'HEAD');
    await r.git('commit', '-q', '--allow-empty', '-m', 'two');
    const wt = join(r.dir, '.tron', 'worktrees', 'x');
    await r.git('worktree', 'add', '-q', '--detach', wt, main);
    expect(await revParse(r.dir, 'HEAD')).toBe(await r.git('rev-parse', 'HEAD'));
    expect(await revParse(wt, 'HEAD')).toBe(main);
  });

  it('lets a process whose last await is a lookup get its answer and exit', async () => {
    const r = await repo();
    const script = join(r.dir, '..', `lookup-${process.pid}.mts`);
    const index = fileURLToPath(new URL('./index.ts', import.meta.url));
    writeFileSync(
      script,
      `import { revParse } from ${JSON.stringify(index)};\nconsole.log(await revParse(process.argv[2], 'refs/heads/main'));\n`,
    );
    try {
      // No tsx compile cache left in the temporary folder.
      const run = await execa('node', ['--import', 'tsx', script, r.dir], {
        timeout: 30_000,
        reject: false,
        env: { ...process.env, TSX_DISABLE_CACHE: '1' },
      });
      expect(run.timedOut).toBe(false);
      expect(run.stdout.trim()).toBe(await r.git('rev-parse', 'HEAD'));
    } finally {
      rmSync(script, { force: true });
    }
  });
});
