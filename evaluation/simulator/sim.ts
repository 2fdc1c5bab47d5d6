/**
 * What the world's answers (answers.ts), the invariants (invariants.ts) and the reactions
 * (reactions.ts) see of a simulated run: its config, its git, the engine's state and log,
 * the effects in flight and the schedule's choices. run.ts's Sim is the one world that has
 * it; these files read it through this interface, so none of them imports run.ts back.
 */
import type { DecideContext } from '../../engine/core/decide/decide.ts';
import type { BlockInfo, EventBody, EventOf, TronEvent } from '../../engine/core/events.ts';
import type { EngineState } from '../../engine/core/state.ts';
import { loadSpine } from '../../engine/spine/load.ts';
import type { Chooser, Point, POINTS } from './choices.ts';
import type { Git } from './world.ts';

/** The decision step's context in every simulated run: the pass spine, a test command. */
export const CTX: DecideContext = { spine: loadSpine(), testCommand: 'npm test' };

export interface RunConfig {
  blocks: BlockInfo[];
  maxParallel: number;
  batch: number;
  verifyTrunk: boolean;
  gather: boolean;
  /** [merge] speculate: not drawn (a draw would shift every recorded schedule after it) — an even seed that gathers speculates. */
  speculate: boolean;
  architect: boolean;
  budgets: { block_usd?: number; run_usd?: number };
  teammates: boolean;
  /** Trunk lives on a remote ([remote]): a landing is a push, and teammates push there. */
  remote: boolean;
  /** [forge] land = "pr" (runs with a remote only): a landing waits for its pull request's hosted checks; `approval`: and a person's approving review. */
  pr?: { approval: boolean };
  /** The log and a job queue in a database, a leader and standbys, agents, another repository (cluster.ts): by the seed, not drawn. */
  cluster?: { standbys: number };
}

export type Item =
  | {
      kind: 'effect';
      seq: number;
      run: number;
      d: TronEvent;
      stage: number;
      paused: boolean;
      hang: number;
      silent: boolean;
      /** Its job on the queue, in a cluster run (cluster.ts): an agent claims it and reports its result. */
      job?: number;
      /** Carried out by a leader of this generation after its lease was taken (a planted bug: it should have stopped). */
      replaced?: number;
    }
  | { kind: 'answer'; block: string; word: 'RETRY' | 'ABANDON'; after: number }
  | { kind: 'aborted'; d: EventOf<'block.dispatched'> }
  /** The remote accepted a landing; local trunk and the landed refs are yet to follow (a crash here loses it). */
  | { kind: 'follow'; d: EventOf<'land.intent'>; found: boolean }
  /** The result of an attempt that no longer holds its job (a dead or cut-off agent's), arriving late (cluster.ts). */
  | { kind: 'late'; job: number; attempt: number; inputs: EventBody[] };

/** A simulated run, as the world's answers and the invariants see it. */
export interface SimWorld {
  readonly c: Chooser;
  readonly git: Git;
  readonly cfg: RunConfig;
  /** The coverage report, when one is kept: what the world's parts count there. */
  readonly cov: { fault(key: string): void } | undefined;
  state: EngineState;
  log: TronEvent[];
  items: Item[];
  step: number;
  runNo: number;
  ts: number;
  spend: { run: number; blocks: Map<string, number> };
  unanswered: Set<string>;
  landings: string[];
  approved: Map<string, string>;
  pick<P extends Point>(p: P): (typeof POINTS)[P][number][0];
  around(d: TronEvent): { before: EngineState; at: EngineState };
  turnItem(session: string, turn: number): Extract<Item, { kind: 'effect' }> | undefined;
  abort(which: (t: EventOf<'block.dispatched'>) => boolean): void;
}
