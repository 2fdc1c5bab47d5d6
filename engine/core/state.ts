/**
 * The engine's state is the fold of its events: `apply(state, event)` for every line of
 * the log, in order. Nothing else feeds it, so resuming a run and replaying one start
 * from the same place as the live run did.
 */
import type { BlockInfo, EventOf, TronEvent } from './events.ts';

import type { FailureCause, TurnKind } from './roles.ts';
import type { Handler, Trouble } from '../spine/spine.ts';

export type { TurnKind } from './roles.ts';

/** A worker turn that was dispatched and has not answered yet. */
export interface PendingTurn {
  role: 'builder' | 'reviewer' | 'architect';
  session: string;
  turn: number;
  kind: TurnKind;
  phase: string;
  expect: string[];
  /** For a restate turn: the kind of the turn whose reply it restates. */
  restating?: TurnKind;
}

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

/** What a block is waiting for; at most one thing at a time. */
export type Waiting =
  | { on: 'slot' }
  | { on: 'worktree' }
  | { on: 'turn'; turn: PendingTurn }
  | { on: 'facts'; purpose: 'gate' | 'merge' }
  | { on: 'lock' }
  | { on: 'merge-check' }
  | { on: 'land' }
  | { on: 'trunk-test' }
  | { on: 'wrap' }
  | { on: 'operator' }
  /** A turn for a worker that is unavailable, held until the operator answers (turn.held). */
  | { on: 'worker'; held: Omit<EventOf<'turn.held'>, 'type' | 'v' | 'seq' | 'ts'> }
  | { on: 'reissue' }
  | { on: 'nothing' };

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
  /** The sha whose facts passed, awaiting the builder's evidence. */
  challenged?: string;
  /** Trunk as the engine left it when the last facts were requested. */
  factsTrunk?: string;
  /** The engine's last observation of the branch (facts.observed). */
  observed?: EventOf<'facts.observed'>;
  /** Liveness of the current turn chain: extensions granted and re-issues used. */
  live: { extensions: number; reissues: number };
  /** The last turn dispatched, kept after its reply so a restate can continue it. */
  lastTurn?: PendingTurn;
  /** How the current merge is landing: without a worker, or after MERGED. */
  mergeVia?: 'fast_forward' | 'MERGED';
  /** Patch id of the attested sha over its base, to see whether a rebase changed it. */
  patchId?: string;
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
  /** ts of the last phase change, for ages in status. */
  since: number;
  /** What its workers spent, over every attempt of this run. */
  spend: Spend;
}

export interface EngineState {
  run?: string;
  trunk: string;
  /** Where the engine last left trunk; anything else is a touch by someone else. */
  trunkSha?: string;
  /** Every sha the engine has put trunk at in this run, oldest first (start sha, then each landing). */
  trunkHistory: string[];
  mainStatus: string;
  maxParallel: number;
  architect: boolean;
  liveness: { probeWaitMs: number; extensionMs: number; maxExtensions: number; reissues: number };
  watch: boolean;
  blocks: Record<string, BlockState>;
  /** Block ids in register order. */
  order: string[];
  /** The block holding the MERGE lock. */
  mergeLock?: string;
  /** Blocks waiting for the MERGE lock, in arrival order. */
  mergeQueue: string[];
  /** Set when trunk was moved by someone else: no merges until the operator answers. */
  trunkHalt?: { sha: string; block: string };
  /** Blocks whose operator page was decided and not yet sent. */
  pagesPending: string[];
  /** Boot recovery is over: before that, nothing is dispatched and an empty run is not a finished one. */
  registered: boolean;
  /** A signal asked the engine to stop: nothing new starts. */
  stopping?: string;
  finished: boolean;
  lastTs: number;
  /** What every worker spent in this run. */
  spend: Spend;
  /** Each role's worker: its failure streak, and whether its turns are held. */
  workers: Partial<Record<PendingTurn['role'], WorkerHealth>>;
}

