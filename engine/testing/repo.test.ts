import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GIT_IDENTITY_ENV, makeRepo } from './repo.ts';

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
});
