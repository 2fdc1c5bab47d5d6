/**
 * The engine's state is the fold of its events: `apply(state, event)` for every line of
 * the log, in order. Nothing else feeds it, so resuming a run and replaying one start
 * from the same place as the live run did.
 *
 * Every state is persistent: `apply` returns a new state and never changes the one it was
 * given, which stays valid for whoever holds it (the engine's running effects, replay,
 * tests). One event costs what it touches — a shallow copy of the top level, the block it
 * is about, O(log n) nodes of the maps, and the indices that block's change moves — not a
 * copy of the run (docs/contributing.md, "Performance has a shape"; `npm run bench` shows the curve).
 */
import type { BlockInfo, EventOf, EventType, TronEvent } from './events.ts';
import { type BlockIndex, indexBlocks, reindex } from './block-index.ts';
import { byString, SortedMap } from './sorted-map.ts';
import { TrunkHistory } from './trunk-history.ts';

export { ACTIVE_PHASES, type BlockIndex, inFlight, TERMINAL } from './block-index.ts';
export { TrunkHistory } from './trunk-history.ts';

import type { FailureCause } from './roles.ts';
import type { PendingTurn, Waiting } from './waiting.ts';

export type { PendingTurn, Waiting } from './waiting.ts';
import type { Handler, Trouble } from '../spine/spine.ts';

export type { TurnKind } from './roles.ts';

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

/**
 * The merge lane. Approved blocks queue; when the lane is free the first `batch` of them
 * become a stack on trunk, which is rebased, tested at its top (bisected when red) and
 * landed in one ref transaction. One stack at a time.
 */
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
  /** The one step the stack is in; which inputs each step takes is the table in core/lane/lane-steps.test.ts. */
  step: StackStep;
}

/**
 * Where a stack is on its way to trunk. A stack is formed `rebasing`; then it is `judging`
 * between its effects (the lane decides: test, bisect, land, or give up — or waits for the
 * verdicts of blocks stacked before them), `testing` while a test run of a sha is awaited,
 * on to the `forge` in PR mode, and `landing` until every block of the landing is on trunk.
 */
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

export function initialState(): EngineState {
  const blocks = SortedMap.empty<string, BlockState>(byString);
  return {
    trunk: 'main',
    trunkHistory: TrunkHistory.empty(),
    mainStatus: '',
    maxParallel: 1,
    architect: false,
    liveness: { probeWaitMs: 30_000, extensionMs: 600_000, maxExtensions: 3, reissues: 1 },
    watch: false,
    blocks,
    order: [],
    lane: { batch: 8, verifyTrunk: false, gather: false, speculate: false, queue: [], stacks: 0, verifying: 0, trunkRed: false },
    pagesPending: [],
    registered: false,
    finished: false,
    lastTs: 0,
    index: indexBlocks(blocks, []),
    spend: noSpend(),
    budgets: {},
    workers: {},
    heldTurns: [],
  };
}

function newBlock(info: BlockInfo, ts: number): BlockState {
  return {
    id: info.id,
    info,
    phase: 'pending',
    waiting: { on: 'slot' },
    attempt: 0,
    rounds: { build: 0, review: 0, merge: 0 },
    turns: {},
    feedback: '',
    guidance: '',
    architectCalls: 0,
    live: { extensions: 0, reissues: 0 },
    orphans: [],
    since: ts,
    spend: noSpend(),
    budgetFrom: noSpend(),
  };
}

/** Changes the block `id`, if there is one, by the fields `change` returns, and moves the index with it. */
function patch(s: EngineState, id: string, change: (b: BlockState) => Partial<BlockState>): void {
  const was = s.blocks.get(id);
  if (!was) return;
  const b = { ...was, ...change(was) };
  s.blocks = s.blocks.set(id, b);
  s.index = reindex(s.index, s.blocks, was, b);
}