export function initialState(): EngineState {
  return {
    trunk: 'main',
    mainStatus: '',
    maxParallel: 1,
    architect: false,
    liveness: { probeWaitMs: 30_000, extensionMs: 600_000, maxExtensions: 3, reissues: 1 },
    watch: false,
    blocks: {},
    order: [],
    mergeQueue: [],
    trunkHistory: [],
    pagesPending: [],
    registered: false,
    finished: false,
    lastTs: 0,
    spend: noSpend(),
    workers: {},
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
  };
}

/** The fold: the state after one more event. Pure; returns a new state object. */
export function apply(prev: EngineState, e: TronEvent): EngineState {
  // Copy on write: the state's lists, and only the block the event is about.
  const s: EngineState = {
    ...prev,
    blocks: { ...prev.blocks },
    order: [...prev.order],
    mergeQueue: [...prev.mergeQueue],
    trunkHistory: [...prev.trunkHistory],
    pagesPending: [...prev.pagesPending],
    liveness: { ...prev.liveness },
    workers: { ...prev.workers },
    ...(prev.trunkHalt ? { trunkHalt: { ...prev.trunkHalt } } : {}),
  };
  s.lastTs = e.ts;
  if ('block' in e && prev.blocks[e.block]) s.blocks[e.block] = structuredClone(prev.blocks[e.block]!);
  const b = 'block' in e ? s.blocks[e.block] : undefined;
  switch (e.type) {
    case 'run.started':
      s.run = e.run;
      s.trunk = e.trunk;
      s.trunkSha = e.trunk_sha;
      s.trunkHistory = [e.trunk_sha];
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
      break;
    case 'register.loaded':
      for (const info of e.blocks) {
        const known = s.blocks[info.id];
        if (known) s.blocks[info.id] = { ...known, info };
        else {
          s.blocks[info.id] = newBlock(info, e.ts);
          s.order.push(info.id);
        }
      }
      break;
    case 'run.finished':
      s.finished = true;
      break;
    case 'block.recovered':
      if (b) {
        b.phase = e.phase;
        b.attempt = e.attempt;
        b.turns = { ...e.turns };
        b.architectCalls = e.architect_calls;
        b.rounds = { ...e.rounds };
        b.base = e.base;
        b.patchId = e.patch_id;
        if (e.phase === 'landed' || e.phase === 'wrap') b.landedSha = e.sha;
        if (e.phase !== 'landed') b.attested = e.sha;
        b.reason = e.reason;
        b.summary = e.summary;
        b.trouble = e.trouble ? { trouble: e.trouble, detail: e.reason ?? '', handlers: ['operator'] } : undefined;
        // A trunk touched in an earlier run still halts merges until the operator answers.
        if (e.phase === 'parked' && e.trouble === 'trunk_touched' && s.trunkHalt === undefined) s.trunkHalt = { sha: '', block: e.block };
        b.waiting = e.phase === 'parked' ? { on: 'operator' } : e.phase === 'pending' ? { on: 'slot' } : { on: 'nothing' };
        b.since = e.ts;
      }
      break;
    case 'run.stopping':
      s.stopping = e.signal;
      break;
    case 'recovery.finished':
      s.registered = true;
      break;
    case 'recovery.started':
    case 'lock.cleared':
    case 'worker.killed':
    case 'inbox.consumed':
      break;
    case 'worktree.requested':
      if (b) {
        b.attempt = e.attempt;
        b.rounds = { build: 0, review: 0, merge: 0 };
        b.attested = undefined;
        b.challenged = undefined;
        b.patchId = undefined;
        b.base = undefined;
        b.waiting = { on: 'worktree' };
        if (b.phase === 'pending' || b.phase === 'parked') b.phase = 'build';
        b.since = e.ts;
      }
      break;
    case 'worktree.ready':
      if (b) {
        b.base = e.base;
        if (e.orphan) b.orphans.push(e.orphan);
        b.waiting = { on: 'nothing' };
      }
      break;
    case 'block.dispatched':
      if (b) {
        // A re-issued turn keeps the count of re-issues of its chain; any other turn starts afresh.
        b.live = { extensions: 0, reissues: b.waiting.on === 'reissue' ? b.live.reissues : 0 };
        b.turns[e.session] = e.turn;
        if (e.kind === 'challenge') b.challenged = e.sha;
        if (e.kind === 'merge') b.mergeVia = 'MERGED';
        b.lastTurn = {
          role: e.role as PendingTurn['role'],
          session: e.session,
          turn: e.turn,
          kind: e.kind,
          phase: e.phase,
          expect: e.expect,
          restating: e.restating,
        };
        b.waiting = {
          on: 'turn',
          turn: {
            role: e.role as PendingTurn['role'],
            session: e.session,
            turn: e.turn,
            kind: e.kind,
            phase: e.phase,
            expect: e.expect,
            restating: e.restating,
          },
        };
        if (e.kind === 'architect') b.architectCalls += 1;
      }
      break;
    case 'reply.received': {
      // The pending turn stays recorded until the decision about the reply is applied.
      // The worker's health: a failure with a named cause extends or starts a streak; a
      // reply, or a failure with no cause, ends it; a turn the engine stopped says nothing.
      if (e.role === 'operator' || (!e.ok && e.failure === 'aborted')) break;
      const was = s.workers[e.role] ?? { streak: 0 };
      const streak = !e.ok && e.cause ? (was.cause === e.cause ? was.streak + 1 : 1) : 0;
      s.workers[e.role] = { ...(!e.ok && e.cause ? { cause: e.cause } : {}), streak, ...(was.held ? { held: was.held } : {}) };
      break;
    }
    case 'worker.unavailable': {
      const was = s.workers[e.role] ?? { streak: 0 };
      const blocks = was.held ? [...was.held.blocks, e.block] : [e.block];
      s.workers[e.role] = { ...was, held: { cause: e.cause, blocks } };
      break;
    }
    case 'turn.held':
      if (b) {
        const { type: _t, v: _v, seq: _s, ts: _ts, ...held } = e;
        b.waiting = { on: 'worker', held };
      }
      break;
    case 'reply.accepted':
      if (b) {
        b.waiting = { on: 'nothing' };
        if (e.word === 'CHANGES') b.feedback = `The reviewer asked for changes:\n${String(e.payload.notes)}`;
        if (e.word === 'RETRY') {
          b.guidance = String(e.payload.guidance);
          b.trouble = undefined;
        }
        if (e.word === 'DONE' || e.word === 'MERGED') b.summary = typeof e.payload.summary === 'string' ? e.payload.summary : b.summary;
      }
      break;
    case 'reply.refused':
      if (b) b.waiting = { on: 'nothing' };
      break;
    case 'facts.requested':
      if (b) {
        b.waiting = { on: 'facts', purpose: e.purpose };
        b.factsTrunk = e.trunk_sha;
      }
      break;
    case 'facts.observed':
      if (b) {
        b.waiting = { on: 'nothing' };
        b.observed = e;
      }
      break;
    case 'gate.passed':
      if (b) {
        b.attested = e.sha;
        if (b.observed?.head === e.sha) b.patchId = b.observed.patch_id;
        b.challenged = undefined;
        b.feedback = '';
      }
      break;
    case 'gate.failed':
      if (b) {
        b.challenged = undefined;
        const failed = e.facts.filter((f) => !f.ok);
        b.feedback = failed.map((f) => `- ${f.name}: ${f.evidence}`).join('\n');
        if (e.purpose === 'merge') b.rounds.merge += 1;
        else b.rounds.build += 1;
      }
      break;
    case 'block.phase':
      if (b) {
        b.phase = e.to;
        b.since = e.ts;
        if (e.from === 'review' && e.to === 'build') b.rounds.review += 1;
      }
      break;
    case 'merge.queued':
      if (b) {
        b.waiting = { on: 'lock' };
        if (!s.mergeQueue.includes(e.block)) s.mergeQueue.push(e.block);
      }
      break;
    case 'merge.locked':
      s.mergeLock = e.block;
      s.mergeQueue = s.mergeQueue.filter((id) => id !== e.block);
      if (b) {
        b.waiting = { on: 'merge-check' };
        b.mergeVia = 'fast_forward';
      }
      break;
    case 'merge.observed':
      if (b) b.waiting = { on: 'nothing' };
      break;
    case 'merge.unlocked':
      if (s.mergeLock === e.block) s.mergeLock = undefined;
      break;
    case 'land.intent':
      if (b) b.waiting = { on: 'land' };
      break;
    case 'block.landed':
      s.trunkSha = e.sha;
      s.trunkHistory.push(e.sha);
      if (b) {
        b.landedSha = e.sha;
        b.waiting = { on: 'nothing' };
      }
      break;
    case 'land.refused':
      if (b) b.waiting = { on: 'nothing' };
      break;
    case 'test.requested':
      if (b) b.waiting = { on: 'trunk-test' };
      break;
    case 'trunk.tested':
      if (b) b.waiting = { on: 'nothing' };
      break;
    case 'wrap.requested':
      if (b) b.waiting = { on: 'wrap' };
      break;
    case 'block.wrapped':
      if (b) {
        b.summary = e.summary;
        if (e.orphan) b.orphans.push(e.orphan);
        b.waiting = { on: 'nothing' };
      }
      break;
    case 'escalation.raised':
      if (e.handler === 'operator') s.pagesPending.push(e.block);
      if (b) {
        const handlers = b.trouble && b.trouble.trouble === e.trouble ? b.trouble.handlers : [];
        b.trouble = { trouble: e.trouble, detail: e.detail, handlers: [...handlers, e.handler] };
        if (e.trouble === 'trunk_touched' && e.sha && s.trunkHalt === undefined) s.trunkHalt = { sha: e.sha, block: e.block };
      }
      break;
    case 'page.sent': {
      const at = s.pagesPending.indexOf(e.block);
      if (at >= 0) s.pagesPending.splice(at, 1);
      break;
    }
    case 'operator.answered':
      // An answer about a block paged for an unavailable worker releases that worker's held turns.
      for (const [role, health] of Object.entries(s.workers)) {
        if (health?.held?.blocks.includes(e.block)) s.workers[role as PendingTurn['role']] = { cause: health.cause, streak: health.streak };
      }
      if (b) {
        b.trouble = undefined;
        if (e.word === 'RETRY') b.guidance = String(e.payload.guidance);
        if (s.trunkHalt?.block === e.block) {
          s.trunkHalt = undefined;
          s.trunkSha = e.trunk_sha;
          s.trunkHistory.push(e.trunk_sha);
        }
      }
      break;
    case 'block.parked':
    case 'block.abandoned':
      if (b) {
        const parked = e.type === 'block.parked';
        b.phase = parked ? 'parked' : 'abandoned';
        b.reason = e.reason;
        b.waiting = { on: parked ? 'operator' : 'nothing' };
        b.since = e.ts;
        s.mergeQueue = s.mergeQueue.filter((id) => id !== e.block);
      }
      break;
    case 'worker.overran':
    case 'worker.probed':
    case 'timer.fired':
    case 'run.heartbeat':
      break;
    case 'worker.extended':
      if (b) b.live.extensions = e.count;
      break;
    case 'turn.reissued':
      if (b) {
        b.live.reissues += 1;
        b.waiting = { on: 'reissue' };
      }
      break;
    case 'usage.recorded':
      s.spend = addSpend(s.spend, e);
      if (b) b.spend = addSpend(b.spend, e);
      break;
    case 'worker.spawned':
    case 'worker.exited':
    case 'worker.usage':
    case 'worker.retry':
      break;
  }
  return s;
}
