/**
 * What every effect is, and what it runs with. An effect is a job: its input is a
 * request — the decision event plus whatever it needs of the state *as it was when the
 * decision was made*, nothing but JSON — and it runs against an explicit context (the
 * repository, the config, the sandbox, the queues). Its outcome is input events. No
 * effect reads the engine's live state or a module global, so a job can be handed to
 * another process, or another host, unchanged.
 */
import type { Clock } from '../../os/clock.ts';
import type { DecisionType, EventBody, EventOf, TronEvent } from '../../core/events.ts';
import type { EngineState } from '../../core/state.ts';
import type { Config } from '../../project/config.ts';
import type { Block } from '../../project/register.ts';
import type { Spine } from '../../spine/spine.ts';
import type { WorkerAdapter } from '../../workers/adapter.ts';
import type { WorkerRole } from '../../core/roles.ts';
import type { Sandbox } from '../../workers/sandbox.ts';
import type { Remote } from '../../git/remote.ts';
import type { Forge } from '../../forge/forge.ts';
import type { EngineFiles } from './engine-files.ts';
import type { CheckoutPool } from './checkouts.ts';
import type { Queues } from './slots.ts';

export { Queues } from './slots.ts';
import type { TurnTable } from './turn-table.ts';
import type { RemoteSuites } from './suites.ts';

export interface EffectContext {
  repo: string;
  runDir: string;
  config: Config;
  spine: Spine;
  env: Record<string, string | undefined>;
  /** Where test runs are confined (workers get theirs from their adapter). */
  sandbox: Sandbox;
  clock: Clock;
  print: (line: string) => void;
  /** Appends a note event (process bookkeeping) to the run's log, now; the event as appended, where there is a log. */
  note: (body: EventBody) => TronEvent | undefined;
  /** Hands the engine an input that a running effect observed (usage, a timer that fired). */
  input: (body: EventBody) => void;
  /** The engine's own files as it loaded them, compared at every gate. */
  engineFiles?: EngineFiles;
  /** The gate's checkouts for test runs. */
  checkouts: CheckoutPool;
  queues: Queues;
  workers: Partial<Record<WorkerRole, WorkerAdapter>>;
  /** The turns running now: their controllers, timers and signs of life. */
  turns: TurnTable;
  /** Sees a worker's live output (and progress notes) as it arrives, after its turn log has it. */
  onOutput?: (at: { block: string; session: string; turn: number }, text: string) => void;
  /** [remote], opened at start: landings are pushed there first (effects/remote.ts). */
  remote?: Remote;
  /** [forge], opened at start: PR mode's pull requests and hosted checks (effects/pr.ts). */
  forge?: Forge;
  /** [cluster] jobs = "agents": test runs go to `tron agent`s (engine/queue/agent-tests.ts); else they run here. */
  suites?: RemoteSuites<EffectContext>;
  /** The turns `tron agent`s run for this engine (engine/queue/agent-turns.ts): probed there, not here. */
  agentTurns?: AgentTurnsPort;
  /**
   * A database and a remote, turns run here: each block's verified work is pushed to its
   * work ref (effects/work-ref.ts), where a standby in another clone finds it
   * (runtime/remote-recovery.ts restoreWork). With agents their builders push it already.
   */
  keepWork?: boolean;
}

/** A probe's job: the decision, and whose turn it was, in which phase, with which wait. */
export interface ProbeRequest {
  decision: EventOf<'worker.overran'>;
  role: WorkerRole;
  phase: string;
  probeWaitMs: number;
}

/** What the liveness effects need of the turns running on agents. */
export interface AgentTurnsPort {
  /** Whether this turn runs on an agent. */
  owns(session: string, turn: number): boolean;
  /** Probes it where it runs; the probe's input. */
  probe(r: ProbeRequest): Promise<EventBody>;
}

/** What the engine knew when it made a decision: the folded state, the log so far, the register. */
export interface Moment {
  state: EngineState;
  history: readonly TronEvent[];
  blocks: ReadonlyMap<string, Block>;
}

/** What an effect reports: nothing, one input, or several in order. */
export type Outcome = EventBody | EventBody[] | undefined;

/**
 * One kind of effect. `request` takes the decision and the moment it was made and
 * returns the job's whole input (JSON only); without it, the job's input is the decision
 * itself. `run` carries the job out.
 *
 * Which way a job can fail is part of its type. A job that reaches what a worker can
 * reach — its worktree and git dir, its branch, its folder, its process — has
 * `onFailure`: whatever goes wrong there is an input about that block (a failed fact, a
 * failed turn), decided like any other, and never ends the run. A job without it touches
 * only what the engine alone owns — its log, the repository's refs and object store, its
 * own checkouts, the disk — and its failure ends the run (`run.failed`); so does a failure
 * of those met inside a job that has `onFailure` (`engineFault`).
 */
export interface Effect<T extends DecisionType, R = EventOf<T>> {
  request?: (e: EventOf<T>, at: Moment) => R;
  run: (c: EffectContext, r: R) => Promise<Outcome> | Outcome;
  onFailure?: (r: R, error: Error) => Outcome;
  /**
   * Where it may run: `queue` — a worker turn or a test run, a job on the queue when the run
   * is logged in a database (the engine's own pool or agents, as `[cluster] jobs` says), else
   * in the engine's process; absent — always in the engine's process (it writes the engine's
   * own git, log or pages).
   */
  where?: 'queue';
}

/** Errors of the machine itself: a full or failing disk, no file handles left. */
const MACHINE_FAULTS = new Set(['ENOSPC', 'EIO', 'EROFS', 'EDQUOT', 'EMFILE', 'ENFILE']);

/**
 * Whether an error is a failure of what the engine alone owns, whichever job met it: the
 * run directory (its log, transcript, turn logs), a damaged object store, the disk. Such a
 * failure ends the run even inside a job that reaches a worker's state.
 */
export function engineFault(error: unknown, runDir: string): boolean {
  const e = error as { code?: unknown; path?: unknown; message?: unknown; name?: unknown } | undefined;
  if (typeof e?.code === 'string' && MACHINE_FAULTS.has(e.code)) return true;
  if (typeof e?.path === 'string' && (e.path === runDir || e.path.startsWith(`${runDir}/`))) return true;
  if (e?.name === 'RunDirGoneError' || e?.code === 'TRON_STORE_DAMAGED') return true;
  return typeof e?.message === 'string' && e.message.includes('TRON_STORE_DAMAGED');
}

/** One line of an error, for an event: git's own words, without a stack. */
export function errorLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).trim().split('\n').slice(0, 6).join(' ');
}

/** Declares an effect, inferring its request type. */
export function effect<T extends DecisionType, R = EventOf<T>>(def: Effect<T, R>): Effect<T, R> {
  return def;
}
