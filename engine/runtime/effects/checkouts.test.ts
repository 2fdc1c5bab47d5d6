import { reachableServer } from '../../testing/reachable.ts';
import { BWRAP_SKIP } from '../../testing/bwrap.ts';
import { describe, expect, it, onTestFinished } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configFile, project, ofType, runTron } from '../../testing/project.ts';
import { makeRepo } from '../../testing/repo.ts';
import * as git from '../../git/index.ts';
import { CheckoutPool, Slots, warmCheckouts } from './checkouts.ts';
import type { EffectContext } from './context.ts';

/** A sim build turn that writes `files` and commits them. */
function builds(id: string, files: Record<string, string>, run?: string): string {
  const write = Object.entries(files)
    .map(([path, content]) => `${JSON.stringify(path)} = ${JSON.stringify(content)}`)
    .join(', ');
  return `[[blocks.${id}.builder]]\nkind = "build"\nwrite = { ${write} }\ncommit = "Build ${id}"\n${run ? `run = ${JSON.stringify(run)}\n` : ''}`;
}

describe('the engine checkout', () => {
  it('holds exactly the sha asked for when reused: changes, untracked and ignored files are gone', async () => {
    const repo = await makeRepo({ '.gitignore': 'build/\n', 'a.txt': 'one\n' });
    onTestFinished(() => repo.cleanup());
    const first = await repo.git('rev-parse', 'HEAD');
    writeFileSync(join(repo.dir, 'a.txt'), 'two\n');
    await repo.git('commit', '-qam', 'two');
    const second = await repo.git('rev-parse', 'HEAD');
    const dir = await git.checkoutAt(repo.dir, '_check-1', second);
    writeFileSync(join(dir, 'a.txt'), 'changed\n');
    writeFileSync(join(dir, 'stray.txt'), 'untracked\n');
    mkdirSync(join(dir, 'build'));
    writeFileSync(join(dir, 'build', 'out.js'), 'ignored\n');
    expect(await git.checkoutAt(repo.dir, '_check-1', first)).toBe(dir);
    expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(dir, 'stray.txt'))).toBe(false);
    expect(existsSync(join(dir, 'build'))).toBe(false);
    expect(await git.headOf(dir)).toBe(first);
    expect(await git.currentBranch(dir)).toBeUndefined();
  });

  it('drops a cherry-pick a crash left half done there, and refuses to put it at anything but a commit', async () => {
    const repo = await makeRepo({ 'a.txt': 'one\n' });
    onTestFinished(() => repo.cleanup());
    const first = await repo.git('rev-parse', 'HEAD');
    writeFileSync(join(repo.dir, 'a.txt'), 'two\n');
    const second = await repo.commitAll('two');
    await repo.git('checkout', '-q', '--detach', first);
    writeFileSync(join(repo.dir, 'a.txt'), 'three\n');
    const third = await repo.commitAll('three');
    writeFileSync(join(repo.dir, 'b.txt'), 'b\n');
    const fourth = await repo.commitAll('four');
    const dir = await git.checkoutAt(repo.dir, '_lane', second);
    await expect(repo.at(dir).git('cherry-pick', third, fourth)).rejects.toThrow();
    await git.checkoutAt(repo.dir, '_lane', first);
    expect(await git.headOf(dir)).toBe(first);
    // No cherry-pick is in progress any more: a new one of several commits runs.
    await repo.at(dir).git('cherry-pick', second, fourth);
    const tree = await repo.git('rev-parse', `${first}^{tree}`);
    await expect(git.checkoutAt(repo.dir, '_lane', tree)).rejects.toThrow(/not a commit|expected commit/);
  });

  it('makes the gate’s first checkouts and the lane’s ahead, which the gates then take instead of making their own', async () => {
    const repo = await makeRepo({ 'a.txt': 'one\n' });
    onTestFinished(() => repo.cleanup());
    const sha = await repo.git('rev-parse', 'HEAD');
    const pool = new CheckoutPool();
    const queued: string[] = [];
    // One at a time, as the engine's worktree queue: git cannot make worktrees side by side.
    const one = new Slots(1);
    const worktrees = {
      run: <T>(work: () => Promise<T>): Promise<T> => {
        queued.push('made');
        return one.run(work);
      },
    };
    const c = { repo: repo.dir, checkouts: pool, queues: { worktrees } } as unknown as EffectContext;
    await warmCheckouts(c, 2, sha);
    expect(queued).toEqual(['made', 'made', 'made']);
    for (const name of ['_check-1', '_check-2', '_lane']) expect(await git.headOf(git.engineCheckoutPath(repo.dir, name))).toBe(sha);
    // The gates take the warm ones, first made first; a third makes a new one.
    expect([pool.acquire(), pool.acquire(), pool.acquire()]).toEqual(['_check-1', '_check-2', '_check-3']);
  });

  it('runs at most as many gate test runs at once as it has slots, the others in the order they came', async () => {
    const slots = new Slots(2);
    const log: string[] = [];
    const ends = new Map<string, () => void>();
    const run = (name: string) =>
      slots.run(async () => {
        log.push(`start ${name}`);
        await new Promise<void>((end) => ends.set(name, end));
        log.push(`end ${name}`);
      });
    const all = ['a', 'b', 'c', 'd'].map(run);
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(['start a', 'start b']);
    ends.get('b')!();
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(['start a', 'start b', 'end b', 'start c']);
    ends.get('a')!();
    await new Promise((r) => setImmediate(r));
    ends.get('c')!();
    await new Promise((r) => setImmediate(r));
    ends.get('d')!();
    await Promise.all(all);
    expect(log.filter((l) => l.startsWith('start'))).toEqual(['start a', 'start b', 'start c', 'start d']);
  });

  it('refuses a name that is not the engine’s own', () => {
    expect(() => git.engineCheckoutPath('/tmp/x', 'alpha')).toThrow(/start with '_'/);
  });
});

