/**
 * Can a CLI agent authenticate before tron gives it a turn? Each CLI tron knows
 * authenticates from a variable (its API key or token), from its own login kept in a file
 * under HOME, or from its own configuration; when none of them is there, every turn fails
 * the same way, so `tron start` stops before anything runs (TRON_WORKER_AUTH) and says how
 * to log in. tron reads what the CLI reads, and never refuses a configuration the CLI
 * accepts (verified against Claude Code 2.1 and Codex 0.171):
 * - Claude Code: `$CLAUDE_CONFIG_DIR/.credentials.json`, default `~/.claude/.credentials.json`
 *   (on macOS the login is in the Keychain instead, which tron does not read: there only
 *   the variables are checked, and a missing one is not an error); a third-party provider
 *   switch (Bedrock, Vertex, Foundry); a key helper or key in its settings or global state
 *   (engine/workers/claude-config.ts).
 * - Codex: `$CODEX_HOME/auth.json`, default `~/.codex/auth.json`, written by `codex login`,
 *   for OpenAI itself; a model provider of its own (`model_provider` in its config.toml,
 *   or `-c` in the argv) needs only what that provider's table names
 *   (engine/workers/codex-config.ts): its `env_key` variable, which the worker's env list
 *   must pass. tron never passes a variable because a file the worker can write names it:
 *   Codex's config lives in ~/.codex, which the sandbox lets the worker write, and a
 *   hostile turn could name any secret of tron's environment there for the next run.
 *
 * What counts is what the worker will see: a variable set in tron's environment but not
 * passed by the worker's `env` list does not reach the CLI.
 */
import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { CommandSettings } from '../project/worker-settings.ts';
import { minimalEnv } from './env.ts';
import { claudeConfiguredLogin, claudeDir } from './claude-config.ts';
import { codexDotEnv, codexHome, codexProvider } from './codex-config.ts';

type Env = Readonly<Record<string, string | undefined>>;

/** What a CLI's own configuration says of its login. */
export type Configured =
  /** It authenticates by it (or needs nothing): the worker is fine. */
  | { ok: true }
  /** It names something that is missing: the problem, said the CLI's way. */
  | { problem: string }
  /** It says nothing: the key variables and the login files decide. */
  | undefined;

/** What a CLI's check is given: the worker's argv and environment, tron's environment, where it runs. */
export interface LoginContext {
  settings: CommandSettings;
  /** The environment the worker will see. */
  seen: Readonly<Record<string, string>>;
  /** tron's environment. */
  env: Env;
  /** The repository: where its project settings are. */
  repo: string;
}

export interface CliLogin {
  /** The product, for messages. */
  name: string;
  /** Variables that authenticate the CLI by themselves. */
  keys: readonly string[];
  /** Switches to providers whose own credentials tron does not check. */
  providers: readonly string[];
  /** The login files the CLI reads, in the worker's environment. */
  files(env: Readonly<Record<string, string>>): string[];
  /** What the CLI's own configuration says, read before the keys and files. */
  configured?(ctx: LoginContext): Configured;
  /** How to log in. */
  login: string;
  /** Platforms where the login lives outside any file tron can read. */
  opaqueOn?: readonly NodeJS.Platform[];
}

const home = (env: Readonly<Record<string, string>>) => env.HOME ?? '';
const tilde = (file: string, homeDir: string) => (homeDir && file.startsWith(`${homeDir}/`) ? `~${file.slice(homeDir.length)}` : file);

const CLAUDE_KEYS = ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'CLAUDE_CODE_OAUTH_TOKEN'] as const;
const CLAUDE_PROVIDERS = ['CLAUDE_CODE_USE_BEDROCK', 'CLAUDE_CODE_USE_VERTEX', 'CLAUDE_CODE_USE_FOUNDRY'] as const;
const CODEX_KEYS = ['OPENAI_API_KEY', 'CODEX_API_KEY'] as const;

