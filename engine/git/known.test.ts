import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { branchOfHead, checkLanding, createWorktree, isAncestor, patchId, replayInStore, type Sha } from './index.ts';
import { knownLine } from './known.ts';
import { closeResolvers, lookUpObject, readObject } from './resolver.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
const dirs: string[] = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  closeResolvers();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  await Promise.all(repos.splice(0).map((r) => r.cleanup()));
});

async function repo(files: Record<string, string>): Promise<TestRepo> {
  const r = await makeRepo(files);
  repos.push(r);
  return r;
}

/** Runs `work` with no git on PATH: whatever it still answers, it answered without a git process. */
async function withoutGit<T>(work: () => Promise<T>): Promise<T> {
  const empty = mkdtempSync(join(tmpdir(), 'tron-no-git-'));
  dirs.push(empty);
  vi.stubEnv('PATH', empty);
  try {
    return await work();
  } finally {
    vi.unstubAllEnvs();
  }
}

/** A commit on `from` adding `path`, made in the main checkout (detached). */
async function commitOn(r: TestRepo, from: Sha, path: string): Promise<Sha> {
  await r.git('checkout', '-q', '-f', '--detach', from);
  await r.write(path, `${path}\n`);
  await r.git('add', '-A');
  await r.git('commit', '-q', '-m', `Add ${path}`);
  return r.git('rev-parse', 'HEAD');
}

describe('answers git gave once are not asked again', () => {
  it('a patch id asked a second time is answered without a git process, and a pair never asked still needs git', async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const head = await commitOn(r, base, 'b.txt');
    const other = await commitOn(r, base, 'c.txt');
    const id = await patchId(r.dir, base, head);
    expect(id).toMatch(/^[0-9a-f]{40}$/);
    expect(await withoutGit(() => patchId(r.dir, base, head))).toBe(id);
    await expect(withoutGit(() => patchId(r.dir, base, other))).rejects.toThrow(/TRON_GIT_UNAVAILABLE/);
  });

  it("the lane's replay tells the landing its line of commits and the wrap that a block is on trunk, as git would", async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const a = await commitOn(r, base, 'x.txt');
    const b = await commitOn(r, base, 'y.txt');
    const trunk = await commitOn(r, base, 'z.txt');
    const replayed = await replayInStore(r.dir, trunk, [
      { block: 'a', sha: a },
      { block: 'b', sha: b },
    ]);
    expect(replayed.map((x) => x.outcome)).toEqual(['rebased', 'rebased']);
    const top = replayed.at(-1)!.sha;
    const listed = (await r.git('rev-list', `${trunk}..${top}`)).split('\n');
    expect([...(knownLine(r.dir, trunk, top) ?? [])].sort()).toEqual(listed.sort());
    expect(await withoutGit(() => isAncestor(r.dir, replayed[0]!.sha, top))).toBe(true);
    expect(await withoutGit(() => isAncestor(r.dir, trunk, top))).toBe(true);
    // "No" is never kept: git is asked.
    await expect(withoutGit(() => isAncestor(r.dir, top, trunk))).rejects.toThrow(/TRON_GIT_UNAVAILABLE/);
    expect(await isAncestor(r.dir, top, trunk)).toBe(false);
  });

  it('knows no line of commits that git has not shown it', async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const head = await commitOn(r, base, 'b.txt');
    expect(knownLine(r.dir, base, head)).toBeUndefined();
  });
});

describe('reads without a process', () => {
  it("a worktree's branch comes from its HEAD file; a detached one names none; a HEAD that is a link is asked of git", async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const { path } = await createWorktree(r.dir, { id: 'blk', base });
    expect(await withoutGit(() => branchOfHead(path))).toBe('refs/heads/tron/blk');
    await r.at(path).git('checkout', '-q', '--detach');
    expect(await withoutGit(() => branchOfHead(path))).toBeUndefined();
    // The HEAD file replaced by a link to a file naming another branch: git follows it, and so do we by asking git.
    const gitDir = await r.at(path).git('rev-parse', '--absolute-git-dir');
    const elsewhere = join(gitDir, 'HEAD.other');
    writeFileSync(elsewhere, 'ref: refs/heads/main\n');
    rmSync(join(gitDir, 'HEAD'));
    symlinkSync(elsewhere, join(gitDir, 'HEAD'));
    await expect(withoutGit(() => branchOfHead(path))).rejects.toThrow(/TRON_GIT_UNAVAILABLE|could not run git/);
  });

  it('the long-lived reader gives an object whole, byte for byte, and answers one after another in order', async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    // A message that is not UTF-8 and holds newlines: its size is counted in bytes.
    await r.git('commit', '-q', '--allow-empty', '-m', 'caf\u00e9\n\nline two');
    const head = await r.git('rev-parse', 'HEAD');
    const raw = (await r.git('cat-file', 'commit', head)).length;
    const [one, two, none] = await Promise.all([readObject(r.dir, head), readObject(r.dir, base), readObject(r.dir, '0'.repeat(40))]);
    expect(one).toMatchObject({ sha: head, type: 'commit' });
    expect(typeof one === 'object' && Buffer.from(one.body, 'latin1').toString('utf8')).toContain('café\n\nline two');
    expect(typeof one === 'object' && Buffer.from(one.body, 'latin1').toString('utf8').trimEnd().length).toBe(raw);
    expect(two).toMatchObject({ sha: base, type: 'commit' });
    expect(none).toBe('missing');
  });

  it('the long-lived resolver tells an object and its type, and a missing tree makes the landing check fail', async () => {
    const r = await repo({ 'a.txt': 'a\n' });
    const base = await r.git('rev-parse', 'HEAD');
    const tree = await r.git('rev-parse', `${base}^{tree}`);
    expect(await lookUpObject(r.dir, `${base}^{tree}`)).toEqual({ sha: tree, type: 'tree' });
    expect(await lookUpObject(r.dir, 'refs/heads/no-such-branch')).toBe('missing');
    const head = await commitOn(r, base, 'b.txt');
    await checkLanding(r.dir, 'main', base, head);
    rmSync(join(r.dir, '.git', 'objects', tree.slice(0, 2), tree.slice(2)));
    await expect(checkLanding(r.dir, 'main', base, head)).rejects.toThrow(/TRON_STORE_DAMAGED/);
    await r.cleanup({ fsck: false }).catch(() => undefined);
    repos.splice(repos.indexOf(r), 1);
  });
});
