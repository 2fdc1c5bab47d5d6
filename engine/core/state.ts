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
import type { BlockInfo, EventType, TronEvent } from './events.ts';
import { indexBlocks } from './block-index.ts';
import type { BlockState, EngineState } from './engine-state.ts';
import { addSpend, noSpend } from './engine-state.ts';
import { LANE_REDUCERS } from './lane/fold.ts';
import { NOTHING, nothing, patch, type Reducer, waitFor } from './reduce.ts';
import { byString, SortedMap } from './sorted-map.ts';
import { TrunkHistory } from './trunk-history.ts';
import type { PendingTurn } from './waiting.ts';

export { ACTIVE_PHASES, type BlockIndex, inFlight, TERMINAL } from './block-index.ts';
export type { BlockState, EngineState, Spend, WorkerHealth } from './engine-state.ts';
export { addSpend, noSpend } from './engine-state.ts';
export type { ForgeWait, Lane, Stack, StackStep } from './lane/stack.ts';
export { stackRunning } from './lane/stack.ts';
export type { TurnKind } from './roles.ts';
export { TrunkHistory } from './trunk-history.ts';
export type { PendingTurn, Waiting } from './waiting.ts';

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

function leaveQueue(s: EngineState, id: string): void {
  if (s.lane.queue.includes(id)) s.lane = { ...s.lane, queue: s.lane.queue.filter((x) => x !== id) };
}

// ---- the fold ----

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
      // A block put back to pending (a parked one the operator answered RETRY, with no slot free) waits for a slot, not on the operator.
      ...(e.to === 'pending' ? { waiting: { on: 'slot' as const } } : {}),
    })),
  ...LANE_REDUCERS,
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