/** The CLIs tron knows, by program name. */
export const CLI_LOGINS: Record<string, CliLogin> = {
  claude: {
    name: 'Claude Code',
    keys: CLAUDE_KEYS,
    providers: CLAUDE_PROVIDERS,
    files: (env) => [join(claudeDir(env), '.credentials.json')],
    configured: ({ settings, seen, repo }) =>
      claudeConfiguredLogin(settings.command, seen, repo, [...CLAUDE_KEYS, ...CLAUDE_PROVIDERS]) ? { ok: true } : undefined,
    login: 'run `claude` and /login once (or `claude setup-token` and export CLAUDE_CODE_OAUTH_TOKEN)',
    opaqueOn: ['darwin'],
  },
  codex: {
    name: 'Codex',
    keys: CODEX_KEYS,
    providers: [],
    files: (env) => [join(codexHome(env), 'auth.json')],
    configured: (ctx) => {
      const provider = codexProvider(ctx.settings.command, ctx.seen);
      // A config Codex refuses itself: its own error says why on the first turn.
      if (!provider) return { ok: true };
      const dotEnv = codexDotEnv(ctx.seen);
      if (provider.kind === 'local') return { ok: true };
      // OpenAI itself: the key variables (also from $CODEX_HOME/.env) or `codex login`.
      if (provider.kind === 'openai') return CODEX_KEYS.some((k) => dotEnv[k]) ? { ok: true } : undefined;
      const key = provider.envKey;
      if (!key) return { ok: true };
      if (ctx.seen[key]?.trim() || dotEnv[key]?.trim()) return { ok: true };
      const head = `Codex ("${ctx.settings.command[0]}") uses the model provider "${provider.id}" (${tilde(provider.from, home(ctx.seen))}), whose env_key is ${key}`;
      const fail = 'every turn would fail with "Missing environment variable"';
      if (ctx.env[key]?.trim()) {
        return { problem: `${head}: ${key} is set, but the worker's env list does not pass it on, so ${fail}. Add "${key}" to env` };
      }
      const dotEnvFile = tilde(join(codexHome(ctx.seen), '.env'), home(ctx.seen));
      return {
        problem:
          `${head}, and ${key} is set neither in tron's environment nor in ${dotEnvFile}: ${fail}. ` +
          `Export ${key} and add "${key}" to env, or remove env_key from [model_providers.${provider.id}] if the server needs no key`,
      };
    },
    login: 'run `codex login` once (or `printenv OPENAI_API_KEY | codex login --with-api-key`)',
  },
};

/** The CLI a command worker runs, if it is one tron knows. */
export function cliOf(settings: CommandSettings): CliLogin | undefined {
  return CLI_LOGINS[basename(settings.command[0] ?? '')];
}

/**
 * Why the worker cannot authenticate, or undefined when it can (or tron cannot tell).
 * `env` is tron's environment; the check looks at what the worker would be given.
 * `repo` is where project settings are read (Claude Code's `.claude/settings.json`).
 */
export function loginProblem(
  settings: CommandSettings,
  env: Env,
  platform: NodeJS.Platform = process.platform,
  repo = '.',
): string | undefined {
  const cli = cliOf(settings);
  if (!cli) return undefined;
  const seen = minimalEnv(env, settings.env);
  const configured = cli.configured?.({ settings, seen, env, repo });
  if (configured) return 'problem' in configured ? configured.problem : undefined;
  if ([...cli.keys, ...cli.providers].some((name) => seen[name])) return undefined;
  if (cli.opaqueOn?.includes(platform)) return undefined;
  const files = cli.files(seen);
  if (files.some((file) => existsSync(file))) return undefined;
  const withheld = cli.keys.filter((name) => env[name] && !seen[name]);
  const program = settings.command[0];
  const where = files.map((f) => tilde(f, seen.HOME ?? '')).join(' or ');
  const unpassed =
    withheld.length > 0 ? `; ${withheld.join(', ')} is set, but the worker's env list does not pass it on: add it to env` : '';
  return `${cli.name} ("${program}") cannot authenticate: none of ${cli.keys.join(', ')} reaches it, and there is no login at ${where}${unpassed}. Log in: ${cli.login}; or export ${cli.keys[0]}`;
}
