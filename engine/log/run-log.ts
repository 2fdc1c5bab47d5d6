/**
 * What the engine loop needs of a run's log, whichever keeps it: the file
 * (`events.jsonl`, engine/log/eventlog.ts — the default) or the database's table
 * (engine/log/pg-log.ts, with `[cluster] database`). Both write the same signed lines, and
 * both keep the engine's one promise: an effect starts only after the line announcing it
 * is durable (`sync`).
 */
import type { EventBody, TronEvent } from '../core/events.ts';

/** A job as the log's flush writes it beside its decision's line. */
export interface QueuedJob {
  kind: string;
  role: string;
  request: unknown;
  /** The pool that alone may claim it (the engine's own, `[cluster] jobs = "here"`); none: the agents of its repository with its role. */
  pool?: string;
}

export interface RunLog {
  /** Everything appended so far, in order. */
  readonly events: readonly TronEvent[];
  /** With group commit, `append` only writes (or queues) the line, and `sync` makes every line so far durable. */
  groupCommit: boolean;
  /** Stamps, validates (and signs) one event; returns it exactly as a reader will see it. */
  append(body: EventBody): TronEvent;
  /** Every line appended so far is durable once this resolves; a failure breaks the log. */
  sync(): Promise<void>;
  /** Runs `then` once every line appended so far is durable: at once for the file, after the commit for the database. */
  whenDurable(then: () => void): void;
  /** The database's log only: the job line `seq` asks for, committed with the line (linesStatement in engine/log/pg-log.ts). */
  enqueue?(seq: number, job: QueuedJob): void;
  /** Makes the rest durable and lets the run go (the writer lock, the lease). */
  close(): void | Promise<void>;
}
