import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { folderOf, isRepositoryName } from './names.ts';

const sha = (t: string) => createHash('sha256').update(t).digest('hex');

describe("a repository's name", () => {
  it('may be a remote’s normalized URL or a local remote’s path, never a control character', () => {
    expect(isRepositoryName('forge.example/team/app')).toBe(true);
    expect(isRepositoryName('/srv/git/app')).toBe(true);
    expect(isRepositoryName('myapp')).toBe(true);
    expect(isRepositoryName('bad\nname')).toBe(false);
    expect(isRepositoryName('')).toBe(false);
    expect(isRepositoryName('x'.repeat(256))).toBe(false);
  });

  it('becomes one plain folder where it becomes a path, two names never sharing one', () => {
    expect(folderOf('myapp', sha)).toBe('myapp');
    for (const name of ['../../etc', '..', '.', '/srv/git/app', 'forge.example/team/app', 'forge.example_team/app']) {
      const folder = folderOf(name, sha);
      expect(folder, name).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*$/);
    }
    expect(folderOf('forge.example/team/app', sha)).not.toBe(folderOf('forge.example_team/app', sha));
  });
});
