/**
 * Workers see a minimal environment: the base below plus the variables their config
 * names. Nothing else of the engine's environment leaks into a worker.
 *
 * An `env` entry is a variable name (`ANTHROPIC_API_KEY`) or a pattern with `*` standing
 * for any run of characters (`ANTHROPIC_*`, `CLAUDE_CODE_*`), so a preset can pass
 * everything a CLI reads for its endpoint and auth in a few entries. A variable that is
 * not set stays unset. A pattern never matches the engine's own `TRON_*` variables: only
 * an entry that names one exactly passes it on.
 */
export const BASE_ENV = ['PATH', 'HOME', 'LANG', 'TERM'] as const;

import { MARKER_ENV } from '../os/marker.ts';

export { MARKER_ENV };
export { ENV_ENTRY } from '../project/worker-settings.ts';

/** The engine's own variables, which no pattern reaches. */
const ENGINE_PREFIX = 'TRON_';

/** Whether `name` is passed by `entry`: the same name, or a pattern it matches (never a TRON_* by pattern). */
export function envEntryMatches(entry: string, name: string): boolean {
  if (!entry.includes('*')) return entry === name;
  if (name.startsWith(ENGINE_PREFIX)) return false;
  return globRegExp(entry).test(name);
}

const compiled = new Map<string, RegExp>();

/** A `*` glob as an anchored regular expression; the other characters are literal. */
export function globRegExp(glob: string): RegExp {
  let re = compiled.get(glob);
  if (!re) {
    const body = glob
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*');
    re = new RegExp(`^${body}$`);
    compiled.set(glob, re);
  }
  return re;
}

/** The names in `source` that the entries pass through, in the order of `source`. */
export function passedNames(source: Readonly<Record<string, string | undefined>>, entries: readonly string[]): string[] {
  return Object.keys(source).filter((name) => source[name] !== undefined && entries.some((entry) => envEntryMatches(entry, name)));
}

/**
 * Variables no worker or test process is ever given, whatever its `env` list names: the
 * ssh agent's socket is the user's credential, for the engine's remote calls alone.
 */
export const NEVER_PASSED: ReadonlySet<string> = new Set(['SSH_AUTH_SOCK']);

/** The environment for a worker process: the base, the run's marker, the named or matched pass-throughs, then `extra`. */
export function minimalEnv(
  source: Readonly<Record<string, string | undefined>>,
  passThrough: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV, MARKER_ENV]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  for (const name of passedNames(source, passThrough)) if (!NEVER_PASSED.has(name)) env[name] = source[name]!;
  return { ...env, ...extra };
}
