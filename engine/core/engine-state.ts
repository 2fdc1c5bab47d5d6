/**
 * The shape of the engine's state: what the run, each block and each role's worker hold,
 * and what workers spent. The fold that makes it is engine/core/state.ts (which re-exports
 * all of this); the merge lane's part is engine/core/lane/stack.ts.
 */
import type { BlockInfo, EventOf } from './events.ts';
import type { BlockIndex } from './block-index.ts';
import type { SortedMap } from './sorted-map.ts';
import type { TrunkHistory } from './trunk-history.ts';
import type { FailureCause } from './roles.ts';
import type { PendingTurn, Waiting } from './waiting.ts';
import type { Handler, Trouble } from '../spine/spine.ts';
import type { Lane } from './lane/stack.ts';

/**
 * What workers spent, folded from `usage.recorded`: per block and per run, so budgets
 * compare against the same sums the report prints.
 */
export interface Spend {
  /** Every token: input, cached and output. */
  tokens: number;
  /** USD of the usage whose cost is known. */
  usd: number;
  /** Tokens of usage with no known cost (no reported cost, no [prices] row). */
  unpricedTokens: number;
}

export function noSpend(): Spend {
  return { tokens: 0, usd: 0, unpricedTokens: 0 };
}

/** The spend after one more usage record. */
export function addSpend(
  spend: Spend,
  u: { input_tokens: number; cached_tokens: number; output_tokens: number; cost_usd?: number },
): Spend {
  const tokens = u.input_tokens + u.cached_tokens + u.output_tokens;
  return {
    tokens: spend.tokens + tokens,
    usd: spend.usd + (u.cost_usd ?? 0),
    unpricedTokens: spend.unpricedTokens + (u.cost_usd === undefined ? tokens : 0),
  };
}

/** How a role's worker has been failing, from reply.received; and whether its turns are held. */
export interface WorkerHealth {
  /** The cause of its last failed turns in a row (those whose worker named one), and how many. */
  cause?: FailureCause;
  streak: number;
  /** Set by worker.unavailable: the blocks paged about it; cleared when the operator answers one. */
  held?: { cause: FailureCause; blocks: string[] };
}

export interface BlockState {
  id: string;
  info: BlockInfo;
  /** A phase of the spine, or 'pending' before its first dispatch. */
  phase: string;
  waiting: Waiting;
  /** 1 for the first dispatch; a RETRY starts a new attempt from trunk. */
  attempt: number;
  /** Gate failures / review rounds / merge re-checks in the current attempt. */
  rounds: Record<'build' | 'review' | 'merge', number>;
  /** Turn counters per session. */
  turns: Record<string, number>;
  base?: string;
  /** The last sha the truth gate passed. */
  attested?: string;
  /** The last sha the gate itself found green — setup and tests in a clean checkout of exactly it (not a rebased one sent to review). */
  greenAt?: string;
  /** The sha whose facts passed, awaiting the builder's evidence. */
  challenged?: string;
  /** Trunk as the engine left it when the last facts were requested. */
  factsTrunk?: string;
  /** The engine's last observation of the branch (facts.observed). */
  observed?: EventOf<'facts.observed'>;
  /** The shared git directory's config, hooks and info files when the attempt's worktree was made. */
  gitFiles?: Record<string, string>;
  /** The sha (and its patch id) the reviewer last asked changes for: a DONE must bring something else. */
  rejected?: { sha: string; patchId?: string };
  /** Liveness of the current turn chain: extensions granted and re-issues used. */
  live: { extensions: number; reissues: number };
  /** The last turn dispatched, kept after its reply so a restate can continue it. */
  lastTurn?: PendingTurn;
  /** Patch id of the attested sha over its base, to see whether a rebase changed it. */
  patchId?: string;
  /** The block's last replay in the merge lane (rebase.done): the paths of a conflict, or the rebased commit and its patch id. */
  rebased?: { sha?: string; patch?: string; files?: string[] };
  /** What the next build prompt tells the builder: failed facts or review notes. */
  feedback: string;
  /** Guidance from an architect or operator RETRY. */
  guidance: string;
  /** Architect consultations so far for this block. */
  architectCalls: number;
  /** The trouble being handled, if the block is in the exception spine. */
  trouble?: { trouble: Trouble; detail: string; handlers: Handler[] };
  summary?: string;
  landedSha?: string;
  reason?: string;
  orphans: string[];
  /** written_at of the last operator answer acted on: an answer written no later is stale. */
  answeredAt?: number;
  /** ts of the last phase change, for ages in status. */
  since: number;
  /** What its workers spent, over every attempt of this run. */
  spend: Spend;
  /** Its spend when its budget stretch began (0, or when the operator last answered it): budgets count from here. */
  budgetFrom: Spend;
}

export interface EngineState {
  run?: string;
  trunk: string;
  /** Where the engine last left trunk; anything else is a touch by someone else. */
  trunkSha?: string;
  /** Every sha the engine has put trunk at in this run (the start sha, then each landing). */
  trunkHistory: TrunkHistory;
  mainStatus: string;
  maxParallel: number;
  architect: boolean;
  liveness: { probeWaitMs: number; extensionMs: number; maxExtensions: number; reissues: number };
  watch: boolean;
  /** Every block of the register, by id. */
  blocks: SortedMap<string, BlockState>;
  /** Block ids in register order. */
  order: readonly string[];
  /** The merge lane: its queue, the stack in flight, the checks of trunk. */
  lane: Lane;
  /** Set when trunk was moved by someone else: no merges until the operator answers. */
  trunkHalt?: { sha: string; block: string };
  /** Blocks whose operator page was decided and not yet sent. */
  pagesPending: readonly string[];
  /** Boot recovery is over: before that, nothing is dispatched and an empty run is not a finished one. */
  registered: boolean;
  /** A signal asked the engine to stop: nothing new starts. */
  stopping?: string;
  finished: boolean;
  lastTs: number;
  /** What scheduling asks of the blocks after every input, kept up to date by the fold. */
  index: BlockIndex;
  /** What every worker spent in this run. */
  spend: Spend;
  /** The [budgets] in force, from run.started. */
  budgets: { blockUsd?: number; blockTokens?: number; runUsd?: number };
  /** Each role's worker: its failure streak, and whether its turns are held. */
  workers: Partial<Record<PendingTurn['role'], WorkerHealth>>;
  /** Blocks holding a turn for an unavailable worker (turn.held), so releasing them never scans the register. */
  heldTurns: readonly string[];
}
