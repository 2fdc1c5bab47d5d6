/**
 * What a job is, as the engine, the queue's SQL and an agent all speak of it: its key (the
 * decision's line it was committed with), a claimed attempt's input, and the result a
 * finished attempt reports. Types only: every file of the queue reads them, and they read
 * nothing of the queue.
 */
import type { RunKey } from '../log/pg-log.ts';

/**
 * What a finished job reports: its inputs, or the error it met (the engine decides what that
 * means). `steps`: where an agent's time went, ms a step (fetch, worktree, turn, push) — read
 * by the bench (evaluation/bench-agents.ts), never by a decision. `work`: the sha a builder's
 * turn left on the block's work ref — a hint that spares the engine a fetch when it already
 * holds that commit, never a reason to believe anything (the gate reads what the engine holds).
 */
export type JobResult =
  | {
      ok: true;
      inputs: unknown[];
      steps?: Record<string, number>;
      work?: string;
      /** A turn's: the end of its output on the agent (at most turn-log.ts AGENT_OUTPUT_BYTES bytes of it). */
      output?: string;
      /** Where in the turn's file on the agent `output` starts (bytes): the engine adds what its output notes did not bring. */
      outputAt?: number;
      /** Who ran it: the claiming worker, as `tron_jobs` records it (filled in by the engine's read, never by the agent). */
      worker?: string;
      /** The attempt whose result it is, as `tron_jobs` records it (filled in by the engine's read, never by the agent). */
      attempt?: number;
    }
  | { ok: false; error: { message: string; code?: string; name?: string; path?: string } };

/** A claimed job: the attempt that now holds it and its whole input. */
export interface Claimed {
  attempt: number;
  kind: string;
  role: string;
  request: unknown;
}

/** The key graphile-worker's payload carries. */
export interface JobKey extends RunKey {
  seq: number;
}
