/**
 * The merge lane's state: its queue, the stack in flight and the one step it is at. Folded
 * by engine/core/lane/fold.ts, decided on by lane.ts, remote.ts and pr.ts beside it; which
 * inputs each step takes is the table in lane-steps.test.ts.
 */
import type { EventOf } from '../events.ts';

/** The merge lane: approved blocks queue, and the first `batch` of them become its one stack in flight (lane.ts). */
export interface Lane {
  /** The most blocks in one stack ([merge] batch). */
  batch: number;
  /** Check trunk again after each landing, off the lane's path ([merge] verify_trunk). */
  verifyTrunk: boolean;
  /** Wait, while the queue is short of a batch, for blocks past their build ([merge] gather). */
  gather: boolean;
  /** With gather: stack the blocks being challenged or reviewed too, tested while their turns run ([merge] speculate). */
  speculate: boolean;
  /** Approved blocks waiting to be stacked, in order. */
  queue: readonly string[];
  /** The stack in flight. */
  stack?: Stack;
  /** Stacks formed in this run (the last stack's number). */
  stacks: number;
  /** Checks of trunk still running. */
  verifying: number;
  /** A check of trunk came back red: the run cannot end with exit 0. */
  trunkRed: boolean;
  /** [remote]: a landing is a push, a transient failure of which is tried `retries` more times, `backoffMs` doubling. */
  remote?: { retries: number; backoffMs: number };
  /** [forge] land = "pr": a landing waits for the hosted checks on its sha (engine/core/lane/pr.ts). */
  pr?: { requireApproval: boolean; retries: number; backoffMs: number; queue?: boolean };
}

export interface Stack {
  id: number;
  /** Trunk, where it starts. */
  trunk: string;
  /** The blocks it was formed from, in order. */
  asked: readonly string[];
  /**
   * [merge] speculate: the blocks stacked before their approval, each at the sha stacked,
   * not yet approved (merge.queued takes one out). Set, even empty, on a speculative stack.
   */
  awaiting?: readonly { block: string; sha: string }[];
  /** The blocks that replayed onto it, each at its own commit (the top of its prefix), bottom first. */
  entries: readonly { block: string; sha: string }[];
  /** The longest prefix known green (0: trunk itself). */
  green: number;
  /** The shortest prefix known red, and its run: what the culprit is told. */
  red?: { n: number; run: EventOf<'candidate.tested'> };
  /** The one step the stack is in. */
  step: StackStep;
}

/** Where a stack is on its way to trunk: formed `rebasing`, `judging` between its effects, to `landing` by way of the forge in PR mode. */
export type StackStep =
  /** Its blocks replay onto trunk: lane.stacked → rebase.done. */
  | { at: 'rebasing' }
  /** Nothing of the stack runs: the lane decides (lane.ts settleStack). */
  | { at: 'judging' }
  /** A test run of `sha` is awaited: candidate.requested or bisect.step → candidate.tested. */
  | { at: 'testing'; sha: string }
  /** [forge] land = "pr": green here, the landing waits for the forge (lane/pr.ts). */
  | { at: 'forge'; pr: ForgeWait; running: boolean }
  /** land.intent → block.landed for every block of it; a push tried again ([remote]) stays here. */
  | {
      at: 'landing';
      blocks: readonly string[];
      /** Those whose block.landed came back. */
      landed: readonly string[];
      /** How the landing was tested (its land.intent's `tested`), for a push tried again. */
      tested: 'lane' | 'gate';
      /** [forge] merge = "queue": the commit the merge queue moved the remote's trunk to, for a push of the landed refs tried again. */
      queuedTop?: string;
      /** The ref transaction or the push runs, or the wait before the next try. */
      running: boolean;
    };

/** [forge] land = "pr": the landing that waits for the forge, and the waits so far (failures, checks never reported). */
export interface ForgeWait {
  sha: string;
  blocks: readonly { block: string; sha: string }[];
  tested: 'lane' | 'gate';
  failures: number;
  missing: number;
  /** [forge] merge = "queue": tron asked the forge to put the pull request in its merge queue. */
  queued?: boolean;
}

/** Whether an effect of the stack is out (its rebase, a test run, the forge asked, its landing, or a wait): the run does not end under it. */
export function stackRunning(stack: Stack): boolean {
  const step = stack.step;
  return step.at === 'rebasing' || step.at === 'testing' || ((step.at === 'forge' || step.at === 'landing') && step.running);
}
