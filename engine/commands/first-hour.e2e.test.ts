/**
 * The README's own words, as a newcomer follows them with the sim preset: `tron init
 * --worker sim`, two blocks of one's own beside the example, commit `.tron/`, `tron start`
 * — and every block lands. Run through `bin/tron.js`, as the README's commands are typed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { tronPath } from '../root.ts';
import { GIT_IDENTITY_ENV, makeRepo, testGit, type TestRepo } from '../testing/repo.ts';
import { blockFile } from '../testing/project.ts';

const BIN = tronPath('bin', 'tron.js');
const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

describe('the first hour with the sim preset', () => {
  it('lands the example block and two blocks of your own after tron init --worker sim and tron start, with exit 0', async () => {
    const repo = await makeRepo({
      'package.json': `${JSON.stringify({ name: 'calc', private: true, scripts: { test: 'node test.js' } }, null, 2)}\n`,
      'test.js': "require('node:assert').strictEqual(1 + 1, 2);\n",
      'README.md': '# calc\n',
    });
    repos.push(repo);
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, XDG_STATE_HOME: process.env.XDG_STATE_HOME, ...GIT_IDENTITY_ENV };
    const tron = (...args: string[]) => execa('node', [BIN, ...args], { reject: false, stdin: 'ignore', env, extendEnv: false });

    // tron init --repo ../myapp --worker sim
    const init = await tron('init', '--repo', repo.dir, '--worker', 'sim');
    expect(init.exitCode, init.stderr).toBe(0);
    expect(init.stdout).toContain('created .tron/sim.toml');
    expect(readFileSync(join(repo.dir, '.tron/config.toml'), 'utf8')).toContain('test = "npm test"');

    // $EDITOR ../myapp/.tron/blocks/… — two blocks of one's own, one depending on the other.
    writeFileSync(join(repo.dir, '.tron/blocks/add.md'), blockFile('add', { criteria: ['add(2, 3) is 5'] }));
    writeFileSync(
      join(repo.dir, '.tron/blocks/subtract.md'),
      blockFile('subtract', { depends_on: ['add'], criteria: ['subtract(5, 3) is 2'] }),
    );
    // Commit .tron/config.toml and .tron/blocks/ (and the sim script).
    await testGit(repo.dir, 'add', '.tron');
    await testGit(repo.dir, 'commit', '-q', '-m', 'tron: config, blocks, sim script');

    // tron start --repo ../myapp
    const start = await tron('start', '--repo', repo.dir, '--plain');
    expect(start.exitCode, `${start.stdout}\n${start.stderr}`).toBe(0);
    expect(start.stdout).toMatch(/3 landed, 0 parked, 0 abandoned/);

    // Each block is a real commit on trunk: the example's section, and the stand-in work of the others.
    const log = await testGit(repo.dir, 'log', '--format=%s', 'main');
    expect(log.split('\n')).toEqual(
      expect.arrayContaining([
        'README: how to run the tests',
        "add: the sim builder's stand-in work",
        "subtract: the sim builder's stand-in work",
      ]),
    );
    expect(await testGit(repo.dir, 'show', 'main:README.md')).toContain('## Running the tests\n\nRun the suite with `npm test`.');
    expect(await testGit(repo.dir, 'show', 'main:sim-work/subtract.md')).toContain('# subtract');
  });
});
