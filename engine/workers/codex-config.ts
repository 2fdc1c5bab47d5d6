/**
 * Which model provider a Codex worker will talk to, read the way Codex reads it
 * (verified against Codex 0.171 run against a server on 127.0.0.1):
 *
 * - `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`): `model_provider` names the
 *   provider, default `openai`; `[model_providers.<id>]` defines one of your own, with
 *   `base_url`, `env_key` (the variable holding its key), `experimental_bearer_token`,
 *   an `auth` command;
 * - `-p`/`--profile NAME` in the argv layers `$CODEX_HOME/NAME.config.toml` on top;
 * - `-c`/`--config key=value` in the argv overrides one dotted key, the value read as TOML
 *   (a bare word when it is not TOML): `-c model_provider=fake`;
 * - `--oss` picks a local server (Ollama, LM Studio), which needs no key;
 * - `$CODEX_HOME/.env` holds variables Codex loads beside its environment.
 *
 * What Codex does with each (measured): `openai` (built in, cannot be redefined) needs
 * OPENAI_API_KEY, CODEX_API_KEY or `codex login`; `ollama` and `lmstudio` (built in) need
 * no key; a provider of your own with `env_key` fails every turn with "Missing environment
 * variable" when that variable is unset or empty, and without `env_key` it sends no key at
 * all (even with `requires_openai_auth`), which a local server accepts. A config Codex
 * itself refuses (bad TOML, an unknown provider) is left to Codex to say.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import TOML from '@iarna/toml';

type Env = Readonly<Record<string, string | undefined>>;
type Table = Record<string, unknown>;

/** The providers compiled into Codex; none can be redefined in config.toml. */
const BUILT_IN = { openai: 'openai', ollama: 'local', lmstudio: 'local' } as const;

/** The provider a Codex worker will use, and what it needs to authenticate. */
export type CodexProvider =
  /** OpenAI itself: an OpenAI key or `codex login`. */
  | { kind: 'openai'; from: string }
  /** A local server (`--oss`, `ollama`, `lmstudio`): no key. */
  | { kind: 'local'; id: string; from: string }
  /**
   * A provider of your own. `envKey`: the variable its key is read from (none: it sends
   * no key, or `token` says it has one of its own).
   */
  | { kind: 'custom'; id: string; from: string; envKey?: string; token: boolean };

/** Where Codex keeps its config and login, in the worker's environment. */
export function codexHome(env: Env): string {
  return env.CODEX_HOME || join(env.HOME ?? '', '.codex');
}

function readToml(file: string): Table | undefined | 'bad' {
  if (!existsSync(file)) return undefined;
  try {
    return TOML.parse(readFileSync(file, 'utf8')) as Table;
  } catch {
    return 'bad';
  }
}

const isTable = (v: unknown): v is Table => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `b` merged over `a`, tables key by key. */
function merge(a: Table, b: Table): Table {
  const out: Table = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = isTable(v) && isTable(out[k]) ? merge(out[k] as Table, v) : v;
  return out;
}

/** A `-c` value as Codex reads it: TOML when it parses, else the raw text. */
function configValue(text: string): unknown {
  try {
    return (TOML.parse(`v = ${text}`) as Table).v;
  } catch {
    return text;
  }
}

/** `key.path=value` set into a table. */
function override(config: Table, assignment: string): Table {
  const eq = assignment.indexOf('=');
  if (eq <= 0) return config;
  const path = assignment.slice(0, eq).trim().split('.');
  let value = configValue(assignment.slice(eq + 1).trim());
  for (const key of path.slice(1).reverse()) value = { [key]: value };
  return merge(config, { [path[0]!]: value });
}

/** The options Codex takes that choose its provider, from a worker's argv. */
export interface CodexArgs {
  overrides: string[];
  profile?: string;
  oss: boolean;
  localProvider?: string;
}

/** Reads `-c`/`--config`, `-p`/`--profile`, `--oss` and `--local-provider`, in their separate and joined forms. */
export function codexArgs(argv: readonly string[]): CodexArgs {
  const out: CodexArgs = { overrides: [], oss: false };
  for (let i = 1; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--') break;
    const value = (long: string, short?: string): string | undefined => {
      if (arg === long || arg === short) return argv[++i];
      if (arg.startsWith(`${long}=`)) return arg.slice(long.length + 1);
      if (short && arg.startsWith(short) && arg.length > short.length && !arg.startsWith('--'))
        return arg.slice(short.length).replace(/^=/, '');
      return undefined;
    };
    if (arg === '--oss') {
      out.oss = true;
      continue;
    }
    const config = value('--config', '-c');
    if (config !== undefined) {
      out.overrides.push(config);
      continue;
    }
    const profile = value('--profile', '-p');
    if (profile !== undefined) {
      out.profile = profile;
      continue;
    }
    const local = value('--local-provider');
    if (local !== undefined) out.localProvider = local;
  }
  return out;
}

/**
 * The provider a Codex worker run with `argv` and the environment `env` (what the worker
 * sees) will use, or undefined when Codex will refuse the config itself.
 */
export function codexProvider(argv: readonly string[], env: Env): CodexProvider | undefined {
  const home = codexHome(env);
  const args = codexArgs(argv);
  const base = readToml(join(home, 'config.toml'));
  if (base === 'bad') return undefined;
  let config: Table = base ?? {};
  let from = join(home, 'config.toml');
  if (args.profile) {
    const file = join(home, `${args.profile}.config.toml`);
    const layer = readToml(file);
    if (layer === 'bad') return undefined;
    if (layer) {
      config = merge(config, layer);
      if ('model_provider' in layer || 'model_providers' in layer) from = file;
    }
  }
  for (const assignment of args.overrides) {
    const before = config.model_provider;
    config = override(config, assignment);
    if (config.model_provider !== before) from = `-c ${assignment} in command`;
  }
  if (args.oss) return { kind: 'local', id: args.localProvider ?? 'oss', from: '--oss in command' };
  const id = typeof config.model_provider === 'string' ? config.model_provider : 'openai';
  if (id in BUILT_IN) {
    return BUILT_IN[id as keyof typeof BUILT_IN] === 'openai' ? { kind: 'openai', from } : { kind: 'local', id, from };
  }
  const providers = isTable(config.model_providers) ? config.model_providers : {};
  const table = providers[id];
  if (!isTable(table)) return undefined;
  const envKey = typeof table.env_key === 'string' && table.env_key ? table.env_key : undefined;
  const token = (typeof table.experimental_bearer_token === 'string' && table.experimental_bearer_token !== '') || isTable(table.auth);
  return { kind: 'custom', id, from, ...(envKey ? { envKey } : {}), token };
}

/** The variables in `$CODEX_HOME/.env`, which Codex loads beside its environment. */
export function codexDotEnv(env: Env): Record<string, string> {
  const file = join(codexHome(env), '.env');
  const vars: Record<string, string> = {};
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return vars;
  }
  for (const line of text.split('\n')) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!m) continue;
    const raw = m[2]!;
    const quoted = /^(['"])(.*)\1$/.exec(raw);
    vars[m[1]!] = quoted ? quoted[2]! : raw.replace(/\s+#.*$/, '');
  }
  return vars;
}
