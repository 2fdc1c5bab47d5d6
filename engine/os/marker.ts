/**
 * The engine's marker of its run: a variable carried into every worker and test process
 * it starts, so that recovery kills a recorded process only when it is the run's own
 * (engine/os/proc.ts reads it from a process's environment).
 */
export const MARKER_ENV = 'TRON_RUN_MARKER';
