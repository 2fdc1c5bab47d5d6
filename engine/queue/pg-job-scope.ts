/**
 * **A job runs only where it belongs, and only its holder speaks for it** (issue 37;
 * docs/cluster.md, "Roles"): every pool registers and carries its token in every call,
 * every job names who may claim it — version 10 of the schema
 * (engine/schema/migrations/0010-scope.ts) says how, in SQL. Here: the code a refused
 * caller gets, the functions an agent's role is granted, and a caller's name and token.
 */

/** The SQLSTATE of a caller refused by the queue: not the registered worker, or the job is not its to serve. */
export const NOT_YOURS = 'TRN03';

/** The queue's functions a pool calls, with their argument types: what agentGrants grants. */
export const SCOPED_FUNCTIONS = [
  'tron_register(text, text, text, text[], integer, interval, boolean)',
  'tron_heartbeat(text, text, text[])',
  'tron_reap(text, text)',
  'tron_claim(text, text, text, text, integer)',
  'tron_complete(text, text, text, text, integer, integer, jsonb)',
  'tron_near_elsewhere(text, text)',
  'tron_asks(text, text)',
  'tron_answer(text, text, text, text, integer, integer, bigint, jsonb)',
  'tron_note(text, text, text, text, integer, integer, jsonb)',
  'tron_lost(text, text, text[], text[], integer[], integer[])',
] as const;

/**
 * What a pool is to the queue: its registered name and the token its registration gave it.
 * Every call of a pool, or of an agent for the attempts its pool claimed, carries both.
 */
export interface Caller {
  worker: string;
  token: string;
}
