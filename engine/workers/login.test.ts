import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loginProblem } from './login.ts';
import type { CommandSettings } from '../project/worker-settings.ts';

const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});
function home(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-home-'));
  homes.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}
const claude: CommandSettings = {
  adapter: 'command',
  command: ['claude', '-p'],
  env: ['ANTHROPIC_*', 'CLAUDE_CODE_*', 'CLAUDE_CONFIG_DIR'],
  writable: [],
};
const codex: CommandSettings = { adapter: 'command', command: ['/opt/bin/codex', 'exec'], env: ['OPENAI_*', 'CODEX_HOME'], writable: [] };

describe('whether a CLI can authenticate', () => {
  it('refuses Claude Code with no key and no login, naming the variables, the file and how to log in', () => {
    const HOME = home();
    const problem = loginProblem(claude, { HOME }, 'linux');
    expect(problem).toContain('Claude Code ("claude") cannot authenticate');
    expect(problem).toContain('ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN');
    expect(problem).toContain('no login at ~/.claude/.credentials.json');
    expect(problem).toContain('/login');
  });

  it('accepts Claude Code with a key passed on, a login file, a key helper or a provider switch', () => {
    expect(loginProblem(claude, { HOME: home(), ANTHROPIC_API_KEY: 'k' }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home({ '.claude/.credentials.json': '{}' }) }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home({ '.claude/settings.json': '{"apiKeyHelper":"pass show k"}' }) }, 'linux')).toBeUndefined();
    expect(loginProblem(claude, { HOME: home(), CLAUDE_CODE_USE_BEDROCK: '1' }, 'linux')).toBeUndefined();
  });

  it('looks for the login where CLAUDE_CONFIG_DIR says, when the worker gets it', () => {
    const HOME = home({ 'elsewhere/.credentials.json': '{}' });
    expect(loginProblem(claude, { HOME, CLAUDE_CONFIG_DIR: join(HOME, 'elsewhere') }, 'linux')).toBeUndefined();
    expect(loginProblem({ ...claude, env: [] }, { HOME, CLAUDE_CONFIG_DIR: join(HOME, 'elsewhere') }, 'linux')).toBeDefined();
  });

  it('says when the key is set but the env list keeps it from the worker', () => {
    const problem = loginProblem({ ...claude, env: [] }, { HOME: home(), ANTHROPIC_API_KEY: 'k' }, 'linux');
    expect(problem).toContain("ANTHROPIC_API_KEY is set, but the worker's env list does not pass it on: add it to env");
  });

  it('does not judge a Claude Code login kept in the macOS Keychain', () => {
    expect(loginProblem(claude, { HOME: home() }, 'darwin')).toBeUndefined();
  });

  it('finds the Codex login in $CODEX_HOME/auth.json, default ~/.codex', () => {
    const HOME = home({ '.codex/auth.json': '{}', 'ch/auth.json': '{}' });
    expect(loginProblem(codex, { HOME }, 'linux')).toBeUndefined();
    expect(loginProblem(codex, { HOME, CODEX_HOME: join(HOME, 'ch') }, 'linux')).toBeUndefined();
    const problem = loginProblem(codex, { HOME: home() }, 'linux');
    expect(problem).toContain('Codex ("/opt/bin/codex") cannot authenticate');
    expect(problem).toContain('codex login');
    expect(problem).toContain('~/.codex/auth.json');
    expect(loginProblem(codex, { HOME: home(), OPENAI_API_KEY: 'k' }, 'linux')).toBeUndefined();
  });

  it('has nothing to say about a CLI it does not know', () => {
    expect(loginProblem({ adapter: 'command', command: ['my-agent'], env: [], writable: [] }, { HOME: home() }, 'linux')).toBeUndefined();
  });
});
