import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { execa } from 'execa';
import { readdirSync } from 'node:fs';
import { blockFile, configFile, makeProject, runTron } from '../testing/project.ts';
import { answerCommand } from './answer.ts';
import { ManualClock } from '../core/clock.ts';
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

describe('tron start with nothing to do', () => {
  const runDirs = (repo: TestRepo) => readdirSync(join(repo.dir, '.tron', 'runs')).sort();

  it('writes no new run directory once every block landed, and exits 0', async () => {
    const repo = await makeProject({
      blocks: { a: {} },
      sim: '[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nreply = ">>DONE"\n',
    });
    repos.push(repo);
    expect((await runTron(repo)).exit).toBe(0);
    const before = runDirs(repo);
    const again = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toMatch(/^tron: nothing to do — 1 landed, 0 parked, 0 abandoned; no new run \(the latest: .*\)$/m);
    expect(runDirs(repo)).toEqual(before);
  });

  it('writes none for a parked block with no answer, nor after it was abandoned, and exits 3; a waiting answer does start a run', async () => {
    const repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
    });
    repos.push(repo);
    expect((await runTron(repo)).exit).toBe(3);
    const one = runDirs(repo);
    const parked = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(parked.exitCode).toBe(3);
    expect(parked.stdout).toContain('nothing to do — 0 landed, 1 parked, 0 abandoned');
    expect(parked.stdout).toContain(`tron answer --repo ${repo.dir} stuck '>>RETRY`);
    expect(runDirs(repo)).toEqual(one);

    await answerCommand({
      repo: repo.dir,
      block: 'stuck',
      line: '>>ABANDON {"reason":"out of scope"}',
      clock: new ManualClock(1),
      print: () => {},
    });
    const answered = await runTron(repo);
    expect(answered.exit).toBe(3);
    expect(answered.events.find((e) => e.type === 'block.abandoned')).toMatchObject({ block: 'stuck' });
    const two = runDirs(repo);
    expect(two).toHaveLength(2);
    const abandoned = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(abandoned.exitCode).toBe(3);
    expect(abandoned.stdout).toContain('nothing to do — 0 landed, 0 parked, 1 abandoned');
    expect(runDirs(repo)).toEqual(two);
  });

  it('still starts a run when a new block file arrives', async () => {
    const repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
    });
    repos.push(repo);
    expect((await runTron(repo)).exit).toBe(3);
    await repo.write('.tron/blocks/fresh.md', blockFile('fresh', {}));
    const next = await runTron(repo);
    expect(next.events.find((e) => e.type === 'register.loaded')).toBeDefined();
    expect(runDirs(repo)).toHaveLength(2);
  });
});