/** The stack `id`, if it is the one in flight, now at `step`. */
function stackAt(s: EngineState, id: number, step: (now: Stack) => StackStep | undefined): void {
  const stack = s.lane.stack;
  if (stack?.id !== id) return;
  const next = step(stack);
  if (next) s.lane = { ...s.lane, stack: { ...stack, step: next } };
}

/** The effect of stack `id` at step `at` (the forge's, or the landing's) out (`running`) or back; at any other step, nothing. */
function running(s: EngineState, id: number, at: 'forge' | 'landing', on: boolean): void {
  stackAt(s, id, (now) => (now.step.at === at ? { ...now.step, running: on } : undefined));
}

function leaveQueue(s: EngineState, id: string): void {
  if (s.lane.queue.includes(id)) s.lane = { ...s.lane, queue: s.lane.queue.filter((x) => x !== id) };
}

// ---- the fold ----

/**
 * How one event type changes the state. `s` is a fresh shallow copy that the reducer owns:
 * it assigns `s`'s fields (blocks through `patch`) and never changes what they point to,
 * which earlier states share.
 */
type Reducer<T extends EventType> = (s: EngineState, e: EventOf<T>) => void;

const nothing = (): void => {};
const waitFor =
  (waiting: Waiting) =>
  (s: EngineState, e: { block: string }): void =>
    patch(s, e.block, () => ({ waiting }));
const NOTHING: Waiting = { on: 'nothing' };

/** Trunk moved to `sha` by a fetch of the remote's (someone else's push, which the engine took in). */
function followTrunk(s: EngineState, sha: string): void {
  if (s.trunkSha === sha) return;
  s.trunkSha = sha;
  s.trunkHistory = s.trunkHistory.push(sha);
}

