/**
 * Can a CLI agent authenticate before tron gives it a turn? Each CLI tron knows
 * authenticates either from a variable (its API key or token) or from its own login,
 * kept in a file under HOME; when neither is there, every turn fails the same way, so
 * `tron start` stops before anything runs (TRON_WORKER_AUTH) and says how to log in.
 *
 * Where the CLIs keep their login (verified against Claude Code 2.1 and Codex 0.171):
 * - Claude Code: `$CLAUDE_CONFIG_DIR/.credentials.json`, default `~/.claude/.credentials.json`
 *   (on macOS the login is in the Keychain instead, which tron does not read: there only
 *   the variables are checked, and a missing one is not an error). `apiKeyHelper` in
 *   `settings.json` there, or a third-party provider switch (Bedrock, Vertex, Foundry),
 *   authenticates too.
 * - Codex: `$CODEX_HOME/auth.json`, default `~/.codex/auth.json`, written by `codex login`.
 *
 * What counts is what the worker will see: a variable set in tron's environment but not
 * passed by the worker's `env` list does not reach the CLI.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { CommandSettings } from '../project/worker-settings.ts';
import { minimalEnv } from './env.ts';

export interface CliLogin {
  /** The product, for messages. */
  name: string;
  /** Variables that authenticate the CLI by themselves. */
  keys: readonly string[];
  /** Switches to providers whose own credentials tron does not check. */
  providers: readonly string[];
  /** The login files the CLI reads, in the worker's environment. */
  files(env: Readonly<Record<string, string>>): string[];
  /** Whether another file there (a settings file with a key helper) authenticates. */
  helper?(env: Readonly<Record<string, string>>): boolean;
  /** How to log in. */
  login: string;
  /** Platforms where the login lives outside any file tron can read. */
  opaqueOn?: readonly NodeJS.Platform[];
}

const home = (env: Readonly<Record<string, string>>) => env.HOME ?? '';
const claudeDir = (env: Readonly<Record<string, string>>) => env.CLAUDE_CONFIG_DIR ?? join(home(env), '.claude');

/** The CLIs tron knows, by program name. */
export const CLI_LOGINS: Record<string, CliLogin> = {
  claude: {
    name: 'Claude Code',
    keys: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN'],
    providers: ['CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY'],
    files: (env) => [join(claudeDir(env), '.credentials.json')],
    helper: (env) => {
      try {
        const settings = JSON.parse(readFileSync(join(claudeDir(env), 'settings.json'), 'utf8')) as { apiKeyHelper?: unknown };
        return typeof settings.apiKeyHelper === 'string' && settings.apiKeyHelper.length > 0;
      } catch {
        return false;
      }
    },
    login: 'run `claude` and /login once (or `claude setup-token` and export CLAUDE_CODE_OAUTH_TOKEN)',
    opaqueOn: ['darwin'],
  },
  codex: {
    name: 'Codex',
    keys: ['OPENAI_API_KEY', 'CODEX_API_KEY'],
    providers: [],
    files: (env) => [join(env.CODEX_HOME ?? join(home(env), '.codex'), 'auth.json')],
    login: 'run `codex login` once (or `printenv OPENAI_API_KEY | codex login --with-api-key`)',
  },
};

/** The CLI a command worker runs, if it is one tron knows. */
export function cliOf(settings: CommandSettings): CliLogin | undefined {
  return CLI_LOGINS[basename(settings.command[0] ?? '')];
}

const tilde = (file: string, homeDir: string) => (homeDir && file.startsWith(`${homeDir}/`) ? `~${file.slice(homeDir.length)}` : file);

/**
 * Why the worker cannot authenticate, or undefined when it can (or tron cannot tell).
 * `env` is tron's environment; the check looks at what the worker would be given.
 */
export function loginProblem(
  settings: CommandSettings,
  env: Readonly<Record<string, string | undefined>>,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  const cli = cliOf(settings);
  if (!cli) return undefined;
  const seen = minimalEnv(env, settings.env);
  if ([...cli.keys, ...cli.providers].some((name) => seen[name])) return undefined;
  if (cli.opaqueOn?.includes(platform)) return undefined;
  const files = cli.files(seen);
  if (files.some((file) => existsSync(file)) || cli.helper?.(seen)) return undefined;
  const withheld = cli.keys.filter((name) => env[name] && !seen[name]);
  const program = settings.command[0];
  const where = files.map((f) => tilde(f, seen.HOME ?? '')).join(' or ');
  const unpassed =
    withheld.length > 0 ? `; ${withheld.join(', ')} is set, but the worker's env list does not pass it on: add it to env` : '';
  return `${cli.name} ("${program}") cannot authenticate: none of ${cli.keys.join(', ')} reaches it, and there is no login at ${where}${unpassed}. Log in: ${cli.login}; or export ${cli.keys[0]}`;
}
