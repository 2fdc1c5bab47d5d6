/**
 * Workers see a minimal environment: the base below plus the variables their config
 * names. Nothing else of the engine's environment leaks into a worker.
 */
export const BASE_ENV = ['PATH', 'HOME', 'LANG', 'TERM'] as const;

/** The environment for a worker process: the base, the named pass-throughs, then `extra`. */
export function minimalEnv(
  source: Readonly<Record<string, string | undefined>>,
  passThrough: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV, ...passThrough]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}
