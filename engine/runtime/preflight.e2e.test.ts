import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startCli } from '../testing/crash.ts';
import { configFile, landingSim, ofType, project, runTron } from '../testing/project.ts';

/** A project whose test command is `test`, with one block a sim builder lands. */
async function withTest(test: string, files: Record<string, string> = {}) {
  const config = configFile().replace('test = "node test.js"', `test = ${JSON.stringify(test)}`);
  return project({ blocks: { add: {} }, sim: landingSim(['add']), config, files });
}

const runs = (dir: string) => (existsSync(join(dir, '.tron', 'runs')) ? readdirSync(join(dir, '.tron', 'runs')) : []);

describe('the check of trunk before work starts', () => {
  it('stops a start whose test command is mistyped with TRON_TRUNK_RED, exit 2, before any block is touched', async () => {
    const repo = await withTest('npm run tests', { 'package.json': '{"name":"x","scripts":{"test":"node test.js"}}\n' });
    const trunk = await repo.git('rev-parse', 'main');
    const r = await startCli(repo);
    expect(r.exitCode, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toMatch(/TRON_TRUNK_RED: \.tron\/config\.toml: test: `npm run tests` exited 1 on main at [0-9a-f]{12}, twice/);
    // npm's own words on the missing script are shown.
    expect(r.stderr).toMatch(/Missing script: "tests"/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    // Nothing was touched: no run, no branch, no worktree of the block, trunk where it was.
    expect(runs(repo.dir)).toEqual([]);
    expect(await repo.git('branch', '--list', 'tron/*')).toBe('');
    expect(existsSync(join(repo.dir, '.tron', 'worktrees', 'add'))).toBe(false);
    expect(await repo.git('rev-parse', 'main')).toBe(trunk);
  }, 120_000);

  it('goes on when trunk is red once and green on a second try, saying its tests are flaky', async () => {
    // Red on the first run in a checkout, green after: a flaky suite.
    const repo = await withTest('if [ -e .seen ]; then node test.js; else touch .seen; echo "flake: timing"; exit 1; fi');
    const r = await runTron(repo);
    // The run went on: its block was built (its gate meets the same flake, which is the block's to live with).
    expect(ofType(r.events, 'block.dispatched').length, r.output.join('\n')).toBeGreaterThan(0);
    expect(r.output.join('\n')).toMatch(/trunk's tests are flaky: .* exited 1 on main at [0-9a-f]{12}, then passed on a second run/);
    expect(r.output.join('\n')).toContain('flake: timing');
  }, 120_000);
});
