/**
 * The presets `tron init --worker …` writes, run as written by `tron start`. Claude Code
 * and Codex are stood in for by a fake `claude` / `codex` first on PATH that logs the
 * argv and environment it got, reads the prompt from stdin and answers with `>>` lines;
 * the openai preset talks to the scripted model server with only its base_url changed.
 * What a user meets when the CLI is not installed, or the key is not set, is tested too:
 * exit 2 before anything runs, naming the setting to fix — never a crash.
 */
import { accessSync, existsSync, chmodSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import TOML from '@iarna/toml';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type ScriptStep } from '../testing/model-server.ts';
import { initCommand } from '../commands/init.ts';
import { loadConfig } from '../project/config.ts';
import { NODE_RUNNER, ofType, runTron } from '../testing/project.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { WORKER_PRESETS } from './presets.ts';
import type { CommandSettings } from './settings.ts';
import { workerSettings } from './settings.ts';
import { turnOf, usageOf } from './openai/e2e-script.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const README = '# app\n\n## Running the tests\n\nRun `npm test`.\n';
const EVIDENCE = JSON.stringify({ evidence: { c1: 'README.md, section "Running the tests"', c2: 'README.md gives npm test' } });

/** A repository as a user has it, after `tron init --worker <preset>` and a commit of .tron/. */
async function initialised(preset: 'openai' | 'claude' | 'codex'): Promise<TestRepo> {
  const repo = await makeRepo({
    'package.json': `${JSON.stringify({ name: 'app', private: true, scripts: { test: 'node test.js' } })}\n`,
    'test.js': NODE_RUNNER,
    'tests/smoke.test.js': "require('node:assert').ok(true);\n",
  });
  cleanups.push(() => repo.cleanup());
  const printed: string[] = [];
  expect(await initCommand({ repo: repo.dir, worker: preset, print: (l) => printed.push(l) })).toBe(0);
  await repo.commitAll('tron init');
  return repo;
}

/**
 * A fake agent CLI: logs argv, env and stdin in its own state folder (`~/.claude`,
 * `~/.codex`: the one place besides its checkout the preset lets it write when tron
 * sandboxes it), then acts by the prompt's heading.
 */
const FAKE_AGENT = `#!/bin/sh
log="$HOME/.$(basename "$0")/fake-$TRON_ROLE-$TRON_TURN"
{ basename "$0"; for a in "$@"; do printf '%s\\n' "$a"; done; } > "$log.argv"
env > "$log.env"
cat > "$log.prompt"
if grep -q '^# Build block' "$log.prompt"; then
  printf '%s' '${README}' > README.md
  git add README.md && git commit -q -m 'Document the tests' || exit 1
  echo 'Added a Running the tests section to README.md.'
  echo '>>DONE'
elif grep -q '^# Evidence for block' "$log.prompt"; then
  echo '>>CONFIRMED ${EVIDENCE}'
elif grep -q '^# Review block' "$log.prompt"; then
  echo 'The section is there and names the command.'
  echo '>>APPROVE'
else
  echo '>>PAGE {"reason":"the fake agent has no answer for this prompt"}'
fi
`;

/** A HOME with the state the CLIs keep there: `.claude`, `.claude.json`, `.codex`. */
function fakeHome(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-fake-home-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, '.claude'));
  writeFileSync(join(dir, '.claude.json'), '{}\n');
  mkdirSync(join(dir, '.codex'));
  return dir;
}

/** A folder holding an executable fake named `name`, to put first on PATH. */
function fakeBin(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-fake-bin-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, name), FAKE_AGENT);
  chmodSync(join(dir, name), 0o755);
  return dir;
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

describe('tron init presets under tron start', () => {
  it.each([
    ['claude', 'ANTHROPIC_API_KEY', 'OPENAI_API_KEY'],
    ['codex', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY'],
  ] as const)(
    'the %s preset runs its CLI with the preset argv and the prompt on stdin, and lands the example block',
    async (preset, passed, withheld) => {
      const repo = await initialised(preset);
      const bin = fakeBin(preset);
      const home = fakeHome();
      const run = await runTron(repo, { env: { PATH: `${bin}${delimiter}${process.env.PATH}`, HOME: home, ...KEYS } });
      const logs = join(home, `.${preset}`);

      expect(run.exit).toBe(0);
      expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['example']);
      expect(await repo.git('show', 'main:README.md')).toBe(README.trimEnd());
      expect(await repo.git('rev-parse', 'refs/tron/landed/example')).toBe(await repo.git('rev-parse', 'main'));

      const { config } = loadConfig(repo.dir);
      const argv = (role: 'builder' | 'reviewer') => (config!.workers[role] as CommandSettings).command;
      expect(lines(join(logs, 'fake-builder-1.argv'))).toEqual(argv('builder'));
      expect(lines(join(logs, 'fake-builder-2.argv'))).toEqual(argv('builder'));
      expect(lines(join(logs, 'fake-reviewer-1.argv'))).toEqual(argv('reviewer'));
      expect(argv('reviewer')).not.toEqual(argv('builder'));
      expect(readFileSync(join(logs, 'fake-builder-1.prompt'), 'utf8')).toMatch(/^# Build block `example`/m);
      expect(readFileSync(join(logs, 'fake-builder-2.prompt'), 'utf8')).toMatch(/^# Evidence for block `example`/m);
      expect(readFileSync(join(logs, 'fake-reviewer-1.prompt'), 'utf8')).toMatch(/^# Review block `example`/m);
      const env = readFileSync(join(logs, 'fake-builder-1.env'), 'utf8');
      expect(env).toContain(`${passed}=${KEYS[passed]}`);
      expect(env).not.toContain(withheld);
      expect(env).toContain('TRON_ROLE=builder');
    },
  );

  it.each(['claude', 'codex'] as const)(
    'without %s installed, tron start exits 2 naming the command to fix, before anything runs',
    async (preset) => {
      const repo = await initialised(preset);
      await expect(runTron(repo, { env: { PATH: pathWithout(preset), ...KEYS } })).rejects.toMatchObject({
        problems: [
          {
            code: 'TRON_WORKER_NOT_FOUND',
            path: '.tron/config.toml: workers.builder.command',
            message: expect.stringContaining(`cannot find "${preset}" on PATH`),
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
    const tokens = ofType(run.events, 'worker.usage').map((e) => `${e.role} ${e.total_tokens}`);
    expect(tokens).toEqual([...Array(4).fill('builder 50'), 'reviewer 50']);
  });
});

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
