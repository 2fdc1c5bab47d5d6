/**
 * The presets `tron init --worker …` writes, run as written by `tron start`. Claude Code
 * and Codex are stood in for by a fake `claude` / `codex` first on PATH that behaves like
 * the real one as tron sees it (fakeCliSource below): structured output with usage and
 * cost, its errors on stdout with exit 1, a login from a key variable or a file under
 * HOME, a gateway from ANTHROPIC_BASE_URL. The openai preset talks to the scripted model
 * server with only its base_url changed. What a user meets when the CLI is not
 * installed, not logged in, or its key not set is tested too: exit 2 before anything
 * runs, naming the setting to fix — never a crash.
 */
import { accessSync, existsSync, chmodSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { delimiter, dirname, join } from 'node:path';
import TOML from '@iarna/toml';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type RecordedRequest, type ScriptStep } from '../testing/model-server.ts';
import { initCommand } from '../commands/init.ts';
import { loadConfig } from '../project/config.ts';
import { NODE_RUNNER, ofType, readRunFile, runTron } from '../testing/project.ts';
import { runStats } from '../render/report.ts';
import { reportCommand } from '../commands/report.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { BWRAP_SKIP } from '../testing/bwrap.ts';
import { WORKER_PRESETS } from './presets.ts';
import { type Needed, requireAll, skipWithout } from '../testing/needs.ts';
import { findProgram } from './preflight.ts';
import type { CommandSettings } from '../project/worker-settings.ts';
import { workerSettings } from '../project/worker-settings.ts';
import { turnOf, usageOf } from '../testing/openai-script.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const README = '# app\n\n## Running the tests\n\nRun `npm test`.\n';
const EVIDENCE = JSON.stringify({ evidence: { c1: 'README.md, section "Running the tests"', c2: 'README.md gives npm test' } });

/** A repository as a user has it, after `tron init --worker <preset>` and a commit of .tron/. */
/**
 * A repository set up by `tron init --worker <preset>`. The fake CLIs log into the run
 * directory, which the sandbox keeps read-only, so these runs are unsandboxed unless
 * `sandboxed` — then the fake logs into its own state folder under a fakeHome().
 */
async function initialised(preset: 'openai' | 'claude' | 'codex', sandboxed = false): Promise<TestRepo> {
  const repo = await makeRepo({
    'package.json': `${JSON.stringify({ name: 'app', private: true, scripts: { test: 'node test.js' } })}\n`,
    'test.js': NODE_RUNNER,
    'tests/smoke.test.js': "require('node:assert').ok(true);\n",
  });
  cleanups.push(() => repo.cleanup());
  const printed: string[] = [];
  expect(await initCommand({ repo: repo.dir, worker: preset, print: (l) => printed.push(l) })).toBe(0);
  if (!sandboxed) {
    const config = join(repo.dir, '.tron', 'config.toml');
    writeFileSync(config, `${readFileSync(config, 'utf8')}\n[sandbox]\nmode = "off"\n`);
  }
  await repo.commitAll('tron init');
  return repo;
}

/**
 * A fake `claude` or `codex` that behaves, as far as tron can see, like the real one
 * (Claude Code 2.1, Codex 0.171): it logs the argv, environment and prompt it got under
 * the run directory; it authenticates from its key variables or its own login file under
 * HOME, and without either it fails as the real CLI does (Claude Code: one JSON result
 * with `is_error` and "Not logged in · Please run /login" on stdout, exit 1; Codex: a
 * `turn.failed` event with the server's 401, exit 1); Claude Code talks to
 * ANTHROPIC_BASE_URL when it is set, and a gateway it cannot reach is "API Error: Unable
 * to connect to API (ConnectionRefused)"; on success it does the turn's work and prints
 * the reply in its structured format, with usage (and, for Claude Code, the cost).
 */
