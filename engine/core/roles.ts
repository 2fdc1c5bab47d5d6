/** Who may speak through the `>>` gateway. */
export const ROLES = ['builder', 'reviewer', 'architect', 'operator'] as const;
export type Role = (typeof ROLES)[number];

/** Roles that are run as workers (the operator is a human answering through `tron answer`). */
export const WORKER_ROLES = ['builder', 'reviewer', 'architect'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

/**
 * The kinds of worker turn, defined once: the event table, the fold, the adapters and
 * the prompts (one prompt file per kind) all take them from here.
 */
export const TURN_KINDS = ['build', 'challenge', 'review', 'merge', 'probe', 'restate', 'architect'] as const;
export type TurnKind = (typeof TURN_KINDS)[number];
/** The kinds a restate turn can restate: every kind but restate itself. */
export const RESTATABLE_KINDS = TURN_KINDS.filter((k): k is Exclude<TurnKind, 'restate'> => k !== 'restate');

/**
 * Why a worker turn failed, where the worker's own words say so: its login or key was
 * refused (`auth`), its endpoint could not be reached (`network`), or its account is out of
 * quota (`quota`). Two failures of one worker with the same cause in a row mean the worker
 * itself is unavailable, not the block (see `worker_unavailable` in engine/spine/spine.ts).
 */
export const FAILURE_CAUSES = ['auth', 'network', 'quota'] as const;
export type FailureCause = (typeof FAILURE_CAUSES)[number];
