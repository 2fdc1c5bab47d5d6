/**
 * Workers see a minimal environment: the base below plus the variables their config
 * names. Nothing else of the engine's environment leaks into a worker.
 */
export const BASE_ENV = ['PATH', 'HOME', 'LANG', 'TERM'] as const;

/**
 * The engine's marker of its run (engine/runtime/proc.ts): carried into every worker and
 * test process, so that recovery kills a recorded process only when it is the run's own.
 */
export const MARKER_ENV = 'TRON_RUN_MARKER';

/** The environment for a worker process: the base, the run's marker, the named pass-throughs, then `extra`. */
export function minimalEnv(
  source: Readonly<Record<string, string | undefined>>,
  passThrough: readonly string[],
  extra: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV, MARKER_ENV, ...passThrough]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...extra };
}
