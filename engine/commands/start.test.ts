import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { execa } from 'execa';
import { blockFile, configFile, makeProject } from '../testing/project.ts';
import { snapshot } from '../testing/snapshot.ts';
import type { TestRepo } from '../testing/repo.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');
const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

const cases: Array<[string, Record<string, string>, string[]]> = [
  [
    'a dependency cycle',
    {
      '.tron/blocks/a.md': blockFile('a', { depends_on: ['b'] }),
      '.tron/blocks/b.md': blockFile('b', { depends_on: ['a'] }),
    },
    ['TRON_CYCLE', 'a → b → a'],
  ],
  ['a dependency on no block', { '.tron/blocks/a.md': blockFile('a', { depends_on: ['ghost'] }) }, ['TRON_DEPENDS_UNKNOWN', 'ghost']],
  ['an unknown config key', { '.tron/config.toml': `${configFile()}\nmax_paralel = 3\n` }, ['TRON_CONFIG_UNKNOWN_KEY', 'max_paralel']],
  [
    'malformed TOML in a block',
    { '.tron/blocks/a.md': '+++\ntitle = "x\ncriteria = ["y"]\n+++\n' },
    ['TRON_BLOCK_TOML', '.tron/blocks/a.md:2'],
  ],
  ['a block without criteria', { '.tron/blocks/a.md': '+++\ntitle = "x"\n+++\nbrief\n' }, ['TRON_BLOCK_CRITERIA']],
  ['a bad block id', { '.tron/blocks/Bad_Id.md': blockFile('x', {}) }, ['TRON_BLOCK_ID']],
];

describe('tron start on bad input', () => {
  for (const [title, files, expected] of cases) {
    it(`exits 2 on ${title}, names the problem, and changes nothing`, async () => {
      const repo = await makeProject({ blocks: {}, files });
      repos.push(repo);
      const before = snapshot(repo.dir);
      const result = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false });
      expect(result.exitCode).toBe(2);
      for (const text of expected) expect(result.stderr).toContain(text);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(snapshot(repo.dir)).toEqual(before);
    });
  }

  it('reports every problem at once', async () => {
    const repo = await makeProject({
      blocks: {},
      files: { '.tron/config.toml': `${configFile()}\nbogus = 1\n`, '.tron/blocks/a.md': blockFile('a', { depends_on: ['ghost'] }) },
    });
    repos.push(repo);
    const result = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('TRON_CONFIG_UNKNOWN_KEY');
    expect(result.stderr).toContain('TRON_DEPENDS_UNKNOWN');
  });

  it('refuses to start when the checked-out trunk has uncommitted changes, changing nothing', async () => {
    const repo = await makeProject({ blocks: { a: {} } });
    repos.push(repo);
    await repo.write('test.js', '// edited\n');
    const before = snapshot(repo.dir);
    const result = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('TRON_DIRTY_TRUNK_CHECKOUT');
    expect(snapshot(repo.dir)).toEqual(before);
  });
});
