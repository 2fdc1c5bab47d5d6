/**
 * The ways Claude Code authenticates besides a key variable and its login file, read the
 * way Claude Code reads them (verified against Claude Code 2.1 run against a server on
 * 127.0.0.1 with ANTHROPIC_BASE_URL): each of these made a turn run where none of them
 * left it "Not logged in":
 *
 * - a settings file with `apiKeyHelper` (a command that prints a key), or with an `env`
 *   table setting a key variable (`ANTHROPIC_AUTH_TOKEN`, …) or a provider switch
 *   (`CLAUDE_CODE_USE_BEDROCK`, …). The settings files: the user's
 *   (`$CLAUDE_CONFIG_DIR/settings.json`, default `~/.claude/settings.json`), the project's
 *   (`.claude/settings.json` and `.claude/settings.local.json` where it runs), the managed
 *   ones (`/etc/claude-code/managed-settings.json`), and `--settings FILE-OR-JSON` in argv;
 * - `primaryApiKey` in its global state, `$CLAUDE_CONFIG_DIR/.claude.json` when that is
 *   set, else `~/.claude.json`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

type Env = Readonly<Record<string, string | undefined>>;

/** Claude Code's folder of settings and login, in the worker's environment. */
export function claudeDir(env: Env): string {
  return env.CLAUDE_CONFIG_DIR ?? join(env.HOME ?? '', '.claude');
}

function readJson(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function readJsonFile(file: string): Record<string, unknown> | undefined {
  try {
    return readJson(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The `--settings` values in a Claude Code argv: a file, or JSON text. */
function settingsArgs(argv: readonly string[], cwd: string): Array<Record<string, unknown> | undefined> {
  const out: Array<Record<string, unknown> | undefined> = [];
  for (let i = 1; i < argv.length; i += 1) {
    const arg = argv[i]!;
    const value = arg === '--settings' ? argv[++i] : arg.startsWith('--settings=') ? arg.slice('--settings='.length) : undefined;
    if (value === undefined) continue;
    out.push(value.trimStart().startsWith('{') ? readJson(value) : readJsonFile(value.startsWith('/') ? value : join(cwd, value)));
  }
  return out;
}

/**
 * Whether a settings file or argument, or Claude Code's global state, authenticates it:
 * the file (or argument) that does, or undefined. `names`: the variables that authenticate
 * it by themselves (keys and provider switches).
 */
export function claudeConfiguredLogin(argv: readonly string[], env: Env, cwd: string, names: readonly string[]): string | undefined {
  const dir = claudeDir(env);
  const files = [
    join(dir, 'settings.json'),
    join(cwd, '.claude', 'settings.json'),
    join(cwd, '.claude', 'settings.local.json'),
    '/etc/claude-code/managed-settings.json',
  ];
  const authenticates = (s: Record<string, unknown> | undefined) => {
    if (!s) return false;
    if (typeof s.apiKeyHelper === 'string' && s.apiKeyHelper.length > 0) return true;
    const vars = s.env;
    return (
      typeof vars === 'object' &&
      vars !== null &&
      names.some((n) => typeof (vars as Record<string, unknown>)[n] === 'string' && (vars as Record<string, string>)[n] !== '')
    );
  };
  for (const file of files) if (authenticates(readJsonFile(file))) return file;
  if (settingsArgs(argv, cwd).some(authenticates)) return '--settings in command';
  const state = env.CLAUDE_CONFIG_DIR ? join(env.CLAUDE_CONFIG_DIR, '.claude.json') : join(env.HOME ?? '', '.claude.json');
  const key = readJsonFile(state)?.primaryApiKey;
  if (typeof key === 'string' && key !== '') return state;
  return undefined;
}