function fakeCliSource(name: 'claude' | 'codex'): string {
  return `#!${process.execPath}
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const NAME = ${JSON.stringify(name)};
const env = process.env;
// Its own state folder when the test prepared one (the one place besides its checkout a
// sandboxed preset may write), else the run directory.
const stateDir = path.join(env.HOME || '', '.' + NAME);
const logDir = fs.existsSync(path.join(stateDir, 'fake-logs-here')) ? stateDir : env.TRON_RUN_DIR;
const log = logDir + '/fake-' + env.TRON_ROLE + '-' + env.TRON_TURN;
fs.writeFileSync(log + '.argv', [path.basename(process.argv[1]), ...process.argv.slice(2)].join('\\n') + '\\n');
fs.writeFileSync(log + '.env', Object.entries(env).map(([k, v]) => k + '=' + v).join('\\n') + '\\n');
const prompt = fs.readFileSync(0, 'utf8');
fs.writeFileSync(log + '.prompt', prompt);
const home = env.HOME || '';
const loggedIn =
  NAME === 'claude'
    ? Boolean(env.ANTHROPIC_API_KEY || env.ANTHROPIC_AUTH_TOKEN) ||
      fs.existsSync(path.join(env.CLAUDE_CONFIG_DIR || path.join(home, '.claude'), '.credentials.json'))
    : Boolean(env.OPENAI_API_KEY || env.CODEX_API_KEY) || fs.existsSync(path.join(env.CODEX_HOME || path.join(home, '.codex'), 'auth.json'));
const COST = { builder: 0.0123, reviewer: 0.0045, architect: 0.002 }[env.TRON_ROLE];
function claude(result, error) {
  const usage = error
    ? { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 }
    : { input_tokens: 1200, cache_creation_input_tokens: 0, cache_read_input_tokens: 300, output_tokens: 40 };
  const modelUsage = error ? {} : { 'claude-sonnet-4-5': { inputTokens: 1200, outputTokens: 40, cacheReadInputTokens: 300, cacheCreationInputTokens: 0, costUSD: COST } };
  console.log(JSON.stringify({ type: 'result', subtype: 'success', is_error: error, duration_ms: 12, num_turns: 1, result, session_id: 's', total_cost_usd: error ? 0 : COST, usage, modelUsage, permission_denials: [] }));
  process.exit(error ? 1 : 0);
}
function codex(text, error) {
  const say = (e) => console.log(JSON.stringify(e));
  say({ type: 'thread.started', thread_id: 't' });
  say({ type: 'turn.started' });
  if (error) {
    say({ type: 'error', message: 'Reconnecting... 1/5 (' + error + ')' });
    say({ type: 'turn.failed', error: { message: error } });
    console.error('2026-11-30T09:47:56Z ERROR codex_api::endpoint::responses_websocket: failed to connect to Responses WebSocket');
    process.exit(1);
  }
  say({ type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text } });
  say({ type: 'turn.completed', usage: { input_tokens: 1000, cached_input_tokens: 400, output_tokens: 50, reasoning_output_tokens: 10 } });
  process.exit(0);
}
const fail = (message) => (NAME === 'claude' ? claude(message, true) : codex('', message));
const reply = (text) => (NAME === 'claude' ? claude(text, false) : codex(text));
(async () => {
  if (!loggedIn) fail(NAME === 'claude' ? 'Not logged in · Please run /login' : 'unexpected status 401 Unauthorized: Missing bearer or basic authentication in header, url: https://api.openai.com/v1/responses');
  if (NAME === 'claude' && env.ANTHROPIC_BASE_URL) {
    try {
      await fetch(env.ANTHROPIC_BASE_URL + '/v1/messages', {
        method: 'POST',
        headers: { authorization: 'Bearer ' + (env.ANTHROPIC_AUTH_TOKEN || ''), 'x-api-key': env.ANTHROPIC_API_KEY || '' },
        body: JSON.stringify({ role: env.TRON_ROLE, turn: env.TRON_TURN }),
      });
    } catch {
      fail('API Error: Unable to connect to API (ConnectionRefused)');
    }
  }
  if (/^# Build block/m.test(prompt)) {
    fs.writeFileSync('README.md', ${JSON.stringify(README)});
    execFileSync('git', ['add', 'README.md']);
    execFileSync('git', ['commit', '-q', '-m', 'Document the tests']);
    reply('Added a Running the tests section to README.md.\\n>>DONE');
  } else if (/^# Evidence for block/m.test(prompt)) reply('>>CONFIRMED ' + ${JSON.stringify(EVIDENCE)});
  else if (/^# Review block/m.test(prompt)) reply('The section is there and names the command.\\n>>APPROVE');
  else reply('>>PAGE {"reason":"the fake agent has no answer for this prompt"}');
})();
`;
}

/** A folder holding an executable fake `claude` or `codex`, to put first on PATH. */
function fakeBin(name: 'claude' | 'codex'): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-fake-bin-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, name), fakeCliSource(name));
  chmodSync(join(dir, name), 0o755);
  return dir;
}

/** A HOME with the state the CLIs keep there (`.claude`, `.claude.json`, `.codex`), where the fakes log. */
function fakeHome(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-fake-home-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const state of ['.claude', '.codex']) {
    mkdirSync(join(dir, state));
    writeFileSync(join(dir, state, 'fake-logs-here'), '');
  }
  writeFileSync(join(dir, '.claude.json'), '{}\n');
  return dir;
}