const reducers = {
  'run.started': (s, e) => {
    s.run = e.run;
    s.trunk = e.trunk;
    s.trunkSha = e.trunk_sha;
    s.trunkHistory = TrunkHistory.empty().push(e.trunk_sha);
    s.mainStatus = e.main_status;
    s.maxParallel = e.max_parallel;
    s.architect = e.architect;
    s.liveness = {
      probeWaitMs: e.liveness.probe_wait_ms,
      extensionMs: e.liveness.extension_ms,
      maxExtensions: e.liveness.max_extensions,
      reissues: e.liveness.reissues,
    };
    s.watch = e.watch;
    s.finished = false;
    const b = e.budgets ?? {};
    s.budgets = {
      ...(b.block_usd !== undefined && { blockUsd: b.block_usd }),
      ...(b.block_tokens !== undefined && { blockTokens: b.block_tokens }),
      ...(b.run_usd !== undefined && { runUsd: b.run_usd }),
    };
    s.lane = {
      ...s.lane,
      batch: e.merge?.batch ?? 8,
      verifyTrunk: e.merge?.verify_trunk ?? false,
      gather: e.merge?.gather ?? false,
      speculate: e.merge?.speculate ?? false,
    };
    if (e.remote) s.lane = { ...s.lane, remote: { retries: e.remote.retries, backoffMs: e.remote.backoff_ms } };
    // PR mode: one block per stack, so each pull request's hosted checks run on the very sha that lands.
    if (e.forge?.land === 'pr')
      s.lane = {
        ...s.lane,
        batch: 1,
        pr: {
          requireApproval: e.forge.require_human_approval,
          retries: e.forge.retries,
          backoffMs: e.forge.backoff_ms,
          ...(e.forge.merge === 'queue' && { queue: true }),
        },
      };
  },
  'register.loaded': (s, e) => {
    let blocks = s.blocks;
    const added: string[] = [];
    for (const info of e.blocks) {
      const known = blocks.get(info.id);
      if (known) blocks = blocks.set(info.id, { ...known, info });
      else {
        blocks = blocks.set(info.id, newBlock(info, e.ts));
        added.push(info.id);
      }
    }
    s.blocks = blocks;
    if (added.length > 0) s.order = [...s.order, ...added];
    // The event lists every block: recomputing the index is in proportion to it.
    s.index = indexBlocks(s.blocks, s.order);
  },
  // An effect failed: decide ends the run with run.finished, which is what folds.
  'run.failed': () => {},
  'run.finished': (s) => {
    s.finished = true;
  },
  'block.recovered': (s, e) => {
    if (!s.blocks.has(e.block)) return;
    patch(s, e.block, (b) => ({
      phase: e.phase,
      attempt: e.attempt,
      turns: { ...e.turns },
      architectCalls: e.architect_calls,
      rounds: { ...e.rounds },
      base: e.base,
      patchId: e.patch_id,
      landedSha: e.phase === 'landed' || e.phase === 'wrap' ? e.sha : b.landedSha,
      attested: e.phase !== 'landed' ? e.sha : b.attested,
      reason: e.reason,
      summary: e.summary,
      trouble: e.trouble ? { trouble: e.trouble, detail: e.reason ?? '', handlers: ['operator'] } : undefined,
      answeredAt: e.answered_at ?? b.answeredAt,
      waiting: e.phase === 'parked' ? { on: 'operator' } : e.phase === 'pending' ? { on: 'slot' } : NOTHING,
      since: e.since ?? e.ts,
    }));
    // A trunk touched in an earlier run still halts merges until the operator answers.
    // (Not one the operator already answered: that halt was lifted, and other blocks parked for the same touch never held it.)
    // A remote that refused tron halts merges the same way.
    if (
      e.phase === 'parked' &&
      (e.trouble === 'trunk_touched' || e.trouble === 'remote_refused') &&
      e.halts !== false &&
      s.trunkHalt === undefined
    ) {
      s.trunkHalt = { sha: '', block: e.block };
    }
  },
  'recovery.started': nothing,
  'recovery.finished': (s) => {
    s.registered = true;
  },
  'worker.killed': nothing,
  'lock.cleared': nothing,
  'inbox.consumed': nothing,
  'inbox.refused': nothing,
  'log.foreign': nothing,
  'landed.untrusted': nothing,
  'worker.spared': nothing,
  'run.stopping': (s, e) => {
    s.stopping = e.signal;
  },
  'worktree.requested': (s, e) =>
    patch(s, e.block, (b) => ({
      attempt: e.attempt,
      rounds: { build: 0, review: 0, merge: 0 },
      attested: undefined,
      greenAt: undefined,
      challenged: undefined,
      patchId: undefined,
      rebased: undefined,
      base: undefined,
      gitFiles: undefined,
      rejected: undefined,
      waiting: { on: 'worktree' },
      phase: b.phase === 'pending' || b.phase === 'parked' ? 'build' : b.phase,
      since: e.ts,
      // A new attempt: the reason it was parked is history now.
      reason: undefined,
    })),
  'worktree.ready': (s, e) =>
    patch(s, e.block, (b) => ({
      base: e.base,
      orphans: e.orphan ? [...b.orphans, e.orphan] : b.orphans,
      gitFiles: e.git_files,
      waiting: NOTHING,
    })),
  // No worktree: the block waits for nothing until its escalation parks it for the operator.
  'worktree.failed': (s, e) => patch(s, e.block, () => ({ waiting: NOTHING })),
  'block.dispatched': (s, e) => {
    if (s.heldTurns.includes(e.block)) s.heldTurns = s.heldTurns.filter((id) => id !== e.block);
    patch(s, e.block, (b) => {
      const turn: PendingTurn = {
        role: e.role as PendingTurn['role'],
        session: e.session,
        turn: e.turn,
        kind: e.kind,
        phase: e.phase,
        expect: e.expect,
        restating: e.restating,
      };
      return {
        // A re-issued turn keeps the count of re-issues of its chain; any other turn starts afresh.
        live: { extensions: 0, reissues: b.waiting.on === 'reissue' ? b.live.reissues : 0 },
        turns: { ...b.turns, [e.session]: e.turn },
        challenged: e.kind === 'challenge' ? e.sha : b.challenged,
        // A review is of the sha it is pinned to: after the lane's rebase changed the patch, the rebased one.
        ...(e.kind === 'review' && e.sha ? { attested: e.sha, patchId: b.rebased?.sha === e.sha ? b.rebased.patch : b.patchId } : {}),
        // Each merge turn is a round of the merge phase's budget (a re-issue of one is the same round).
        rounds: e.kind === 'merge' && b.waiting.on !== 'reissue' ? { ...b.rounds, merge: b.rounds.merge + 1 } : b.rounds,
        lastTurn: turn,
        waiting: { on: 'turn', turn },
        architectCalls: b.architectCalls + (e.kind === 'architect' ? 1 : 0),
      };
    });
  },
  // The pending turn stays recorded until the decision about the reply is applied. What
  // changes is the worker's health: a failure with a named cause extends or starts a
  // streak; a reply, or a failure with no cause, ends it; a turn the engine stopped says nothing.
  'reply.received': (s, e) => {
    if (e.role === 'operator' || (!e.ok && e.failure === 'aborted')) return;
    const was = s.workers[e.role] ?? { streak: 0 };
    const streak = !e.ok && e.cause ? (was.cause === e.cause ? was.streak + 1 : 1) : 0;
    s.workers = {
      ...s.workers,
      [e.role]: { ...(!e.ok && e.cause ? { cause: e.cause } : {}), streak, ...(was.held ? { held: was.held } : {}) },
    };
  },
  'worker.unavailable': (s, e) => {
    const was = s.workers[e.role] ?? { streak: 0 };
    const blocks = was.held ? [...was.held.blocks, e.block] : [e.block];
    s.workers = { ...s.workers, [e.role]: { ...was, held: { cause: e.cause, blocks } } };
  },
  'turn.held': (s, e) => {
    if (!s.blocks.has(e.block)) return;
    const { type: _t, v: _v, seq: _s, ts: _ts, ...held } = e;
    patch(s, e.block, () => ({ waiting: { on: 'worker', held } }));
    if (!s.heldTurns.includes(e.block)) s.heldTurns = [...s.heldTurns, e.block];
  },
  'budget.exceeded': (s, e) => {
    // The run's budget is spent: nothing new starts, and the run ends once nothing is in flight.
    if (e.scope === 'run') s.stopping ??= 'budget';
  },
  'usage.recorded': (s, e) => {
    s.spend = addSpend(s.spend, e);
    patch(s, e.block, (b) => ({ spend: addSpend(b.spend, e) }));
  },
  'reply.accepted': (s, e) =>
    patch(s, e.block, (b) => ({
      waiting: NOTHING,
      ...(e.word === 'CHANGES'
        ? {
            feedback: `The reviewer asked for changes:\n${String(e.payload.notes)}`,
            ...(b.attested ? { rejected: { sha: b.attested, ...(b.patchId !== undefined ? { patchId: b.patchId } : {}) } } : {}),
          }
        : {}),
      ...(e.word === 'RETRY' ? { guidance: String(e.payload.guidance), trouble: undefined } : {}),
      ...(e.word === 'DONE' || e.word === 'MERGED'
        ? { summary: typeof e.payload.summary === 'string' ? e.payload.summary : b.summary }
        : {}),
    })),
  'reply.refused': waitFor(NOTHING),
  'facts.requested': (s, e) => patch(s, e.block, () => ({ waiting: { on: 'facts', purpose: e.purpose }, factsTrunk: e.trunk_sha })),
  'facts.observed': (s, e) => patch(s, e.block, () => ({ waiting: NOTHING, observed: e })),
  'gate.passed': (s, e) =>
    patch(s, e.block, (b) => ({
      attested: e.sha,
      greenAt: e.sha,
      patchId: b.observed?.head === e.sha ? b.observed.patch_id : b.patchId,
      challenged: undefined,
      feedback: '',
    })),
  'gate.failed': (s, e) =>
    patch(s, e.block, (b) => ({
      challenged: undefined,
      feedback: e.facts
        .filter((f) => !f.ok)
        .map((f) => `- ${f.name}: ${f.evidence}`)
        .join('\n'),
      // A failed re-check after MERGED is that merge turn's round, counted when it was dispatched.
      rounds: e.purpose === 'merge' ? b.rounds : { ...b.rounds, build: b.rounds.build + 1 },
    })),
  'block.phase': (s, e) =>
    patch(s, e.block, (b) => ({
      phase: e.to,
      since: e.ts,
      reason: undefined,
      rounds: e.from === 'review' && e.to === 'build' ? { ...b.rounds, review: b.rounds.review + 1 } : b.rounds,
    })),
  'merge.queued': (s, e) => {
    const b = s.blocks.get(e.block);
    if (!b) return;
    // Approved at the sha its stack holds: it joins the stack, which may now land.
    const stack = s.lane.stack;
    if (stack?.awaiting?.some((a) => a.block === e.block && a.sha === b.attested)) {
      s.lane = { ...s.lane, stack: { ...stack, awaiting: stack.awaiting.filter((a) => a.block !== e.block) } };
      patch(s, e.block, () => ({ waiting: { on: 'stack' } }));
      return;
    }
    patch(s, e.block, () => ({ waiting: { on: 'lane' } }));
    if (!s.lane.queue.includes(e.block)) s.lane = { ...s.lane, queue: [...s.lane.queue, e.block] };
  },
  'lane.stacked': (s, e) => {
    const ids = e.blocks.map((b) => b.block);
    const awaiting = e.awaiting && e.blocks.filter((b) => e.awaiting!.includes(b.block)).map((b) => ({ block: b.block, sha: b.sha }));
    s.lane = {
      ...s.lane,
      stacks: e.stack,
      queue: s.lane.queue.filter((id) => !ids.includes(id)),
      stack: {
        id: e.stack,
        trunk: e.trunk_sha,
        asked: ids,
        ...(awaiting && { awaiting }),
        entries: [],
        green: 0,
        step: { at: 'rebasing' },
      },
    };
    // A block awaiting its verdict goes on with its turn; it waits on the stack once approved.
    for (const id of ids) if (!e.awaiting?.includes(id)) patch(s, id, () => ({ waiting: { on: 'stack' } }));
  },
  'rebase.done': (s, e) => {
    const stack = s.lane.stack;
    if (stack?.id !== e.stack || stack.step.at !== 'rebasing') return;
    const entries = e.results.flatMap((r) =>
      r.sha && (r.outcome === 'fast_forward' || r.outcome === 'clean') ? [{ block: r.block, sha: r.sha }] : [],
    );
    s.lane = { ...s.lane, stack: { ...stack, entries, step: { at: 'judging' } } };
    for (const r of e.results) {
      patch(s, r.block, () => ({
        rebased: {
          ...(r.sha ? { sha: r.sha } : {}),
          ...(r.patch_after ? { patch: r.patch_after } : {}),
          ...(r.files ? { files: r.files } : {}),
        },
      }));
    }
  },
  'candidate.requested': (s, e) => stackAt(s, e.stack, () => ({ at: 'testing', sha: e.sha })),
  'bisect.step': (s, e) => stackAt(s, e.stack, () => ({ at: 'testing', sha: e.sha })),
  'candidate.tested': (s, e) => {
    const stack = s.lane.stack;
    // Only the run the stack awaits counts.
    if (stack?.id !== e.stack || stack.step.at !== 'testing' || stack.step.sha !== e.sha) return;
    const n = e.blocks.length;
    const red = !e.ok && (stack.red === undefined || n < stack.red.n) ? { n, run: e } : stack.red;
    s.lane = {
      ...s.lane,
      stack: {
        ...stack,
        step: { at: 'judging' },
        green: e.ok ? Math.max(stack.green, n) : stack.green,
        ...(red ? { red } : {}),
      },
    };
  },
  'land.intent': (s, e) =>
    stackAt(s, e.stack, (now) => ({
      at: 'landing',
      blocks: e.blocks.map((b) => b.block),
      landed: now.step.at === 'landing' ? now.step.landed : [],
      tested: e.tested,
      ...(e.queued && { queuedTop: e.sha }),
      running: true,
    })),
  'block.landed': (s, e) => {
    if (s.trunkSha !== e.top) {
      s.trunkSha = e.top;
      s.trunkHistory = s.trunkHistory.push(e.top);
    }
    patch(s, e.block, () => ({ landedSha: e.sha, waiting: NOTHING }));
    const stack = s.lane.stack;
    const step = stack?.step;
    if (!stack || step?.at !== 'landing' || !step.blocks.includes(e.block) || step.landed.includes(e.block)) return;
    const landed = [...step.landed, e.block];
    s.lane = { ...s.lane, stack: { ...stack, step: { ...step, landed, running: landed.length < step.blocks.length } } };
  },
  'land.refused': (s, e) => running(s, e.stack, 'landing', false),
  'remote.fetched': (s, e) => {
    followTrunk(s, e.sha);
    const stack = s.lane.stack;
    if (stack?.id === e.stack) s.lane = { ...s.lane, stack: { ...stack, trunk: e.sha } };
  },
  'remote.pushed': nothing,
  'remote.moved': (s, e) => {
    followTrunk(s, e.sha);
    running(s, e.stack, 'landing', false);
  },
  'remote.failed': (s, e) => {
    if (e.op === 'push') running(s, e.stack, 'landing', false);
  },
  'remote.retry': (s, e) => running(s, e.stack, 'landing', true),
  'remote.waited': (s, e) => running(s, e.stack, 'landing', false),
  'remote.recovered': nothing,
  'remote.followed': nothing,
  'work.restored': nothing,
  'pr.requested': (s, e) =>
    stackAt(s, e.stack, (now) => {
      const kept = now.step.at === 'forge' && now.step.pr.sha === e.sha ? now.step.pr : undefined;
      const pr: ForgeWait = {
        sha: e.sha,
        blocks: e.blocks,
        tested: e.tested,
        failures: kept?.failures ?? 0,
        missing: kept?.missing ?? 0,
        ...((e.queue !== undefined || kept?.queued) && { queued: true }),
      };
      return { at: 'forge', pr, running: true };
    }),
  'pr.observed': (s, e) =>
    stackAt(s, e.stack, ({ step }) => {
      if (step.at !== 'forge') return undefined;
      const missing = e.checks.some((c) => c.state === 'missing') ? step.pr.missing + 1 : 0;
      return { ...step, running: false, pr: { ...step.pr, failures: 0, missing } };
    }),
  'pr.failed': (s, e) =>
    stackAt(s, e.stack, ({ step }) => {
      if (step.at !== 'forge') return undefined;
      const failures = e.kind === 'transient' ? step.pr.failures + 1 : step.pr.failures;
      return { ...step, running: false, pr: { ...step.pr, failures } };
    }),
  'pr.wait': (s, e) => running(s, e.stack, 'forge', true),
  'pr.waited': (s, e) => running(s, e.stack, 'forge', false),
  'remote.branch.pushed': nothing,
  'lane.closed': (s, e) => {
    if (s.lane.stack?.id !== e.stack) return;
    s.lane = { ...s.lane, stack: undefined, queue: [...e.returned, ...s.lane.queue.filter((id) => !e.returned.includes(id))] };
    for (const id of e.returned) patch(s, id, () => ({ waiting: { on: 'lane' } }));
  },
  'test.requested': (s) => {
    s.lane = { ...s.lane, verifying: s.lane.verifying + 1 };
  },
  'trunk.tested': (s, e) => {
    s.lane = { ...s.lane, verifying: Math.max(0, s.lane.verifying - 1), trunkRed: s.lane.trunkRed || !e.ok };
  },
  // Legacy lines (logs of version 1): the MERGE lock left nothing the lane needs.
  'merge.locked': nothing,
  'merge.observed': nothing,
  'merge.unlocked': nothing,
  'wrap.requested': waitFor({ on: 'wrap' }),
  'block.wrapped': (s, e) =>
    patch(s, e.block, (b) => ({
      summary: e.summary,
      orphans: e.orphan ? [...b.orphans, e.orphan] : b.orphans,
      waiting: NOTHING,
    })),
  'escalation.raised': (s, e) => {
    if (e.handler === 'operator') s.pagesPending = [...s.pagesPending, e.block];
    if (!s.blocks.has(e.block)) return;
    patch(s, e.block, (b) => {
      const handlers = b.trouble && b.trouble.trouble === e.trouble ? b.trouble.handlers : [];
      return { trouble: { trouble: e.trouble, detail: e.detail, handlers: [...handlers, e.handler] } };
    });
    if (e.trouble === 'trunk_touched' && e.sha && s.trunkHalt === undefined) s.trunkHalt = { sha: e.sha, block: e.block };
    // A remote that refuses tron halts the lane as a foreign trunk does: nothing can land until the operator answers.
    if (e.trouble === 'remote_refused' && s.trunkHalt === undefined) s.trunkHalt = { sha: s.trunkSha ?? '', block: e.block };
  },
  'page.sent': (s, e) => {
    const at = s.pagesPending.indexOf(e.block);
    if (at >= 0) s.pagesPending = s.pagesPending.toSpliced(at, 1);
  },
  'operator.answered': (s, e) => {
    // An answer about a block paged for an unavailable worker releases that worker's held turns.
    for (const [role, health] of Object.entries(s.workers)) {
      if (health?.held?.blocks.includes(e.block)) s.workers = { ...s.workers, [role]: { cause: health.cause, streak: health.streak } };
    }
    if (!s.blocks.has(e.block)) return;
    // An answer starts the block's budget afresh: the operator has seen the spend.
    patch(s, e.block, (b) => ({
      trouble: undefined,
      budgetFrom: b.spend,
      answeredAt: e.written_at ?? b.answeredAt,
      ...(e.word === 'RETRY' ? { guidance: String(e.payload.guidance) } : {}),
    }));
    if (s.trunkHalt?.block === e.block) {
      s.trunkHalt = undefined;
      s.trunkSha = e.trunk_sha;
      s.trunkHistory = s.trunkHistory.push(e.trunk_sha);
    }
  },
  'block.parked': (s, e) => {
    if (!s.blocks.has(e.block)) return;
    patch(s, e.block, () => ({ phase: 'parked', reason: e.reason, waiting: { on: 'operator' }, since: e.ts }));
    leaveQueue(s, e.block);
  },
  'block.abandoned': (s, e) => {
    if (!s.blocks.has(e.block)) return;
    patch(s, e.block, () => ({ phase: 'abandoned', reason: e.reason, waiting: NOTHING, since: e.ts }));
    leaveQueue(s, e.block);
  },
  'timer.fired': nothing,
  'worker.overran': nothing,
  'worker.probed': nothing,
  'worker.extended': (s, e) => patch(s, e.block, (b) => ({ live: { ...b.live, extensions: e.count } })),
  'turn.reissued': (s, e) => patch(s, e.block, (b) => ({ live: { ...b.live, reissues: b.live.reissues + 1 }, waiting: { on: 'reissue' } })),
  'run.heartbeat': nothing,
  'notify.delivered': nothing,
  'notify.failed': nothing,
  'forge.commented': nothing,
  'forge.failed': nothing,
  'forge.ignored': nothing,
  // What it stops is decided (engine/core/decide/withdraw.ts) and folds as block.abandoned.
  'issue.withdrawn': nothing,
  'worker.spawned': nothing,
  'worker.exited': nothing,
  'tests.queued': nothing,
  'tests.refused': nothing,
  'worker.usage': nothing,
  'worker.retry': nothing,
} satisfies { [T in EventType]: Reducer<T> };

/** The fold: the state after one more event. Pure; `prev` is left as it was. */
export function apply(prev: EngineState, e: TronEvent): EngineState {
  const s: EngineState = { ...prev, lastTs: e.ts };
  (reducers[e.type] as (s: EngineState, e: TronEvent) => void)(s, e);
  return s;
}
