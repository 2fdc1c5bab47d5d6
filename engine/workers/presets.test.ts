import TOML from '@iarna/toml';
import { describe, expect, it } from 'vitest';
import { WORKER_ROLES } from '../core/roles.ts';
import { isPresetName, PRESET_NAMES, WORKER_PRESETS } from './presets.ts';
import { envEntryMatches } from './env.ts';
import { workerSettings, type CommandSettings, type WorkerSettings } from '../project/worker-settings.ts';

function tables(name: (typeof PRESET_NAMES)[number]): Record<string, WorkerSettings> {
  const data = TOML.parse(WORKER_PRESETS[name].toml) as { workers: Record<string, unknown> };
  expect(Object.keys(data)).toEqual(['workers']);
  return Object.fromEntries(Object.entries(data.workers).map(([role, table]) => [role, workerSettings.parse(table)]));
}

function command(name: 'claude' | 'codex', role: string): string[] {
  const settings = tables(name)[role] as CommandSettings;
  expect(settings.adapter).toBe('command');
  return settings.command;
}

describe('worker presets', () => {
  it.each(PRESET_NAMES)('%s defines a valid worker for builder, reviewer and architect', (name) => {
    expect(Object.keys(tables(name))).toEqual([...WORKER_ROLES]);
  });

  it('openai uses the built-in agent and names the key variable, never a key', () => {
    for (const settings of Object.values(tables('openai'))) {
      expect(settings).toMatchObject({ adapter: 'openai', base_url: 'https://api.openai.com/v1', api_key_env: 'OPENAI_API_KEY' });
    }
    expect(WORKER_PRESETS.openai.toml).not.toMatch(/sk-/);
  });

  it('command presets pass the prompt on stdin and explain the argument placeholders', () => {
    for (const name of ['claude', 'codex'] as const) {
      for (const role of WORKER_ROLES) expect(command(name, role).join(' ')).not.toMatch(/\{prompt(_file)?\}/);
      expect(WORKER_PRESETS[name].toml).toMatch(/\{prompt\}/);
      expect(WORKER_PRESETS[name].toml).toMatch(/\{prompt_file\}/);
    }
    for (const role of WORKER_ROLES) expect(command('codex', role).at(-1)).toBe('-');
    for (const role of WORKER_ROLES) expect(command('claude', role).slice(0, 2)).toEqual(['claude', '-p']);
  });

  it('claude lets only the builder edit', () => {
    expect(command('claude', 'builder')).toEqual(expect.arrayContaining(['--permission-mode', 'acceptEdits', 'Bash']));
    for (const role of ['reviewer', 'architect']) {
      const argv = command('claude', role);
      expect(argv).not.toContain('acceptEdits');
      const disallowed = argv.slice(argv.indexOf('--disallowedTools') + 1);
      expect(disallowed.slice(0, 3)).toEqual(['Edit', 'Write', 'NotebookEdit']);
      expect(argv.slice(argv.indexOf('--allowedTools') + 1)).not.toContain('Bash');
    }
  });

  it('codex keeps reviewer and architect in the read-only sandbox', () => {
    expect(command('codex', 'builder')).not.toContain('read-only');
    for (const role of ['reviewer', 'architect'])
      expect(command('codex', role)).toEqual(['codex', 'exec', '--json', '--sandbox', 'read-only', '-']);
  });

  it('command presets pass through what their CLI reads for its key, endpoint and network, and nothing of tron', () => {
    const passes = (name: 'claude' | 'codex', variable: string) =>
      WORKER_ROLES.every((role) => (tables(name)[role] as CommandSettings).env.some((entry) => envEntryMatches(entry, variable)));
    for (const v of ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_MODEL', 'CLAUDE_CODE_USE_BEDROCK']) {
      expect(passes('claude', v), v).toBe(true);
    }
    for (const v of ['CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_OAUTH_TOKEN', 'CLAUDE_CONFIG_DIR', 'AWS_ACCESS_KEY_ID', 'CLOUD_ML_REGION']) {
      expect(passes('claude', v), v).toBe(true);
    }
    for (const v of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'CODEX_HOME', 'CODEX_API_KEY']) expect(passes('codex', v), v).toBe(true);
    for (const name of ['claude', 'codex'] as const) {
      for (const v of ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY', 'SSL_CERT_FILE']) expect(passes(name, v), `${name} ${v}`).toBe(true);
      for (const v of ['TRON_CRASH_AFTER_EVENT', 'TRON_ROLE', 'GITHUB_TOKEN']) expect(passes(name, v), `${name} ${v}`).toBe(false);
    }
    expect(passes('claude', 'OPENAI_API_KEY')).toBe(false);
    expect(passes('codex', 'ANTHROPIC_API_KEY')).toBe(false);
    // tron init writes the list with a comment saying what it is for.
    for (const name of ['claude', 'codex'] as const)
      expect(WORKER_PRESETS[name].toml).toMatch(/^# env: the variables passed on to the CLI/m);
  });

  it('command presets run their CLI in its structured output mode and read it', () => {
    for (const role of WORKER_ROLES) {
      expect(command('claude', role).slice(0, 4)).toEqual(['claude', '-p', '--output-format', 'json']);
      expect((tables('claude')[role] as CommandSettings).output).toBe('claude-json');
      expect(command('codex', role).slice(0, 3)).toEqual(['codex', 'exec', '--json']);
      expect((tables('codex')[role] as CommandSettings).output).toBe('codex-jsonl');
    }
  });

  it('recognises preset names and nothing else', () => {
    expect(PRESET_NAMES.every(isPresetName)).toBe(true);
    expect(isPresetName('gpt')).toBe(false);
  });
});
