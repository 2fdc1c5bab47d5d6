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
