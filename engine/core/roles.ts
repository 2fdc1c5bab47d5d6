/** Who may speak through the `>>` gateway. */
export const ROLES = ['builder', 'reviewer', 'architect', 'operator'] as const;
export type Role = (typeof ROLES)[number];

/** Roles that are run as workers (the operator is a human answering through `tron answer`). */
export const WORKER_ROLES = ['builder', 'reviewer', 'architect'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];
