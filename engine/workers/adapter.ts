/**
 * One interface for every kind of worker (openai, command, sim). The engine hands an
 * adapter one turn at a time; the adapter returns the raw reply text or says why the
 * turn failed. It never interprets the reply: the `>>` gateway does that.
 */
import type { Clock } from '../os/clock.ts';
import type { FailureCause, WorkerRole } from '../core/roles.ts';

/** What one turn is for; prompts and liveness treat them differently. */
import type { TurnKind } from '../core/roles.ts';

export type { TurnKind } from '../core/roles.ts';

export interface TurnRequest {
  role: WorkerRole;
  block: string;
  /** TRON_SESSION: the same for every turn of one worker conversation. */
  session: string;
  /** TRON_TURN: 1, 2, … within the session. */
  turn: number;
  /** TRON_PHASE: the block's phase when the turn was issued. */
  phase: string;
  kind: TurnKind;
  /** The whole prompt (stdin for command workers, a user message for openai). */
  prompt: string;
  /** builder: its worktree; reviewer: detached checkout at the attested sha; architect: repo root. */
  cwd: string;
  /** The run directory (TRON_RUN_DIR), where adapters may persist session state. */
  runDir: string;
  /** Hard budget of the turn in ms, after which the adapter stops it and reports a timeout. */
  timeoutMs: number;
  /** Aborted when the engine stops the turn (overrun without life, shutdown). */
  signal: AbortSignal;
  /** Times the turn's budget and the adapter's own waits (the system's by default): the engine's clock. */
  clock?: Clock;
  /** The block's acceptance criteria, for adapters that answer without an LLM (sim). */
  criteria?: readonly string[];
  /** The trunk branch name (sim workers bring branches up to date with it). */
  trunk?: string;
  /** The repository root. */
  repo?: string;
  /** The words legal in this turn (what the gateway will accept). */
  expect?: readonly string[];
}

export type TurnFailure = 'exit' | 'timeout' | 'crash' | 'aborted' | 'step_cap' | 'api' | 'reply_too_large';

export type { FailureCause } from '../core/roles.ts';

export type TurnOutcome =
  | { ok: true; reply: string }
  | {
      ok: false;
      failure: TurnFailure;
      /** One line: what happened, and the worker's own last meaningful words about it. */
      detail: string;
      /** What the worker printed on stdout (the engine keeps a bounded tail). */
      output?: string;
      /** What it printed on stderr (its tail). */
      stderr?: string;
      /** The class of failure its words name, when they name one (a refused login, an unreachable endpoint). */
      cause?: FailureCause;
    };

/**
 * Usage of one model call (openai) or one turn (a CLI, per model), recorded as a
 * `usage.recorded` event. Prompt tokens are split into those read from a cache and the
 * rest, because providers price them differently.
 */
export interface Usage {
  model: string;
  /** Prompt tokens not read from a cache (cache writes included). */
  inputTokens: number;
  /** Prompt tokens read from a cache. */
  cachedTokens: number;
  outputTokens: number;
  /** What the worker says the tokens cost, in USD, when it says (Claude Code does). */
  costUsd?: number;
}

/** Which of a worker process's streams a chunk of live output came from. */
export type OutputStream = 'stdout' | 'stderr';

/**
 * Things an adapter reports while a turn runs. Process facts and usage become events;
 * live output and progress notes go to the turn's log file and the live board, not to
 * the event log (they are neither decisions nor inputs, and can be large).
 */
export interface TurnObserver {
  /** A worker process started; recovery kills it later by pid and start time if it outlives the run. */
  spawned(info: { pid: number; startTime: string }): void;
  /** That process ended. */
  exited(info: { pid: number; code: number | null; signal: string | null }): void;
  usage(usage: Usage): void;
  /** A transient API failure being retried after `delayMs`. */
  retry(info: { attempt: number; status?: number; delayMs: number; error: string }): void;
  /**
   * A sign of life from a worker with no process of its own (a model step and its tool
   * calls, a sim worker's actions), as one line a person can read.
   */
  progress?(note: string): void;
  /** A process worker's output, chunk by chunk as it arrives (stdout is also the reply). */
  output?(stream: OutputStream, chunk: Buffer): void;
}

export interface WorkerAdapter {
  readonly kind: 'openai' | 'command' | 'sim';
  runTurn(request: TurnRequest, observer: TurnObserver): Promise<TurnOutcome>;
  /** Process workers: the running turn of a session, for the liveness probe. */
  running?(session: string): { pid: number; startTime: string; outputBytes: number } | undefined;
  /**
   * Conversational workers: ask the running turn of a session, in-session between its
   * steps, whether it is still working. Its `>>WORKING` answer is reported through
   * `observer.progress`, and the turn goes on.
   */
  probe?(session: string, question: string): void;
}

/** An observer that drops everything: for tests and tools that do not record. */
export const silentObserver: TurnObserver = {
  spawned() {},
  exited() {},
  usage() {},
  retry() {},
};
