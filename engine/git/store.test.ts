import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GitFailure, checkLanding, checkStore, createWorktree, explainFailure, land, revParse } from './index.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  // These tests damage the store on purpose: no git fsck at the end.
  await Promise.all(repos.splice(0).map((r) => r.cleanup({ fsck: false })));
});

/** A repository with two commits on trunk (loose objects), one landed ref, and a block's commit over trunk. */
async function repository() {
  const r = await makeRepo({ 'a.txt': 'a\n', '.gitignore': '/.tron/\n' });
  repos.push(r);
  await r.write('b.txt', 'b\n');
  const trunk = await r.commitAll('b');
  await r.git('update-ref', 'refs/tron/landed/b', trunk);
  const wt = await createWorktree(r.dir, { id: 'c', base: trunk });
  const tree = r.at(wt.path);
  await tree.write('c.txt', 'c\n');
  const block = await tree.commitAll('c');
  return { r, trunk, block, tree };
}

/** Moves a loose object out of the store (as a worker's `rm` would); returns where it went. */
function lose(r: TestRepo, sha: string): void {
  renameSync(join(r.dir, '.git', 'objects', sha.slice(0, 2), sha.slice(2)), join(r.dir, '.git', `lost-${sha}`));
}

describe('the object store check', () => {
  it('passes a whole repository, at start and before a landing', async () => {
    const { r, trunk, block } = await repository();
    await expect(checkStore(r.dir, 'main')).resolves.toBeUndefined();
    await expect(checkLanding(r.dir, 'main', trunk, block)).resolves.toBeUndefined();
  });

  it("names trunk's missing commit, with the way back from the remote when there is one", async () => {
    const { r, trunk } = await repository();
    await r.git('remote', 'add', 'origin', 'https://example.invalid/app.git');
    lose(r, trunk);
    const failure = checkStore(r.dir, 'main');
    await expect(failure).rejects.toMatchObject({ code: 'TRON_STORE_DAMAGED' });
    await expect(failure).rejects.toThrow(`refs/heads/main → commit ${trunk}`);
    await expect(failure).rejects.toThrow('refs/tron/landed/b');
    await expect(failure).rejects.toThrow('git fetch origin');
  });

  it("names a landed ref whose commit's tree is gone, and without a remote says to restore from a backup", async () => {
    const { r, trunk } = await repository();
    lose(r, await r.git('rev-parse', `${trunk}^{tree}`));
    const failure = checkStore(r.dir, 'main');
    await expect(failure).rejects.toThrow(`refs/tron/landed/b → the tree of commit ${trunk}`);
    await expect(failure).rejects.toThrow(/no remote holds a copy: restore \.git\/objects from a backup/);
  });

  it('refuses a landing over a missing blob, and neither trunk nor the landed ref moves', async () => {
    const { r, trunk, block } = await repository();
    lose(r, await r.git('rev-parse', `${block}:c.txt`));
    await expect(land(r.dir, { trunk: 'main', expectedOld: trunk, sha: block, id: 'c' })).rejects.toMatchObject({
      code: 'TRON_STORE_DAMAGED',
      message: expect.stringMatching(/missing blob/),
    });
    expect(await revParse(r.dir, 'refs/heads/main')).toBe(trunk);
    expect(await revParse(r.dir, 'refs/tron/landed/c')).toBeUndefined();
  });

  it('explains a failed git command by the damage under it, and leaves any other failure as it was', async () => {
    const { r, trunk } = await repository();
    const failed = new GitFailure('TRON_GIT_FAILED', 'git rev-parse --verify HEAD^{commit} failed: fatal: Needed a single revision');
    expect(await explainFailure(r.dir, 'main', failed)).toBe(failed);
    lose(r, trunk);
    const explained = await explainFailure(r.dir, 'main', failed);
    expect(explained).toMatchObject({ code: 'TRON_STORE_DAMAGED', message: expect.stringContaining('Needed a single revision') });
    const other = new Error('a worker crashed');
    expect(await explainFailure(r.dir, 'main', other)).toBe(other);
  });
});
