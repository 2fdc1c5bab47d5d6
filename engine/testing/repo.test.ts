import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFile, makeProject, ofType, runTron } from './project.ts';
import { GIT_IDENTITY_ENV, makeRepo } from './repo.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from './workers.ts';

describe('makeRepo', () => {
  it('builds one initial commit on the trunk from a file-tree literal, with its own identity', async () => {
    const r = await makeRepo({ 'README.md': '# hi\n', 'src/deep/x.ts': 'export {};\n' }, { trunk: 'trunk' });
    try {
      expect(await r.git('symbolic-ref', '--short', 'HEAD')).toBe('trunk');
      expect(await r.git('rev-list', '--count', 'HEAD')).toBe('1');
      expect((await r.git('ls-files')).split('\n')).toEqual(['README.md', 'src/deep/x.ts']);
      expect(await r.git('config', '--local', 'user.email')).toBe(GIT_IDENTITY_ENV.GIT_AUTHOR_EMAIL);
      expect(await r.git('config', '--local', 'commit.gpgsign')).toBe('false');
      expect(await r.git('log', '-1', '--format=%an <%ae>')).toBe('Tron Test <tron-test@example.invalid>');
      expect(await r.git('status', '--porcelain')).toBe('');
    } finally {
      await r.cleanup();
    }
    expect(existsSync(r.dir)).toBe(false);
  });

  it('commitAll records every change, new files included, and returns the new head', async () => {
    const r = await makeRepo({});
    try {
      await r.write('a/b.txt', 'b\n');
      const sha = await r.commitAll('add b');
      expect(sha).toBe(await r.git('rev-parse', 'HEAD'));
      expect(await r.git('show', '--format=%s', '--name-only', 'HEAD')).toBe('add b\n\na/b.txt');
      expect(await r.read('a/b.txt')).toBe('b\n');
      expect(await r.at(join(r.dir, 'a')).git('rev-parse', '--show-prefix')).toBe('a/');
    } finally {
      await r.cleanup();
    }
  });

  it("fails the test whose worker damaged the user's history: cleanup runs git fsck, names the missing object, and removes the folder anyway", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-workers-'));
    try {
      // The builder deletes a blob only history reaches (old.txt is gone from trunk): nothing a run looks at needs it.
      const builder = writeBuilder(
        dir,
        `${builderPrelude('committed')}o=$(git rev-parse main~1:old.txt); rm -f "$(git rev-parse --git-common-dir)/objects/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-)"
echo a > a.txt; git add a.txt; git commit -qm "Add a"
echo '>>DONE'
`,
      );
      const config = `${configFile({ workers: approvingWorkers(builder) })}\n[sandbox]\nmode = "off"\n`;
      const repo = await makeProject({ blocks: { a: {} }, files: { 'old.txt': 'old\n' }, config });
      const old = await repo.git('rev-parse', 'HEAD:old.txt');
      await repo.git('rm', '-q', 'old.txt');
      await repo.commitAll('remove old.txt');
      const run = await runTron(repo);
      expect(ofType(run.events, 'reply.received').length).toBeGreaterThan(0);
      await expect(repo.git('cat-file', '-e', old)).rejects.toThrow();
      await expect(repo.cleanup()).rejects.toThrow(
        new RegExp(`git fsck of the repository .* failed \\(exit \\d+\\):[^]*missing blob ${old}`),
      );
      expect(existsSync(repo.dir)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('skips the fsck only when asked, for a test that damages the store on purpose', async () => {
    const r = await makeRepo({ 'a.txt': 'a\n' });
    const blob = await r.git('rev-parse', 'HEAD:a.txt');
    rmSync(join(r.dir, '.git', 'objects', blob.slice(0, 2), blob.slice(2)));
    await expect(r.cleanup({ fsck: false })).resolves.toBeUndefined();
    expect(existsSync(r.dir)).toBe(false);
  });
});
