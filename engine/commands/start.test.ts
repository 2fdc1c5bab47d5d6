import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import { blockFile, configFile, landingSim, makeProject, ofType, runTron } from '../testing/project.ts';
import { answerCommand } from './answer.ts';
import { ManualClock } from '../os/clock.ts';
import { BWRAP_SKIP } from '../testing/bwrap.ts';
import { snapshot } from '../testing/snapshot.ts';
import { fsck } from '../testing/store.ts';
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
    expect(abandoned.stdout).toContain(
      'tron: stuck (out of scope) was abandoned in an earlier run, and every `tron start` exits 3 while it stays in the register: delete or move .tron/blocks/stuck.md',
    );
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

describe('a block an earlier run abandoned', () => {
  it('keeps a later run at exit 3, which says once which block it is and how to clear it; without its file, the next run exits 0', async () => {
    const repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n\n${landingSim(['fresh', 'later'])}`,
    });
    repos.push(repo);
    expect((await runTron(repo)).exit).toBe(3);
    await answerCommand({
      repo: repo.dir,
      block: 'stuck',
      line: '>>ABANDON {"reason":"out of scope"}',
      clock: new ManualClock(1),
      print: () => {},
    });
    expect((await runTron(repo)).exit).toBe(3);

    // A new block lands; the block abandoned before still holds the run at 3, and the run says why, once, with the fix.
    await repo.write('.tron/blocks/fresh.md', blockFile('fresh', {}));
    await repo.git('add', '.tron/blocks/fresh.md');
    await repo.git('commit', '-q', '-m', 'fresh');
    const next = await execa('node', [BIN, 'start', '--plain', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(next.exitCode).toBe(3);
    expect(next.stdout).toMatch(/fresh: landed/);
    const said = next.stdout.split('\n').filter((line) => line.includes('was abandoned in an earlier run'));
    expect(said).toHaveLength(1);
    expect(said[0]).toContain(
      'tron: stuck (out of scope) was abandoned in an earlier run, and every `tron start` exits 3 while it stays in the register: ' +
        'delete or move .tron/blocks/stuck.md (a block file under a new name is a new block: it is built again)',
    );
    expect(next.stdout).not.toMatch(/tron: stuck was abandoned: /);

    // The fix it names: the block file gone, the next run lands its new block and exits 0.
    await repo.git('rm', '-q', '.tron/blocks/stuck.md');
    await repo.write('.tron/blocks/later.md', blockFile('later', {}));
    await repo.git('add', '.tron/blocks/later.md');
    await repo.git('commit', '-q', '-m', 'stuck gone, later');
    const cleared = await execa('node', [BIN, 'start', '--plain', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(cleared.exitCode, cleared.stdout).toBe(0);
    expect(cleared.stdout).not.toContain('abandoned in an earlier run');
  });
});

/** A folder with a `bwrap` that cannot create namespaces, as on a host that forbids them. */
function brokenBwrap(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-broken-bwrap-'));
  writeFileSync(join(dir, 'bwrap'), '#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n', { mode: 0o755 });
  return dir;
}

/** A block whose builder commits a file, and a test command that prints its environment. */
const SIM = `[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "Add a"\nreply = ">>DONE"\n`;
const PRINTS_ENV = configFile().replace('test = "node test.js"', 'test = "env; node test.js"\ntest_env = ["SHARED_WITH_TESTS"]');

function readCmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

describe('tron start and the sandbox', () => {
  it('exits 2 with TRON_SANDBOX_UNAVAILABLE when mode = "bwrap" and bwrap cannot run, and changes nothing', async () => {
    const bin = brokenBwrap();
    try {
      const repo = await makeProject({ blocks: { a: {} }, config: configFile({ extra: '[sandbox]\nmode = "bwrap"\n' }) });
      repos.push(repo);
      const before = snapshot(repo.dir);
      const result = await execa('node', [BIN, 'start', '--repo', repo.dir], {
        reject: false,
        env: { PATH: `${bin}${delimiter}${process.env.PATH}` },
      });
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toContain('TRON_SANDBOX_UNAVAILABLE: .tron/config.toml: sandbox.mode');
      expect(result.stderr).toContain('Permission denied');
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(snapshot(repo.dir)).toEqual(before);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it('says once, at start, that a run is unsandboxed when mode = "auto" finds no working bwrap, and records it in the manifest', async () => {
    const bin = brokenBwrap();
    try {
      const repo = await makeProject({ blocks: { a: {} }, sim: SIM });
      repos.push(repo);
      const run = await runTron(repo, { env: { PATH: `${bin}${delimiter}${process.env.PATH}` } });
      expect(run.exit).toBe(0);
      expect(run.output.filter((line) => line.includes('NOT sandboxed'))).toHaveLength(1);
      expect(run.output.findIndex((line) => line.includes('NOT sandboxed'))).toBeLessThanOrEqual(1);
      const manifest = JSON.parse(readFileSync(join(run.runDir, 'manifest.json'), 'utf8'));
      expect(manifest.sandbox).toMatchObject({ mode: 'auto', used: 'off', why: expect.stringContaining('Permission denied') });
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it("runs the block's tests without the engine's secrets, whatever the sandbox", async () => {
    const repo = await makeProject({ blocks: { a: {} }, sim: SIM, config: PRINTS_ENV });
    repos.push(repo);
    const run = await runTron(repo, { env: { OPENAI_API_KEY: 'sk-engine-secret', SHARED_WITH_TESTS: 'yes' } });
    expect(run.exit).toBe(0);
    const logs = readdirSync(join(run.runDir, 'tests')).map((f) => readFileSync(join(run.runDir, 'tests', f), 'utf8'));
    expect(logs.length).toBeGreaterThanOrEqual(1);
    for (const log of logs) {
      expect(log).toContain('SHARED_WITH_TESTS=yes');
      expect(log).not.toContain('sk-engine-secret');
    }
    expect(ofType(run.events, 'block.landed')).toHaveLength(1);
  });

  it.skipIf(BWRAP_SKIP !== undefined)('uses bwrap where it runs, says nothing about it, and records it in the manifest', async () => {
    const repo = await makeProject({ blocks: { a: {} }, sim: SIM });
    repos.push(repo);
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    expect(run.output.join('\n')).not.toContain('sandboxed');
    expect(JSON.parse(readFileSync(join(run.runDir, 'manifest.json'), 'utf8')).sandbox).toEqual({ mode: 'auto', used: 'bwrap' });
  });

  it.skipIf(BWRAP_SKIP !== undefined)("lands a hostile builder's own work while the sandbox stops everything else it tries", async () => {
    const token = `30${process.pid}.5`;
    const dir = mkdtempSync(join(tmpdir(), 'tron-hostile-'));
    writeFileSync(
      join(dir, 'builder.sh'),
      `#!/bin/sh
prompt=$(cat)
case "$prompt" in *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"a.txt is committed"}}'; exit 0 ;; esac
echo a > a.txt && git add a.txt && git commit -qm "Add a"
git update-ref refs/heads/main HEAD
echo 'test = "true"' > ../../config.toml
echo evil > ../../blocks/evil.md
echo hijacked > ../../../README.md
setsid sleep ${token} &
echo '>>DONE'
`,
      { mode: 0o755 },
    );
    const workers = `[workers.builder]\nadapter = "command"\ncommand = ["${dir}/builder.sh"]\n\n[workers.reviewer]\nadapter = "sim"\n`;
    const repo = await makeProject({ blocks: { a: {} }, config: configFile({ workers }), files: { 'README.md': '# app\n' } });
    repos.push(repo);
    const config = readFileSync(join(repo.dir, '.tron', 'config.toml'), 'utf8');
    try {
      const run = await runTron(repo);
      expect(run.exit).toBe(0);
      expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['a']);
      expect(await repo.git('show', 'main:a.txt')).toBe('a');
      expect(await repo.git('log', '--format=%s', 'main')).toBe('Add a\ninitial');
      expect(readFileSync(join(repo.dir, '.tron', 'config.toml'), 'utf8')).toBe(config);
      expect(readdirSync(join(repo.dir, '.tron', 'blocks'))).toEqual(['a.md']);
      expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# app\n');
      expect(readdirSync('/proc').filter((p) => /^\d+$/.test(p) && readCmdline(p).includes(token))).toEqual([]);
      expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