describe('hermetic tests at the gate', () => {
  it('fails a block whose test needs a gitignored file the builder left in its worktree, and never lands it', async () => {
    const repo = await project({
      blocks: { careless: {} },
      sim: builds(
        'careless',
        {
          '.gitignore': 'generated.txt\n',
          'tests/careless.test.js': "require('node:fs').readFileSync(__dirname + '/../generated.txt');\n",
        },
        'echo made-locally > generated.txt',
      ),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'gate.failed');
    expect(failed.length).toBeGreaterThan(0);
    expect(failed[0]!.facts.find((f) => f.name === 'clean')?.ok).toBe(true);
    expect(failed[0]!.facts.find((f) => f.name === 'tests')).toMatchObject({
      ok: false,
      evidence: expect.stringContaining('clean checkout'),
    });
    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(await repo.git('for-each-ref', 'refs/tron/landed/')).toBe('');
    expect(existsSync(join(repo.dir, 'generated.txt'))).toBe(false);
  });

  it('runs setup before the tests in a clean checkout and records its output', async () => {
    const repo = await project({
      blocks: { prepared: {} },
      files: {
        'setup.js': "require('node:fs').writeFileSync('prepared.txt', 'ready');\nconsole.log('setup ran');\n",
        '.gitignore': 'prepared.txt\n',
      },
      config: configFile().replace('test = "node test.js"', 'test = "node test.js"\nsetup = "node setup.js"'),
      sim: builds('prepared', { 'tests/prepared.test.js': "require('node:fs').readFileSync(__dirname + '/../prepared.txt');\n" }),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const observed = ofType(run.events, 'facts.observed')[0]!;
    expect(observed.setup).toMatchObject({ exit: 0, timed_out: false, ms: expect.any(Number) });
    expect(observed.tests).toMatchObject({ exit: 0, ms: expect.any(Number) });
    expect(readFileSync(join(run.runDir, observed.setup!.log), 'utf8')).toContain('setup ran');
    expect(ofType(run.events, 'gate.passed')[0]!.facts.find((f) => f.name === 'setup')?.ok).toBe(true);
  });

  it.skipIf(BWRAP_SKIP !== undefined)(
    'gives setup the network (installs need the registry) and the test run none, in the sandbox',
    async () => {
      const { url, close } = await reachableServer();
      onTestFinished(close);
      const fetchTo = (file: string) =>
        `fetch('${url}').then((r) => r.text(), () => 'unreachable').then((t) => require('node:fs').writeFileSync('${file}', t))`;
      const repo = await project({
        blocks: { net: {} },
        files: {
          'setup.js': `${fetchTo('setup-net.txt')};\n`,
          'tests/net.test.js': `${fetchTo('test-net.txt')}.then(() => console.log('setup:', require('node:fs').readFileSync('setup-net.txt', 'utf8'), 'test:', require('node:fs').readFileSync('test-net.txt', 'utf8')));\n`,
          '.gitignore': '*-net.txt\n',
        },
        config: configFile({ extra: '[sandbox]\nmode = "bwrap"\n' }).replace(
          'test = "node test.js"',
          'test = "node test.js"\nsetup = "node setup.js"',
        ),
        sim: builds('net', { 'net.txt': 'x\n' }),
      });
      const run = await runTron(repo);
      const observed = ofType(run.events, 'facts.observed')[0]!;
      expect(readFileSync(join(run.runDir, observed.tests!.log), 'utf8')).toMatch(/setup: reached test: unreachable/);
    },
  );

  it('counts a failing setup as a failed fact and runs no tests after it', async () => {
    const repo = await project({
      blocks: { broken: {} },
      config: configFile().replace(
        'test = "node test.js"',
        'test = "node test.js"\nsetup = "test ! -e broken.txt || { echo no registry >&2; exit 7; }"',
      ),
      sim: builds('broken', { 'broken.txt': 'x\n' }),
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const observed = ofType(run.events, 'facts.observed')[0]!;
    expect(observed.setup).toMatchObject({ exit: 7 });
    expect(observed.tests).toBeNull();
    const setup = ofType(run.events, 'gate.failed')[0]!.facts.find((f) => f.name === 'setup');
    expect(setup).toMatchObject({ ok: false, evidence: expect.stringContaining('no registry') });
    expect(ofType(run.events, 'block.landed')).toEqual([]);
  });

  it('gives setup and tests PATH, HOME, LANG, TERM and the test_env names, never the engine’s other variables', async () => {
    const check =
      "const a = require('node:assert');\n" +
      'a.strictEqual(process.env.ENGINE_SECRET, undefined);\n' +
      "a.strictEqual(process.env.DATABASE_URL, 'postgres://test');\n" +
      'a.ok(process.env.PATH);\n';
    const repo = await project({
      blocks: { envy: {} },
      config: configFile().replace('test = "node test.js"', 'test = "node test.js"\ntest_env = ["DATABASE_URL"]'),
      sim: builds('envy', { 'tests/envy.test.js': check }),
    });
    const run = await runTron(repo, { env: { ENGINE_SECRET: 'sk-do-not-leak', DATABASE_URL: 'postgres://test' } });
    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['envy']);
  });
});