/** An empty HOME, or one holding the given files (a CLI's login). */
function homeWith(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-home-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** A gateway on 127.0.0.1 that records what reaches it and answers 200. */
async function gateway(): Promise<{ url: string; seen: Array<{ authorization?: string; body: string }>; close: () => Promise<void> }> {
  const seen: Array<{ authorization?: string; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ authorization: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  cleanups.push(close);
  return { url: `http://127.0.0.1:${port}`, seen, close };
}

/** PATH without any folder that holds `name`, so the CLI is absent whatever this machine has installed. */
function pathWithout(name: string): string {
  const has = (dir: string) => {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir && !has(dir))
    .join(delimiter);
}

const lines = (file: string) => readFileSync(file, 'utf8').trimEnd().split('\n');
const KEYS = { ANTHROPIC_API_KEY: 'sk-ant-fake', OPENAI_API_KEY: 'sk-openai-fake' };
const envOf = (runDir: string, role: string, turn: number) =>
  Object.fromEntries(lines(join(runDir, `fake-${role}-${turn}.env`)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));

describe('tron init presets under tron start', () => {
  it.each([
    ['claude', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY'],
    ['codex', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY'],
  ] as const)(
    'the %s preset runs its CLI with the preset argv and the prompt on stdin, and lands the example block',
    async (preset, passed, withheld) => {
      const repo = await initialised(preset);
      const bin = fakeBin(preset);
      const run = await runTron(repo, { env: { PATH: `${bin}${delimiter}${process.env.PATH}`, ...KEYS } });

      expect(run.exit).toBe(0);
      expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['example']);
      expect(await repo.git('show', 'main:README.md')).toBe(README.trimEnd());
      expect(await repo.git('rev-parse', 'refs/tron/landed/example')).toBe(await repo.git('rev-parse', 'main'));

      const { config } = loadConfig(repo.dir);
      const argv = (role: 'builder' | 'reviewer') => (config!.workers[role] as CommandSettings).command;
      expect(lines(join(run.runDir, 'fake-builder-1.argv'))).toEqual(argv('builder'));
      expect(lines(join(run.runDir, 'fake-builder-2.argv'))).toEqual(argv('builder'));
      expect(lines(join(run.runDir, 'fake-reviewer-1.argv'))).toEqual(argv('reviewer'));
      expect(argv('reviewer')).not.toEqual(argv('builder'));
      expect(readFileSync(join(run.runDir, 'fake-builder-1.prompt'), 'utf8')).toMatch(/^# Build block `example`/m);
      expect(readFileSync(join(run.runDir, 'fake-builder-2.prompt'), 'utf8')).toMatch(/^# Evidence for block `example`/m);
      expect(readFileSync(join(run.runDir, 'fake-reviewer-1.prompt'), 'utf8')).toMatch(/^# Review block `example`/m);
      const env = readFileSync(join(run.runDir, 'fake-builder-1.env'), 'utf8');
      expect(env).toContain(`${passed}=${KEYS[passed]}`);
      expect(env).not.toContain(withheld);
      expect(env).toContain('TRON_ROLE=builder');
      // The reply came out of the CLI's structured output, not its raw stdout.
      const replies = ofType(run.events, 'reply.received').map((e) => e.reply);
      expect(replies).toEqual([
        'Added a Running the tests section to README.md.\n>>DONE',
        `>>CONFIRMED ${EVIDENCE}`,
        'The section is there and names the command.\n>>APPROVE',
      ]);
    },
  );

  it('records the usage and cost Claude Code reports on every turn, and the report totals them per block, role and run', async () => {
    const repo = await initialised('claude');
    const run = await runTron(repo, { env: { PATH: `${fakeBin('claude')}${delimiter}${process.env.PATH}`, ...KEYS } });

    expect(run.exit).toBe(0);
    const usage = ofType(run.events, 'usage.recorded');
    expect(usage.map((e) => [e.role, e.turn, e.model, e.input_tokens, e.cached_tokens, e.output_tokens, e.cost_usd, e.priced_by])).toEqual([
      ['builder', 1, 'claude-sonnet-4-5', 1200, 300, 40, 0.0123, 'worker'],
      ['builder', 2, 'claude-sonnet-4-5', 1200, 300, 40, 0.0123, 'worker'],
      ['reviewer', 1, 'claude-sonnet-4-5', 1200, 300, 40, 0.0045, 'worker'],
    ]);
    const stats = runStats(run.events);
    for (const block of stats.blocks) {
      let sum = 0;
      for (const e of usage) if (e.block === block.id) sum += e.cost_usd ?? 0;
      expect(block.spend.costUsd).toBe(sum);
    }
    expect(stats.blocks.find((b) => b.id === 'example')!.spend).toMatchObject({ tokens: 3 * 1540, unpricedTokens: 0 });
    expect(stats.spendByRole.builder!.costUsd).toBe(0.0123 + 0.0123);
    expect(stats.spend.costUsd).toBe(0.0123 + 0.0123 + 0.0045);
    const report = readRunFile(run.runDir, 'report.md');
    expect(report).toContain('- spend: $0.0291 (4,620 tokens); input 3,600, cached 900, output 120');
    expect(report).toMatch(/^\| example \| landed \|.* \| \$0\.0291 \(4,620 tokens\) \|$/m);
    const json: string[] = [];
    await reportCommand({ repo: repo.dir, run: run.runDir, json: true, print: (l) => json.push(l) });
    expect(JSON.parse(json.join('\n')).blocks[0].spend.costUsd).toBe(stats.blocks[0]!.spend.costUsd);
  });

  it.skipIf(BWRAP_SKIP !== undefined).each(['claude', 'codex'] as const)(
    'in the bwrap sandbox, the %s preset writes only its own state and its worktree, and the block lands',
    async (preset) => {
      const repo = await initialised(preset, true);
      const home = fakeHome();
      const run = await runTron(repo, { env: { PATH: `${fakeBin(preset)}${delimiter}${process.env.PATH}`, HOME: home, ...KEYS } });
      expect(run.exit).toBe(0);
      expect(JSON.parse(readRunFile(run.runDir, 'manifest.json')).sandbox).toMatchObject({ used: 'bwrap' });
      expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['example']);
      // It logged into its state folder (writable), and could not have into the run directory.
      expect(readFileSync(join(home, `.${preset}`, 'fake-builder-1.prompt'), 'utf8')).toMatch(/^# Build block `example`/m);
      expect(existsSync(join(run.runDir, 'fake-builder-1.prompt'))).toBe(false);
    },
  );

  it('stops a block that spends past block_usd and pages the operator with its spend; it never lands', async () => {
    const repo = await initialised('claude');
    writeFileSync(
      join(repo.dir, '.tron', 'config.toml'),
      `${readFileSync(join(repo.dir, '.tron', 'config.toml'), 'utf8')}\n[budgets]\nblock_usd = 0.02\n`,
    );
    await repo.commitAll('a budget');
    const run = await runTron(repo, { env: { PATH: `${fakeBin('claude')}${delimiter}${process.env.PATH}`, ...KEYS } });

    expect(run.exit).toBe(3);
    // Two builder turns at $0.0123 each: the second crosses $0.02.
    expect(ofType(run.events, 'budget.exceeded')).toMatchObject([
      { scope: 'block', block: 'example', limit: 'block_usd = 0.02', spent_usd: 0.0246, spent_tokens: 2 * 1540 },
    ]);
    const raised = ofType(run.events, 'escalation.raised').filter((e) => e.trouble === 'budget_exceeded');
    expect(raised).toMatchObject([{ block: 'example', handler: 'operator' }]);
    expect(raised[0]!.detail).toContain('spent $0.0246 (3,080 tokens), past its budget block_usd = 0.02');
    expect(ofType(run.events, 'page.sent').map((e) => e.block)).toEqual(['example']);
    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(run.output.join('\n')).toContain('example: spent $0.0246 (3,080 tokens), past its budget block_usd = 0.02');
    // Nothing was dispatched to the block after its budget was crossed.
    const crossed = ofType(run.events, 'budget.exceeded')[0]!.seq;
    expect(ofType(run.events, 'block.dispatched').filter((e) => e.seq > crossed)).toEqual([]);
  });

  it('ends a run that spends past run_usd with exit 3 naming the budget, and starts no turn after', async () => {
    const repo = await initialised('claude');
    writeFileSync(
      join(repo.dir, '.tron', 'config.toml'),
      `${readFileSync(join(repo.dir, '.tron', 'config.toml'), 'utf8')}\n[budgets]\nrun_usd = 0.01\n`,
    );
    await repo.commitAll('a run budget');
    const run = await runTron(repo, { env: { PATH: `${fakeBin('claude')}${delimiter}${process.env.PATH}`, ...KEYS } });

    expect(run.exit).toBe(3);
    const exceeded = ofType(run.events, 'budget.exceeded');
    expect(exceeded).toMatchObject([{ scope: 'run', limit: 'run_usd = 0.01', spent_usd: 0.0123 }]);
    expect(ofType(run.events, 'block.dispatched').filter((e) => e.seq > exceeded[0]!.seq)).toEqual([]);
    expect(ofType(run.events, 'run.finished')).toMatchObject([
      { reason: 'budget', exit: 3, detail: 'the run budget run_usd = 0.01 is spent: $0.0123 (1,540 tokens)' },
    ]);
    expect(ofType(run.events, 'block.landed')).toEqual([]);
  });

  it('prices Codex tokens from [prices] when Codex reports tokens but no cost', async () => {
    const repo = await initialised('codex');
    const file = join(repo.dir, '.tron/config.toml');
    writeFileSync(file, `${readFileSync(file, 'utf8')}\n[prices.codex]\ninput = 1.25\ncached = 0.125\noutput = 10\n`);
    await repo.commitAll('Price codex');
    const run = await runTron(repo, { env: { PATH: `${fakeBin('codex')}${delimiter}${process.env.PATH}`, ...KEYS } });

    expect(run.exit).toBe(0);
    const usage = ofType(run.events, 'usage.recorded');
    const cost = (600 * 1.25 + 400 * 0.125 + 50 * 10) / 1e6;
    expect(usage.map((e) => [e.model, e.input_tokens, e.cached_tokens, e.output_tokens, e.cost_usd, e.priced_by])).toEqual(
      Array(3).fill(['codex', 600, 400, 50, cost, 'prices']),
    );
    expect(runStats(run.events).blocks[0]!.spend.costUsd).toBe(cost + cost + cost);
  });

  it('passes an exported ANTHROPIC_BASE_URL and ANTHROPIC_AUTH_TOKEN to Claude Code with the preset unchanged, and nothing unset', async () => {
    const repo = await initialised('claude');
    const presetBefore = readFileSync(join(repo.dir, '.tron/config.toml'), 'utf8');
    const gw = await gateway();
    const run = await runTron(repo, {
      env: {
        PATH: `${fakeBin('claude')}${delimiter}${process.env.PATH}`,
        HOME: homeWith(),
        ANTHROPIC_BASE_URL: gw.url,
        ANTHROPIC_AUTH_TOKEN: 'gateway-token',
        HTTPS_PROXY: 'http://proxy.invalid:3128',
        OPENAI_API_KEY: 'not-for-claude',
        TRON_CRASH_AFTER_EVENT: '',
      },
    });

    expect(run.exit).toBe(0);
    expect(readFileSync(join(repo.dir, '.tron/config.toml'), 'utf8')).toBe(presetBefore);
    for (const [role, turn] of [
      ['builder', 1],
      ['builder', 2],
      ['reviewer', 1],
    ] as const) {
      const env = envOf(run.runDir, role, turn);
      expect(env).toMatchObject({
        ANTHROPIC_BASE_URL: gw.url,
        ANTHROPIC_AUTH_TOKEN: 'gateway-token',
        HTTPS_PROXY: 'http://proxy.invalid:3128',
      });
      expect(Object.keys(env).filter((k) => /^(ANTHROPIC_API_KEY|ANTHROPIC_MODEL|OPENAI_API_KEY|TRON_CRASH_AFTER_EVENT)$/.test(k))).toEqual(
        [],
      );
    }
    // The CLI really went to the gateway, with the token, on every turn.
    expect(gw.seen.map((r) => [r.authorization, JSON.parse(r.body).role])).toEqual([
      ['Bearer gateway-token', 'builder'],
      ['Bearer gateway-token', 'builder'],
      ['Bearer gateway-token', 'reviewer'],
    ]);
  });

  it.each([
    ['claude', 'ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN', '~/.claude/.credentials.json', '/login'],
    ['codex', 'OPENAI_API_KEY, CODEX_API_KEY', '~/.codex/auth.json', 'codex login'],
  ] as const)(
    'without a key or a %s login, tron start exits 2 with TRON_WORKER_AUTH naming both, before any turn',
    async (preset, keys, file, login) => {
      const repo = await initialised(preset);
      const env = { PATH: `${fakeBin(preset)}${delimiter}${process.env.PATH}`, HOME: homeWith() };
      const problem = { code: 'TRON_WORKER_AUTH', path: expect.stringMatching(/^\.tron\/config\.toml: workers\.\w+\.env$/) };
      await expect(runTron(repo, { env })).rejects.toMatchObject({
        problems: [
          { ...problem, path: '.tron/config.toml: workers.builder.env', message: expect.stringContaining(`none of ${keys} reaches it`) },
          problem,
          problem,
        ],
      });
      await expect(runTron(repo, { env })).rejects.toMatchObject({
        problems: expect.arrayContaining([
          expect.objectContaining({ message: expect.stringMatching(new RegExp(`no login at ${file}.*${login}`)) }),
        ]),
      });
      expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
    },
  );

  it.each([
    ['claude', '.claude/.credentials.json'],
    ['codex', '.codex/auth.json'],
  ] as const)('with no key but the %s login file under HOME, the CLI runs and the block lands', async (preset, file) => {
    const repo = await initialised(preset);
    const run = await runTron(repo, {
      env: { PATH: `${fakeBin(preset)}${delimiter}${process.env.PATH}`, HOME: homeWith({ [file]: '{}' }) },
    });
    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['example']);
  });

  it("shows the CLI's own stdout error in the event, on the console and in the page, and pages at once when it repeats", async () => {
    const repo = await initialised('claude');
    const gw = await gateway();
    await gw.close(); // a gateway that is down: the port refuses connections
    const run = await runTron(repo, {
      env: { PATH: `${fakeBin('claude')}${delimiter}${process.env.PATH}`, ...KEYS, ANTHROPIC_BASE_URL: gw.url },
    });

    expect(run.exit).toBe(3);
    const said = 'API Error: Unable to connect to API (ConnectionRefused)';
    const failed = ofType(run.events, 'reply.received');
    expect(failed.map((e) => [e.ok, e.failure, e.cause, e.detail])).toEqual([
      [false, 'exit', 'network', `exited with 1: ${said}`],
      [false, 'exit', 'network', `exited with 1: ${said}`],
    ]);
    expect(JSON.parse(failed[0]!.stdout_tail!)).toMatchObject({ is_error: true, result: said });
    expect(failed[0]!.stderr_tail).toBeUndefined();
    const console = run.output.join('\n');
    expect(console).toContain(`example: example.1.builder turn 1 — the turn failed (exit): exited with 1: ${said}`);
    // The restate failed the same way: the operator is paged at once; the architect (the same CLI) is not asked.
    expect(ofType(run.events, 'escalation.raised').map((e) => `${e.trouble}→${e.handler}`)).toEqual([
      'turn_failed→restate',
      'worker_unavailable→operator',
    ]);
    expect(ofType(run.events, 'block.dispatched').map((e) => e.kind)).toEqual(['build', 'restate']);
    const page = ofType(run.events, 'page.sent')[0]!;
    expect(page.reason).toContain(`the builder worker failed twice in a row (network): exited with 1: ${said}`);
    expect(console).toContain(
      `PAGE example (worker_unavailable): the builder worker failed twice in a row (network): exited with 1: ${said}`,
    );
    expect(readRunFile(run.runDir, 'pages.md')).toContain(said);
  });

  it.each(['claude', 'codex'] as const)(
    'without %s installed, tron start exits 2 naming the command to fix, before anything runs',
    async (preset) => {
      const repo = await initialised(preset);
      await expect(runTron(repo, { env: { PATH: pathWithout(preset), ...KEYS } })).rejects.toMatchObject({
        problems: [
          {
            code: 'TRON_WORKER_NOT_FOUND',
            path: '.tron/config.toml: workers.builder.command',
            message: expect.stringContaining(
              `cannot find "${preset}" on PATH; install it (npm install -g ${preset === 'claude' ? '@anthropic-ai/claude-code' : '@openai/codex'}) and log in`,
            ),
          },
          { code: 'TRON_WORKER_NOT_FOUND', path: '.tron/config.toml: workers.reviewer.command' },
          { code: 'TRON_WORKER_NOT_FOUND', path: '.tron/config.toml: workers.architect.command' },
        ],
      });
      expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
    },
  );

  it('the openai preset without its key exits 2 naming OPENAI_API_KEY and api_key_env, before any model is called', async () => {
    const repo = await initialised('openai');
    await expect(runTron(repo)).rejects.toMatchObject({
      problems: [
        {
          code: 'TRON_WORKER_KEY_UNSET',
          path: '.tron/config.toml: workers.builder.api_key_env',
          message: expect.stringContaining('$OPENAI_API_KEY is not set'),
        },
        { code: 'TRON_WORKER_KEY_UNSET' },
        { code: 'TRON_WORKER_KEY_UNSET' },
      ],
    });
    expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
  });

  it('the openai preset with only base_url changed works against any OpenAI-compatible server', async () => {
    const server: ModelServer = await startModelServer((request): ScriptStep => {
      const view = turnOf(request);
      const say = (step: ScriptStep): ScriptStep => ({ ...step, usage: usageOf(50) });
      if (view.role === 'builder' && view.kind === 'build') {
        if (view.step === 0) return say({ tool_calls: [toolCall('write_file', { path: 'README.md', content: README })] });
        if (view.step === 1)
          return say({
            tool_calls: [toolCall('run', { shell: 'npm test && git add README.md && git commit -q -m "Document the tests"' })],
          });
        return say({ content: '>>DONE' });
      }
      if (view.role === 'builder' && view.kind === 'challenge') return say({ content: `>>CONFIRMED ${EVIDENCE}` });
      if (view.role === 'reviewer' && view.kind === 'review') return say({ content: '>>APPROVE' });
      return { status: 400, message: `no script for the ${view.role}'s ${view.kind} turn` };
    });
    cleanups.push(() => server.close());
    const repo = await initialised('openai');
    const file = join(repo.dir, '.tron/config.toml');
    writeFileSync(file, readFileSync(file, 'utf8').replaceAll('https://api.openai.com/v1', server.url));
    await repo.commitAll('Use a local model server');

    const run = await runTron(repo, { env: KEYS });

    expect(run.exit).toBe(0);
    expect(await repo.git('show', 'main:README.md')).toBe(README.trimEnd());
    expect(server.requests.every((r) => r.authorization === `Bearer ${KEYS.OPENAI_API_KEY}` && r.body.model === 'gpt-5.1')).toBe(true);
    const tokens = ofType(run.events, 'usage.recorded').map((e) => `${e.role} ${e.input_tokens + e.cached_tokens + e.output_tokens}`);
    expect(tokens).toEqual([...Array(4).fill('builder 50'), 'reviewer 50']);
  });
});

/**
 * The real Codex CLI, when this machine has it: TRON_TEST_CODEX names its program, or a
 * `codex` on PATH that says it is codex-cli. (`npm i --prefix DIR @openai/codex` and
 * TRON_TEST_CODEX=DIR/node_modules/.bin/codex.) It runs against the scripted model server
 * with no network: a provider of one's own at 127.0.0.1 needs none.
 */
function realCodex(): string | undefined {
  const onPath = findProgram('codex', process.env.PATH, process.cwd());
  const candidates = [process.env.TRON_TEST_CODEX, onPath].filter((c): c is string => Boolean(c));
  for (const program of candidates) {
    try {
      if (/^codex-cli /.test(execFileSync(program, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })))
        return program;
    } catch {}
  }
  return undefined;
}
const REAL_CODEX = realCodex();
const CODEX: Needed = {
  name: 'the real Codex CLI (or TRON_TEST_CODEX=PATH)',
  install: 'npm install -g @openai/codex@0.171.0',
  ...(REAL_CODEX !== undefined && { path: REAL_CODEX }),
};
// Locally the test waits for a real Codex (one line says how to get one); in CI, which
// installs it (.ci/run), it must run.
const NO_CODEX = skipWithout('the real-Codex test', CODEX);

/** A Codex config.toml for a model provider of one's own, as Codex's docs show it, at `url`. */
const providerToml = (url: string) => `model = "scripted-model"
model_provider = "fake"

[model_providers.fake]
name = "A scripted model server"
base_url = "${url}"
env_key = "FAKE_MODEL_KEY"
wire_api = "responses"
`;

/** The tron prompt in a Codex request: the text of its user messages. */
function codexPrompt(request: RecordedRequest): string {
  const items: Array<{ role?: string; content?: unknown }> = Array.isArray(request.body?.input) ? request.body.input : [];
  return items
    .filter((item) => item.role === 'user')
    .map((item) =>
      Array.isArray(item.content) ? item.content.map((c: { text?: string }) => c.text ?? '').join('') : String(item.content ?? ''),
    )
    .join('\n');
}

/**
 * The script of a builder and a reviewer on the Responses API, as Codex calls it: the build
 * runs one shell command (Codex's exec_command tool) that writes README.md and commits it,
 * then says >>DONE; the evidence and the review answer at once.
 */
function codexScript(request: RecordedRequest): ScriptStep {
  const prompt = codexPrompt(request);
  const ran = (request.body?.input ?? []).filter((i: { type?: string }) => i.type === 'function_call_output').length;
  const usage = usageOf(60);
  if (/^# Build block/m.test(prompt)) {
    if (ran === 0) {
      const b64 = Buffer.from(README).toString('base64');
      const cmd = `echo ${b64} | base64 -d > README.md && git add README.md && git commit -q -m "Document the tests"`;
      return { tool_calls: [toolCall('exec_command', { cmd })], usage };
    }
    return { content: 'Added a Running the tests section to README.md.\n>>DONE', usage };
  }
  if (/^# Evidence for block/m.test(prompt)) return { content: `>>CONFIRMED ${EVIDENCE}`, usage };
  if (/^# Review block/m.test(prompt)) return { content: 'The section is there and names the command.\n>>APPROVE', usage };
  return { status: 400, message: 'no script for this prompt' };
}

/** The codex preset with the provider's key variable added to every worker's env list, as docs/workers.md says. */
async function passingTheKey(repo: TestRepo): Promise<void> {
  const file = join(repo.dir, '.tron/config.toml');
  writeFileSync(file, readFileSync(file, 'utf8').replaceAll('"CODEX_API_KEY", ', '"CODEX_API_KEY", "FAKE_MODEL_KEY", '));
  await repo.commitAll('Pass the model server key to Codex');
}

describe('Codex with a model provider of its own', () => {
  it('tron start refuses it before any turn when its env_key is not set or not passed, naming the variable and the provider, not the OpenAI login', async () => {
    const repo = await initialised('codex');
    const home = homeWith({ '.codex/config.toml': providerToml('http://127.0.0.1:9/v1') });
    const PATH = `${fakeBin('codex')}${delimiter}${process.env.PATH}`;
    const refused = (says: string) => ({
      problems: [
        {
          code: 'TRON_WORKER_AUTH',
          path: '.tron/config.toml: workers.builder.env',
          message: expect.stringContaining(`uses the model provider "fake" (~/.codex/config.toml), whose env_key is FAKE_MODEL_KEY${says}`),
        },
        { code: 'TRON_WORKER_AUTH' },
        { code: 'TRON_WORKER_AUTH' },
      ],
    });
    await expect(runTron(repo, { env: { PATH, HOME: home, OPENAI_API_KEY: 'k' } })).rejects.toMatchObject(
      refused(", and FAKE_MODEL_KEY is set neither in tron's environment nor in ~/.codex/.env"),
    );
    // Set, but the preset's env list does not pass it: tron does not pass a variable a file under ~/.codex names.
    await expect(runTron(repo, { env: { PATH, HOME: home, FAKE_MODEL_KEY: 'k' } })).rejects.toMatchObject(
      refused(": FAKE_MODEL_KEY is set, but the worker's env list does not pass it on"),
    );
    expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
  });

  it.skipIf(NO_CODEX)(
    'the real Codex CLI, configured for a scripted model server as its docs say, lands the example block with its key passed by the env list',
    async () => {
      requireAll(CODEX);
      const server = await startModelServer(codexScript);
      cleanups.push(() => server.close());
      const repo = await initialised('codex');
      await passingTheKey(repo);
      const presetBefore = readFileSync(join(repo.dir, '.tron/config.toml'), 'utf8');
      const home = homeWith({ '.codex/config.toml': providerToml(server.url) });
      const run = await runTron(repo, {
        env: { PATH: `${dirname(REAL_CODEX!)}${delimiter}${process.env.PATH}`, HOME: home, FAKE_MODEL_KEY: 'local-key' },
      });

      expect(run.exit).toBe(0);
      expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['example']);
      expect(await repo.git('show', 'main:README.md')).toBe(README.trimEnd());
      expect(readFileSync(join(repo.dir, '.tron/config.toml'), 'utf8')).toBe(presetBefore);
      // Codex reached the server with the key the env list passed on to it, on every call of every turn.
      const calls = server.requests.filter((r) => r.path.startsWith('/v1/responses'));
      expect(calls.length).toBe(4);
      expect(calls.every((r) => r.authorization === 'Bearer local-key' && r.body.model === 'scripted-model')).toBe(true);
      expect(ofType(run.events, 'reply.received').map((e) => e.reply)).toEqual([
        'Added a Running the tests section to README.md.\n>>DONE',
        `>>CONFIRMED ${EVIDENCE}`,
        'The section is there and names the command.\n>>APPROVE',
      ]);
      // Its usage came out of its --json events: two calls of 60 tokens in the build.
      expect(ofType(run.events, 'usage.recorded').map((e) => e.input_tokens + e.cached_tokens + e.output_tokens)).toEqual([120, 60, 60]);
    },
  );

  it('a Codex that reads its config.toml as the real one does gets the provider key by the env list, talks to base_url, and lands the block', async () => {
    const server = await startModelServer(codexScript);
    cleanups.push(() => server.close());
    const repo = await initialised('codex');
    await passingTheKey(repo);
    const home = homeWith({ '.codex/config.toml': providerToml(server.url) });
    const bin = mkdtempSync(join(tmpdir(), 'tron-fake-bin-'));
    cleanups.push(() => rmSync(bin, { recursive: true, force: true }));
    writeFileSync(join(bin, 'codex'), providerCodexSource());
    chmodSync(join(bin, 'codex'), 0o755);
    const run = await runTron(repo, {
      env: { PATH: `${bin}${delimiter}${process.env.PATH}`, HOME: home, FAKE_MODEL_KEY: 'local-key', OPENAI_API_KEY: '' },
    });

    expect(run.exit).toBe(0);
    expect(await repo.git('show', 'main:README.md')).toBe(README.trimEnd());
    expect(envOf(run.runDir, 'builder', 1)).toMatchObject({ FAKE_MODEL_KEY: 'local-key' });
    expect(server.requests.length).toBe(4);
    expect(server.requests.every((r) => r.authorization === 'Bearer local-key')).toBe(true);
  });
});

/**
 * A fake `codex` for a provider of one's own, doing what Codex 0.171 does with one: it reads
 * `$CODEX_HOME/config.toml` (default ~/.codex), takes `model_provider` and its
 * `[model_providers.<id>]` table, fails with "Missing environment variable" when the table's
 * env_key is not set, and otherwise runs the turn against base_url on the Responses API
 * with that key: each function call the model makes is run as a shell command and its
 * output sent back, until the model answers with a message, printed as `codex exec --json`
 * prints it.
 */
function providerCodexSource(): string {
  const toml = createRequire(import.meta.url).resolve('@iarna/toml');
  return `#!${process.execPath}
const fs = require('node:fs');
const path = require('node:path');
const { execSync } = require('node:child_process');
const TOML = require(${JSON.stringify(toml)});
const env = process.env;
fs.writeFileSync(env.TRON_RUN_DIR + '/fake-' + env.TRON_ROLE + '-' + env.TRON_TURN + '.env', Object.entries(env).map(([k, v]) => k + '=' + v).join('\\n') + '\\n');
const say = (e) => console.log(JSON.stringify(e));
const home = env.CODEX_HOME || path.join(env.HOME || '', '.codex');
const config = TOML.parse(fs.readFileSync(path.join(home, 'config.toml'), 'utf8'));
const provider = config.model_providers[config.model_provider];
const prompt = fs.readFileSync(0, 'utf8');
say({ type: 'thread.started', thread_id: 't' });
say({ type: 'turn.started' });
const key = provider.env_key ? env[provider.env_key] : undefined;
if (provider.env_key && !key) {
  say({ type: 'turn.failed', error: { message: 'Missing environment variable: \`' + provider.env_key + '\`.' } });
  process.exit(1);
}
(async () => {
  const input = [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: prompt }] }];
  const usage = { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0 };
  for (;;) {
    const res = await fetch(provider.base_url + '/responses', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: 'Bearer ' + key } : {}) },
      body: JSON.stringify({ model: config.model, input, stream: false }),
    });
    const body = await res.json();
    if (!res.ok) {
      say({ type: 'turn.failed', error: { message: 'unexpected status ' + res.status + ': ' + body.error.message } });
      process.exit(1);
    }
    usage.input_tokens += body.usage.input_tokens;
    usage.output_tokens += body.usage.output_tokens;
    const calls = body.output.filter((item) => item.type === 'function_call');
    if (calls.length === 0) {
      const text = body.output.find((item) => item.type === 'message').content[0].text;
      say({ type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text } });
      say({ type: 'turn.completed', usage });
      process.exit(0);
    }
    for (const call of calls) {
      const output = execSync(JSON.parse(call.arguments).cmd, { encoding: 'utf8', shell: '/bin/sh' });
      input.push(call, { type: 'function_call_output', call_id: call.call_id, output });
    }
  }
})();
`;
}

describe('docs/workers.md', () => {
  const page = readFileSync(new URL('../../docs/workers.md', import.meta.url), 'utf8');
  const blocks = [...page.matchAll(/```toml\n([\s\S]*?)```/g)].map((m) => m[1]!);

  it('shows a config block for OpenAI, a local server, Claude Code, Codex and the command adapter', () => {
    const text = blocks.join('\n');
    for (const needle of ['api.openai.com', '127.0.0.1:11434', '"claude", "-p"', '"codex", "exec"', 'adapter = "command"'])
      expect(text).toContain(needle);
  });

  it('shows the openai, claude and codex presets exactly as tron init writes them', () => {
    const parsed = blocks.map((block) => JSON.stringify(TOML.parse(block)));
    for (const name of ['openai', 'claude', 'codex'] as const)
      expect(parsed).toContain(JSON.stringify(TOML.parse(WORKER_PRESETS[name].toml)));
  });

  it('has only worker tables that tron accepts as written', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const block of blocks) {
      const data = TOML.parse(block) as { workers?: Record<string, unknown> };
      expect(Object.keys(data)).toEqual(['workers']);
      for (const [role, table] of Object.entries(data.workers!)) {
        expect(['builder', 'reviewer', 'architect']).toContain(role);
        const parsed = workerSettings.safeParse(table);
        expect(parsed.success, `${role}: ${block}`).toBe(true);
      }
    }
  });
});
