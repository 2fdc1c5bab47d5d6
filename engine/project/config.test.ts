import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from './config.ts';
import type { Problem } from '../core/errors.ts';

const FILE = '.tron/config.toml';

const WORKERS = `
[workers.builder]
adapter = "openai"
model = "gpt-5.1"
api_key_env = "OPENAI_API_KEY"

[workers.reviewer]
adapter = "command"
command = ["claude", "-p"]
env = ["ANTHROPIC_API_KEY"]
`;

const MINIMAL = `test = "npm test"\n${WORKERS}`;

function problemsOf(text: string): Problem[] {
  const { config, problems } = parseConfig(text, FILE);
  expect(config).toBeUndefined();
  return problems;
}

function only(text: string): Problem {
  const problems = problemsOf(text);
  expect(problems).toHaveLength(1);
  return problems[0]!;
}

describe('parseConfig', () => {
  it('reads [cluster]: the database, the repository name and the lease, 10 s unless given', () => {
    const { config, problems } = parseConfig(
      `${MINIMAL}\n[cluster]\ndatabase = "postgres://tron@db.internal:5432/tron"\nrepository = "myapp"\n`,
      FILE,
    );
    expect(problems).toEqual([]);
    expect(config!.cluster).toEqual({
      database: 'postgres://tron@db.internal:5432/tron',
      repository: 'myapp',
      leaseMs: 10_000,
      jobs: 'here',
      heartbeatMs: 2000,
    });
    expect(parseConfig(MINIMAL, FILE).config!.cluster).toBeUndefined();
  });

  it('reads who runs the jobs — the engine, unless "agents" — and the heartbeat, refusing any other word', () => {
    const { config, problems } = parseConfig(`${MINIMAL}\n[cluster]\njobs = "agents"\nheartbeat = "500ms"\n`, FILE);
    expect(problems).toEqual([]);
    expect(config!.cluster).toMatchObject({ jobs: 'agents', heartbeatMs: 500 });
    expect(only(`${MINIMAL}\n[cluster]\njobs = "elsewhere"\n`)).toMatchObject({
      code: 'TRON_CONFIG_INVALID',
      path: `${FILE}: cluster.jobs`,
    });
  });

  it('refuses an unknown [cluster] key and a database that is no PostgreSQL URL, naming each', () => {
    expect(only(`${MINIMAL}\n[cluster]\ndatabse = "postgres://x/y"\n`)).toMatchObject({
      code: 'TRON_CONFIG_UNKNOWN_KEY',
      path: `${FILE}: cluster.databse`,
    });
    const bad = only(`${MINIMAL}\n[cluster]\ndatabase = "mysql://x/y"\n`);
    expect(bad).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: cluster.database` });
    expect(bad.message).toContain('a PostgreSQL URL');
  });

  it('names an unknown key with the nearest legal one', () => {
    const p = only(`max_paralel = 2\n${MINIMAL}`);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_UNKNOWN_KEY', path: `${FILE}: max_paralel` });
    expect(p.message).toMatch(
      /^unknown key "max_paralel"; did you mean "max_parallel"\? Fix its spelling or remove it \(keys allowed here: trunk, max_parallel, /,
    );
  });

  it('names a misspelled adapter as the unknown key it is, once per table, instead of a missing adapter', () => {
    const problems = problemsOf(
      'test = "npm test"\n[workers.builder]\nadaptor = "sim"\n[workers.reviewer]\nadaptor = "sim"\nscript = ".tron/sim.toml"\n',
    );
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: workers.builder.adaptor`],
      ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: workers.reviewer.adaptor`],
    ]);
    expect(problems[0]!.message).toMatch(/^unknown key "adaptor"; did you mean "adapter"\? Fix its spelling or remove it/);
    expect(problems.some((p) => p.path.endsWith('.adapter'))).toBe(false);
  });

  it('still says adapter is missing when no key of the table is a misspelling of it, and names the strangers', () => {
    const problems = problemsOf(`test = "npm test"\n[workers.builder]\nmodle = "x"\n[workers.reviewer]\nadapter = "sim"\n`);
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_CONFIG_REQUIRED', `${FILE}: workers.builder.adapter`],
      ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: workers.builder.modle`],
    ]);
    expect(problems[1]!.message).toMatch(/did you mean "model"\?/);
  });

  it('suggests the nearest adapter for a misspelled one', () => {
    const p = only(`test = "npm test"\n[workers.builder]\nadapter = "comand"\ncommand = ["x"]\n[workers.reviewer]\nadapter = "sim"\n`);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: workers.builder.adapter` });
    expect(p.message).toMatch(/^string "comand" is not one of "openai", "command", "sim"; did you mean "command"\? Use one of them$/);
  });

  it('fills in the defaults for every optional field', () => {
    const { config, problems } = parseConfig(MINIMAL, FILE);
    expect(problems).toEqual([]);
    expect(config).toMatchObject({
      trunk: 'main',
      maxParallel: 4,
      test: 'npm test',
      timeouts: { turnMs: 20 * 60_000, testMs: 10 * 60_000 },
      liveness: {},
      testEnv: [],
      sandbox: { mode: 'auto', testNetwork: false },
      merge: { batch: 8, verifyTrunk: false },
    });
    expect(config!.setup).toBeUndefined();
    expect(config!.workers.architect).toBeUndefined();
    expect(config!.pageCommand).toBeUndefined();
  });

  it('has no remote unless [remote] is there, and fills in its defaults when it is', () => {
    expect(parseConfig(MINIMAL, FILE).config?.remote).toBeUndefined();
    expect(parseConfig(`${MINIMAL}\n[remote]\n`, FILE).config?.remote).toEqual({
      name: 'origin',
      pushBranches: false,
      timeoutMs: 60_000,
      retries: 6,
      backoffMs: 5_000,
    });
    const text = `${MINIMAL}\n[remote]\nname = "team"\npush_branches = true\ntimeout = "2m"\nretries = 0\nbackoff = "1s"\n`;
    expect(parseConfig(text, FILE).config?.remote).toEqual({
      name: 'team',
      pushBranches: true,
      timeoutMs: 120_000,
      retries: 0,
      backoffMs: 1_000,
    });
  });

  it('refuses an unknown key in [remote] and names the keys it allows', () => {
    const p = only(`${MINIMAL}\n[remote]\nurl = "git@example.com:x.git"\n`);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_UNKNOWN_KEY', path: `${FILE}: remote.url` });
    expect(p.message).toContain('push_branches');
    expect(only(`${MINIMAL}\n[remote]\nname = "-x"\n`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: remote.name` });
    expect(only(`${MINIMAL}\n[remote]\ntimeout = "soon"\n`)).toMatchObject({ path: `${FILE}: remote.timeout` });
  });

  it('accepts a file saved with a UTF-8 byte order mark', () => {
    const { config, problems } = parseConfig(`\uFEFF${MINIMAL}`, FILE);
    expect(problems).toEqual([]);
    expect(config?.test).toBe('npm test');
  });

  it('keeps 4MB of a reply unless [limits] reply says otherwise, and refuses a size that is not one', () => {
    expect(parseConfig(MINIMAL, FILE).config?.limits).toEqual({ replyBytes: 4 * 1024 * 1024 });
    expect(parseConfig(`${MINIMAL}\n[limits]\nreply = "512KB"\n`, FILE).config?.limits).toEqual({ replyBytes: 512 * 1024 });
    expect(only(`${MINIMAL}\n[limits]\nreply = "lots"\n`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: limits.reply` });
    expect(only(`${MINIMAL}\n[limits]\nreply = "10"\n`).message).toContain('at least 1KB');
  });

  it('normalises durations to ms and parses each worker by its adapter', () => {
    const text = `
trunk = "develop"
max_parallel = 2
test = "make check"
page_command = ["notify", "--json"]

[timeouts]
turn = "1h30m"
test = "90s"

[liveness]
probe_wait = "45s"
reissues = 0
${WORKERS}
[workers.architect]
adapter = "sim"
`;
    const { config, problems } = parseConfig(text, FILE);
    expect(problems).toEqual([]);
    expect(config).toMatchObject({
      trunk: 'develop',
      maxParallel: 2,
      test: 'make check',
      pageCommand: ['notify', '--json'],
      timeouts: { turnMs: 90 * 60_000, testMs: 90_000 },
      liveness: { probeWaitMs: 45_000, reissues: 0 },
    });
    expect(config!.liveness).not.toHaveProperty('extensionMs');
    expect(config!.workers.builder).toMatchObject({ adapter: 'openai', model: 'gpt-5.1', max_steps: 40 });
    expect(config!.workers.reviewer).toEqual({ adapter: 'command', command: ['claude', '-p'], env: ['ANTHROPIC_API_KEY'], writable: [] });
    expect(config!.workers.architect).toEqual({ adapter: 'sim' });
  });

  it('reads [prices] per model in USD per million tokens, cached priced as input unless given', () => {
    const text = `${MINIMAL}\n[prices."gpt-5.1"]\ninput = 1.25\ncached = 0.125\noutput = 10\n\n[prices."claude-*"]\ninput = 3\noutput = 15\n`;
    const { config, problems } = parseConfig(text, FILE);
    expect(problems).toEqual([]);
    expect(config!.prices).toEqual({
      'gpt-5.1': { input: 1.25, cached: 0.125, output: 10 },
      'claude-*': { input: 3, cached: 3, output: 15 },
    });
    expect(parseConfig(MINIMAL, FILE).config!.prices).toEqual({});
  });

  it('reports an unknown key in a price row with the keys allowed there, and a negative price', () => {
    const problems = problemsOf(`${MINIMAL}\n[prices."gpt-5.1"]\ninput = -1\noutput = 2\nouput = 3\n`);
    expect(problems.map((p) => [p.code, p.path])).toEqual(
      expect.arrayContaining([
        ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: prices."gpt-5.1".ouput`],
        ['TRON_CONFIG_INVALID', `${FILE}: prices."gpt-5.1".input`],
      ]),
    );
    expect(problems.find((p) => p.code === 'TRON_CONFIG_UNKNOWN_KEY')!.message).toMatch(/input, cached, output/);
  });

  it('names a TOML syntax error by file, line and column', () => {
    const p = only(`test = "npm test"\ntrunk = \n${WORKERS}`);
    expect(p.code).toBe('TRON_CONFIG_TOML');
    expect(p.path).toBe(`${FILE}:2:9`);
    expect(p.message).toMatch(/fix the TOML syntax/);
  });

  it('reports an unknown top-level key with the keys allowed there', () => {
    const p = only(`${MINIMAL}\n`.replace('test = "npm test"', 'test = "npm test"\nmax_paralel = 3'));
    expect(p).toMatchObject({ code: 'TRON_CONFIG_UNKNOWN_KEY', path: `${FILE}: max_paralel` });
    expect(p.message).toMatch(/unknown key "max_paralel"/);
    expect(p.message).toMatch(/max_parallel/);
  });

  it('reports an unknown key inside a worker table with the keys of its adapter', () => {
    const p = only(MINIMAL.replace('model = "gpt-5.1"', 'modle = "gpt-5.1"\nmodel = "gpt-5.1"'));
    expect(p).toMatchObject({ code: 'TRON_CONFIG_UNKNOWN_KEY', path: `${FILE}: workers.builder.modle` });
    expect(p.message).toMatch(/keys allowed here: adapter, model, base_url, api_key_env/);
  });

  it('reports unknown keys in timeouts, liveness and workers', () => {
    const text = `${MINIMAL}\n[timeouts]\nturns = "1m"\n[liveness]\nprobe = "1s"\n[workers.critic]\nadapter = "sim"\n`;
    const problems = problemsOf(text);
    expect(problems.map((p) => [p.code, p.path])).toEqual(
      expect.arrayContaining([
        ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: timeouts.turns`],
        ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: liveness.probe`],
        ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: workers.critic`],
      ]),
    );
    expect(problems.find((p) => p.path.endsWith('workers.critic'))!.message).toMatch(/builder, reviewer, architect/);
  });

  it('reads setup, the test environment and the merge lane settings', () => {
    const text = `test = "npm test"\nsetup = "npm ci"\ntest_env = ["DATABASE_URL"]\n[merge]\nbatch = 1\nverify_trunk = true\n${WORKERS}`;
    const { config, problems } = parseConfig(text, FILE);
    expect(problems).toEqual([]);
    expect(config).toMatchObject({ setup: 'npm ci', testEnv: ['DATABASE_URL'], merge: { batch: 1, verifyTrunk: true } });
  });

  it('rejects a batch below 1, a test_env entry that is not a variable name, and unknown merge keys', () => {
    const problems = problemsOf(`test = "t"\ntest_env = ["NOT A NAME"]\n[merge]\nbatch = 0\nparalel = 2\n${WORKERS}`);
    expect(problems.map((p) => [p.code, p.path]).sort()).toEqual([
      ['TRON_CONFIG_INVALID', `${FILE}: merge.batch`],
      ['TRON_CONFIG_INVALID', `${FILE}: test_env[0]`],
      ['TRON_CONFIG_UNKNOWN_KEY', `${FILE}: merge.paralel`],
    ]);
  });

  it('requires the test command and says how to write it', () => {
    const p = only(WORKERS);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_REQUIRED', path: `${FILE}: test` });
    expect(p.message).toMatch(/test = "npm test"/);
  });

  it('rejects a blank test command', () => {
    expect(only(MINIMAL.replace('"npm test"', '"   "'))).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: test` });
  });

  it('requires a builder and a reviewer but not an architect', () => {
    const problems = problemsOf('test = "npm test"\n[workers.architect]\nadapter = "sim"\n');
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_CONFIG_REQUIRED', `${FILE}: workers.builder`],
      ['TRON_CONFIG_REQUIRED', `${FILE}: workers.reviewer`],
    ]);
    expect(problems[0]!.message).toMatch(/\[workers\.builder\]/);
  });

  it('names the adapters when a worker has an unknown one or none', () => {
    const unknown = only(MINIMAL.replace('adapter = "command"', 'adapter = "shell"'));
    expect(unknown).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: workers.reviewer.adapter` });
    expect(unknown.message).toMatch(/"openai", "command", "sim"/);
    const none = only(MINIMAL.replace('adapter = "command"\n', ''));
    expect(none).toMatchObject({ code: 'TRON_CONFIG_REQUIRED', path: `${FILE}: workers.reviewer.adapter` });
  });

  it('rejects durations that do not parse, in the config and in worker settings', () => {
    const text = `${MINIMAL.replace('api_key_env', 'request_timeout = "5 minutes"\napi_key_env')}\n[timeouts]\nturn = "20 min"\n`;
    const problems = problemsOf(text);
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_CONFIG_DURATION', `${FILE}: timeouts.turn`],
      ['TRON_CONFIG_DURATION', `${FILE}: workers.builder.request_timeout`],
    ]);
    expect(problems[0]!.message).toMatch(/"20 min" is not a duration; write it like "90s"/);
  });

  it('rejects a zero budget', () => {
    const p = only(`${MINIMAL}\n[timeouts]\ntest = "0s"\n`);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: timeouts.test` });
    expect(p.message).toMatch(/longer than 0s/);
  });

  it('rejects max_parallel below 1 or not whole, and negative liveness counts', () => {
    expect(only(`max_parallel = 0\n${MINIMAL}`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: max_parallel` });
    expect(only(`max_parallel = 2.5\n${MINIMAL}`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: max_parallel` });
    expect(only(`${MINIMAL}\n[liveness]\nmax_extensions = -1\n`)).toMatchObject({
      code: 'TRON_CONFIG_INVALID',
      path: `${FILE}: liveness.max_extensions`,
    });
  });

  it('rejects a trunk that is not a branch name', () => {
    expect(only(`trunk = "my trunk"\n${MINIMAL}`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: trunk` });
  });

  it('rejects an empty page command and a wrongly typed one', () => {
    expect(only(`page_command = []\n${MINIMAL}`)).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: page_command` });
    const p = only(`page_command = "notify-send tron"\n${MINIMAL}`);
    expect(p).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: page_command` });
    expect(p.message).toMatch(/expected an array/);
  });

  it("reads the sandbox table, the test environment and a command worker's writable paths", () => {
    const text = `test_env = ["DATABASE_URL"]\n${MINIMAL.replace('env = ["ANTHROPIC_API_KEY"]', 'env = ["ANTHROPIC_API_KEY"]\nwritable = ["~/.claude", "~/.claude.json", "$CODEX_HOME", "/var/cache/agent"]')}\n[sandbox]\nmode = "bwrap"\ntest_network = true\n`;
    const { config, problems } = parseConfig(text, FILE);
    expect(problems).toEqual([]);
    expect(config).toMatchObject({ testEnv: ['DATABASE_URL'], sandbox: { mode: 'bwrap', testNetwork: true } });
    expect(config!.workers.reviewer).toMatchObject({ writable: ['~/.claude', '~/.claude.json', '$CODEX_HOME', '/var/cache/agent'] });
  });

  it('rejects an unknown sandbox mode, an unknown sandbox key and a relative writable path', () => {
    const mode = only(`${MINIMAL}\n[sandbox]\nmode = "docker"\n`);
    expect(mode).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: sandbox.mode` });
    expect(mode.message).toMatch(/"auto", "bwrap", "off"/);
    const key = only(`${MINIMAL}\n[sandbox]\nnetwork = true\n`);
    expect(key).toMatchObject({ code: 'TRON_CONFIG_UNKNOWN_KEY', path: `${FILE}: sandbox.network` });
    expect(key.message).toMatch(/mode, test_network/);
    const relative = only(MINIMAL.replace('env = ["ANTHROPIC_API_KEY"]', 'writable = [".claude"]'));
    expect(relative).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: `${FILE}: workers.reviewer.writable[0]` });
    expect(relative.message).toMatch(/absolute, "~\/…" or "\$NAME\/…"/);
  });

  it('reports every problem at once', () => {
    const text = `trunk = ""\nmax_parallel = 0\ncolour = "red"\n[timeouts]\nturn = "soon"\n[workers.builder]\nadapter = "nope"\n`;
    const problems = problemsOf(text);
    expect(problems.map((p) => p.path).sort()).toEqual(
      [
        `${FILE}: colour`,
        `${FILE}: max_parallel`,
        `${FILE}: test`,
        `${FILE}: timeouts.turn`,
        `${FILE}: trunk`,
        `${FILE}: workers.builder.adapter`,
        `${FILE}: workers.reviewer`,
      ].sort(),
    );
    for (const p of problems) expect(p.code).toMatch(/^TRON_CONFIG_[A-Z_]+$/);
  });
});

describe('loadConfig', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('tells the user to run tron init when there is no config', () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tron-config-'));
    const { config, problems } = loadConfig(dir);
    expect(config).toBeUndefined();
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ code: 'TRON_CONFIG_MISSING', path: FILE });
    expect(problems[0]!.message).toMatch(/run tron init/);
  });

  it('reads <repo>/.tron/config.toml and names problems by its repository path', () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tron-config-'));
    mkdirSync(path.join(dir, '.tron'));
    writeFileSync(path.join(dir, FILE), MINIMAL);
    expect(loadConfig(dir).config?.test).toBe('npm test');
    writeFileSync(path.join(dir, FILE), `bogus = 1\n${MINIMAL}`);
    expect(loadConfig(dir).problems.map((p) => p.path)).toEqual([`${FILE}: bogus`]);
  });
});
