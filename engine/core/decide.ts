/**
 * The decision step of the flow driver: `(state, input) → (state, decisions)`. Pure —
 * no clock, no git, no I/O: inputs are recorded events and every decision is an event
 * that fully describes the effect it asks for. Resume folds the log; replay feeds the
 * recorded inputs back through this function and compares the decisions.
 *
 * Invariants enforced here: a reply is acted on only through the gateway (never
 * guessed); a block reaches review only with an attested sha; only the MERGE lock
 * holder may land; trunk moved by someone else halts merges until the operator answers.
 */
import { apply, type BlockState, type EngineState, type PendingTurn, type TurnKind } from './state.ts';
import type { BodyOf, EventBody, TronEvent } from './events.ts';
import { parseReply } from '../gateway/parse.ts';
import { deriveFacts, evidenceProblem } from './facts.ts';
import { ESCALATION, OUTCOMES, type Spine, type Trouble } from '../spine/spine.ts';
import type { Word } from '../gateway/glossary.ts';

export interface DecideContext {
  spine: Spine;
  /** The test command, named in fact evidence. */
  testCommand?: string;
}

/** What one turn kind accepts. */
const EXPECT: Record<Exclude<TurnKind, 'restate'>, Word[]> = {
  build: ['DONE', 'BLOCKED'],
  challenge: ['CONFIRMED', 'BLOCKED'],
  review: ['APPROVE', 'CHANGES'],
  merge: ['MERGED', 'BLOCKED'],
  probe: ['WORKING'],
  architect: ['RETRY', 'PAGE', 'ABANDON'],
};

const ACTIVE_PHASES = new Set(['build', 'review']);
const TERMINAL = new Set(['landed', 'abandoned']);

/** Accumulates decisions, applying each to the state as it is made. */
class Step {
  readonly out: EventBody[] = [];
  constructor(
    public s: EngineState,
    private readonly input: TronEvent,
    readonly ctx: DecideContext,
  ) {}

  emit(body: EventBody): void {
    this.out.push(body);
    this.s = apply(this.s, { ...body, v: this.input.v, seq: this.input.seq, ts: this.input.ts } as TronEvent);
  }

  block(id: string): BlockState {
    const b = this.s.blocks[id];
    if (!b) throw new Error(`unknown block ${id}`);
    return b;
  }

  /**
   * Moves the block along the spine's transition from its phase on `on` (a word or a
   * signal). The spine, not this code, says where each outcome leads.
   */
  move(id: string, on: string): void {
    const b = this.block(id);
    const phase = this.ctx.spine.phases.find((p) => p.name === b.phase);
    const t = phase?.transitions.find((x) => x.on === on);
    if (!t) throw new Error(`the spine has no transition from ${b.phase} on ${on}`);
    this.emit({ type: 'block.phase', block: id, from: b.phase, to: t.to, on });
  }

  budget(phase: 'build' | 'review' | 'merge'): number {
    return this.ctx.spine.phases.find((p) => p.name === phase)?.attempts ?? 3;
  }
}

/** The pure step. */
export function decide(state: EngineState, input: TronEvent, ctx: DecideContext): { state: EngineState; decisions: EventBody[] } {
  const step = new Step(apply(state, input), input, ctx);
  if (step.s.finished) return { state: step.s, decisions: [] };
  if (step.s.stopping !== undefined) {
    if (input.type === 'reply.received' && pendingTurn(step, input)) {
      // The turn was stopped (or ended) during shutdown: recorded, not acted on.
      step.emit({
        type: 'reply.refused',
        block: input.block,
        session: input.session,
        turn: input.turn,
        kind: 'stopped',
        message: `the engine is stopping (${step.s.stopping}); the turn is not acted on`,
      });
    }
    stopWhenQuiet(step);
    return { state: step.s, decisions: step.out };
  }
  react(step, input);
  schedule(step);
  return { state: step.s, decisions: step.out };
}

function react(step: Step, e: TronEvent): void {
  switch (e.type) {
    case 'worktree.ready':
      dispatch(step, e.block, 'build');
      return;
    case 'reply.received':
      onReply(step, e);
      return;
    case 'facts.observed':
      onFacts(step, e);
      return;
    case 'merge.observed':
      onMergeObserved(step, e);
      return;
    case 'block.landed':
      step.emit({ type: 'test.requested', block: e.block, sha: e.sha });
      return;
    case 'land.refused':
      trunkTouched(step, e.block, e.actual, `the ref transaction was refused: ${e.detail}`);
      return;
    case 'trunk.tested':
      onTrunkTested(step, e);
      return;
    case 'block.wrapped': {
      const b = step.block(e.block);
      step.move(b.id, 'wrapped');
      return;
    }
    case 'operator.answered':
      onOperator(step, e);
      return;
    case 'block.recovered':
      onRecovered(step, e);
      return;
    case 'timer.fired':
      onOverrun(step, e);
      return;
    case 'worker.probed':
      onProbed(step, e);
      return;
    default:
      return;
  }
}

// ---- turns ----

function sessionOf(b: BlockState, role: 'builder' | 'reviewer'): string {
  return `${b.id}.${b.attempt}.${role}`;
}

/** Issue a turn of `kind` for the block, in the session its role keeps for this attempt. */
function dispatch(step: Step, id: string, kind: Exclude<TurnKind, 'restate' | 'architect'>, sha?: string): void {
  const b = step.block(id);
  const role = kind === 'review' ? 'reviewer' : 'builder';
  const session = sessionOf(b, role);
  step.emit({
    type: 'block.dispatched',
    block: id,
    role,
    session,
    turn: (b.turns[session] ?? 0) + 1,
    kind,
    phase: b.phase,
    attempt: b.attempt,
    expect: EXPECT[kind],
    ...(sha ? { sha } : {}),
  });
}

function onReply(step: Step, e: BodyOf<'reply.received'>): void {
  const b = step.block(e.block);
  if (b.waiting.on !== 'turn' || b.waiting.turn.session !== e.session || b.waiting.turn.turn !== e.turn) return; // a stale reply
  const pending = b.waiting.turn;
  if (!e.ok) {
    const message = `the turn failed (${e.failure ?? 'unknown'}): ${e.detail ?? ''}`.trim();
    step.emit({ type: 'reply.refused', block: b.id, session: e.session, turn: e.turn, kind: 'turn_failed', message });
    troubleWithReply(step, b.id, pending, 'turn_failed', message);
    return;
  }
  const parsed = parseReply(e.reply ?? '', { role: pending.role, phase: pending.phase, expect: pending.expect as Word[] });
  if (!parsed.ok) {
    step.emit({
      type: 'reply.refused',
      block: b.id,
      session: e.session,
      turn: e.turn,
      kind: parsed.refusal.kind,
      message: parsed.refusal.message,
    });
    troubleWithReply(step, b.id, pending, 'uninterpretable', parsed.refusal.message);
    return;
  }
  const payload = (parsed.payload ?? {}) as Record<string, unknown>;
  step.emit({ type: 'reply.accepted', block: b.id, session: e.session, turn: e.turn, word: parsed.word, payload });
  act(step, b.id, parsed.word, payload);
}

/** A refused reply or failed turn: restate once, or on along the exception spine. */
function troubleWithReply(step: Step, id: string, pending: PendingTurn, trouble: Trouble, message: string): void {
  if (pending.kind === 'architect') {
    escalate(step, id, 'architect_failed', `the architect's reply was not usable: ${message}`);
    return;
  }
  if (pending.kind === 'restate') {
    escalate(step, id, trouble, message, { after: 'restate' });
    return;
  }
  escalate(step, id, trouble, message);
}

function act(step: Step, id: string, word: Word, payload: Record<string, unknown>): void {
  const b = step.block(id);
  switch (word) {
    case 'DONE':
      step.emit({ type: 'facts.requested', block: id, purpose: 'gate', base: b.base!, trunk_sha: step.s.trunkSha! });
      return;
    case 'CONFIRMED': {
      const problem = evidenceProblem(payload.evidence as Record<string, string>, b.info.criteria);
      const sha = b.challenged!;
      if (problem) {
        step.emit({
          type: 'gate.failed',
          block: id,
          sha,
          purpose: 'evidence',
          facts: [{ name: 'evidence', ok: false, evidence: problem }],
        });
        afterGateFailure(step, id, 'build');
        return;
      }
      const facts = b.observed ? deriveFacts(b.observed, expectations(step, b.factsTrunk)) : [];
      facts.push({ name: 'evidence', ok: true, evidence: `evidence given for all ${b.info.criteria.length} criteria` });
      step.emit({ type: 'gate.passed', block: id, sha, facts });
      step.move(id, 'CONFIRMED');
      dispatch(step, id, 'review', sha);
      return;
    }
    case 'BLOCKED':
      escalate(step, id, 'blocked', String(payload.reason));
      return;
    case 'APPROVE':
      step.move(id, 'APPROVE');
      step.emit({ type: 'merge.queued', block: id });
      return;
    case 'CHANGES':
      if (b.rounds.review + 1 >= step.budget('review')) {
        escalate(step, id, 'review_budget', `the reviewer asked for changes ${b.rounds.review + 1} times: ${String(payload.notes)}`);
        return;
      }
      step.move(id, 'CHANGES');
      dispatch(step, id, 'build');
      return;
    case 'MERGED':
      step.emit({ type: 'facts.requested', block: id, purpose: 'merge', base: step.s.trunkSha!, trunk_sha: step.s.trunkSha! });
      return;
    case 'RETRY':
      retry(step, id, 'RETRY');
      return;
    case 'ABANDON':
      abandon(step, id, String(payload.reason));
      return;
    case 'PAGE':
      escalate(step, id, b.trouble ? (b.trouble.trouble as Trouble) : 'blocked', String(payload.reason), { to: 'operator' });
      return;
    case 'WORKING':
      return;
  }
}

// ---- the truth gate ----

function expectations(step: Step, since?: string) {
  const history = step.s.trunkHistory;
  const from = since ? history.lastIndexOf(since) : -1;
  return {
    trunkSha: step.s.trunkSha!,
    mainStatus: step.s.mainStatus,
    trunkAllowed: from >= 0 ? history.slice(from) : [],
    ...(step.ctx.testCommand ? { testCommand: step.ctx.testCommand } : {}),
  };
}

function onFacts(step: Step, e: BodyOf<'facts.observed'>): void {
  const b = step.block(e.block);
  const facts = deriveFacts(e as never, expectations(step, b.factsTrunk));
  const failed = facts.filter((f) => !f.ok);
  if (failed.some((f) => f.name === 'trunk_untouched')) {
    step.emit({ type: 'gate.failed', block: b.id, sha: e.head, purpose: e.purpose, facts });
    trunkTouched(step, b.id, e.trunk_sha, failed.find((f) => f.name === 'trunk_untouched')!.evidence);
    return;
  }
  if (failed.length > 0) {
    step.emit({ type: 'gate.failed', block: b.id, sha: e.head, purpose: e.purpose, facts });
    afterGateFailure(step, b.id, e.purpose === 'merge' ? 'merge' : 'build');
    return;
  }
  if (e.purpose === 'gate') {
    dispatch(step, b.id, 'challenge', e.head);
    return;
  }
  // A MERGED head that holds every fact: land it if the patch is what review saw.
  const unchanged = e.patch_id === b.patchId;
  step.emit({ type: 'gate.passed', block: b.id, sha: e.head, facts });
  if (unchanged) {
    step.emit({ type: 'land.intent', block: b.id, sha: e.head, from: step.s.trunkSha! });
    return;
  }
  step.emit({ type: 'merge.unlocked', block: b.id });
  step.move(b.id, 'patch.changed');
  dispatch(step, b.id, 'review', e.head);
}

/** Back to the phase with the failing fact stated, or escalation past the budget. */
function afterGateFailure(step: Step, id: string, phase: 'build' | 'merge'): void {
  const b = step.block(id);
  if (b.rounds[phase] >= step.budget(phase)) {
    escalate(step, id, phase === 'build' ? 'gate_budget' : 'merge_failed', `the gate failed ${b.rounds[phase]} times:\n${b.feedback}`);
    return;
  }
  step.move(id, 'gate.failed');
  dispatch(step, id, phase);
}

// ---- merge and land ----

function onMergeObserved(step: Step, e: BodyOf<'merge.observed'>): void {
  if (e.trunk_sha !== step.s.trunkSha) {
    trunkTouched(step, e.block, e.trunk_sha, `trunk moved from ${step.s.trunkSha} to ${e.trunk_sha} by someone other than the engine`);
    return;
  }
  if (e.fast_forward) {
    step.emit({ type: 'land.intent', block: e.block, sha: e.sha, from: e.trunk_sha });
    return;
  }
  dispatch(step, e.block, 'merge');
}

function onTrunkTested(step: Step, e: BodyOf<'trunk.tested'>): void {
  const b = step.block(e.block);
  step.emit({ type: 'merge.unlocked', block: b.id });
  step.move(b.id, b.mergeVia ?? 'fast_forward');
  step.emit({ type: 'wrap.requested', block: b.id });
  if (!e.ok) {
    // The landed sha passed at the gate; red on trunk means the tests are not repeatable.
    // It cannot be un-landed without rewriting trunk, which is the user's: page the
    // operator. Nothing else lands unless its own tests pass at its own head.
    step.emit({
      type: 'escalation.raised',
      block: b.id,
      trouble: 'trunk_red',
      handler: 'operator',
      detail: `the tests failed on trunk at ${e.sha}, though they passed at the same sha at the gate (output: ${e.tests.log})`,
    });
  }
}

function trunkTouched(step: Step, id: string, actual: string | null, detail: string): void {
  if (step.s.mergeLock === id) step.emit({ type: 'merge.unlocked', block: id });
  step.emit({
    type: 'escalation.raised',
    block: id,
    trouble: 'trunk_touched',
    handler: 'operator',
    detail,
    ...(actual ? { sha: actual } : {}),
  });
  step.emit({ type: 'block.parked', block: id, reason: detail });
}

// ---- the exception spine ----

/**
 * Move a block along its ESCALATION row: the first handler, or the one after `after`,
 * skipping handlers that cannot act (no architect configured, its budget spent).
 */
function escalate(step: Step, id: string, trouble: Trouble, detail: string, opts: { after?: string; to?: string } = {}): void {
  const b = step.block(id);
  const row = ESCALATION[trouble].handlers as readonly string[];
  let handlers = [...row];
  if (opts.to) handlers = [opts.to];
  else if (opts.after) handlers = handlers.slice(handlers.indexOf(opts.after) + 1);
  for (const handler of handlers) {
    if (handler === 'restate') {
      const pending = lastTurn(b);
      if (!pending) continue;
      step.emit({ type: 'escalation.raised', block: id, trouble, detail, handler });
      step.emit({
        type: 'block.dispatched',
        block: id,
        role: pending.role,
        session: pending.session,
        turn: pending.turn + 1,
        kind: 'restate',
        phase: pending.phase,
        attempt: b.attempt,
        expect: pending.expect,
        restating: (pending.kind === 'restate' ? pending.restating : pending.kind) as Exclude<TurnKind, 'restate'>,
        ...(b.challenged && pending.kind === 'challenge' ? { sha: b.challenged } : {}),
      });
      return;
    }
    if (handler === 'architect') {
      if (!step.s.architect || b.architectCalls >= step.ctx.spine.budgets.architect) continue;
      if (step.s.mergeLock === id) step.emit({ type: 'merge.unlocked', block: id });
      step.emit({ type: 'escalation.raised', block: id, trouble, detail, handler });
      step.emit({
        type: 'block.dispatched',
        block: id,
        role: 'architect',
        session: `${id}.architect.${b.architectCalls + 1}`,
        turn: 1,
        kind: 'architect',
        phase: b.phase,
        attempt: b.attempt,
        expect: EXPECT.architect,
      });
      return;
    }
    if (handler === 'operator') {
      if (step.s.mergeLock === id) step.emit({ type: 'merge.unlocked', block: id });
      step.emit({ type: 'escalation.raised', block: id, trouble, detail, handler });
      step.emit({ type: 'block.parked', block: id, reason: `${trouble}: ${detail}` });
      return;
    }
    // probe and reissue are liveness handlers, driven by timers, not by replies.
  }
  step.emit({ type: 'escalation.raised', block: id, trouble, detail, handler: 'operator' });
  step.emit({ type: 'block.parked', block: id, reason: `${trouble}: ${detail}` });
}

/** The turn whose reply was just refused (the state still holds it as the last dispatch). */
function lastTurn(b: BlockState): PendingTurn | undefined {
  return b.lastTurn;
}

function retry(step: Step, id: string, on: string): void {
  const b = step.block(id);
  if (step.s.mergeLock === id) step.emit({ type: 'merge.unlocked', block: id });
  if (b.phase !== OUTCOMES.RETRY.to) step.emit({ type: 'block.phase', block: id, from: b.phase, to: OUTCOMES.RETRY.to, on });
  step.emit({ type: 'worktree.requested', block: id, attempt: b.attempt + 1 });
}

function abandon(step: Step, id: string, reason: string): void {
  if (step.s.mergeLock === id) step.emit({ type: 'merge.unlocked', block: id });
  step.emit({ type: 'block.abandoned', block: id, reason });
  for (const dependent of dependentsOf(step.s, id)) {
    const d = step.block(dependent);
    if (!TERMINAL.has(d.phase) && d.phase !== 'parked') {
      step.emit({ type: 'block.parked', block: dependent, reason: `it depends on ${id}, which was abandoned: ${reason}` });
    }
  }
}

/** Every block that depends on `id`, directly or through others, in register order. */
function dependentsOf(s: EngineState, id: string): string[] {
  const found = new Set<string>();
  let grew = true;
  while (grew) {
    grew = false;
    for (const other of s.order) {
      if (found.has(other)) continue;
      const deps = s.blocks[other]!.info.depends_on;
      if (deps.includes(id) || deps.some((d) => found.has(d))) {
        found.add(other);
        grew = true;
      }
    }
  }
  return s.order.filter((o) => found.has(o));
}

function onOperator(step: Step, e: BodyOf<'operator.answered'>): void {
  const b = step.block(e.block);
  if (b.phase !== 'parked') return;
  if (e.word === 'RETRY') {
    const waitingOn = b.info.depends_on.filter((d) => step.s.blocks[d]?.phase !== 'landed');
    if (waitingOn.length > 0 && b.attempt === 0) {
      step.emit({ type: 'block.phase', block: b.id, from: 'parked', to: 'pending', on: 'RETRY' });
      return;
    }
    retry(step, b.id, 'RETRY');
  } else if (e.word === 'ABANDON') {
    step.move(b.id, 'ABANDON');
    abandon(step, b.id, String(e.payload.reason));
  }
}

// ---- liveness: talk before you page ----

/** The pending turn, if `e` is about it (timers and probes of finished turns are stale). */
function pendingTurn(step: Step, e: { block: string; session: string; turn: number }): PendingTurn | undefined {
  const b = step.s.blocks[e.block];
  if (b?.waiting.on !== 'turn') return undefined;
  const t = b.waiting.turn;
  return t.session === e.session && t.turn === e.turn ? t : undefined;
}

function onOverrun(step: Step, e: BodyOf<'timer.fired'>): void {
  const turn = pendingTurn(step, e);
  if (!turn) return;
  const b = step.block(e.block);
  if (b.live.extensions === 0) {
    step.emit({
      type: 'escalation.raised',
      block: b.id,
      trouble: 'overrun',
      handler: 'probe',
      detail: `turn ${e.turn} of ${e.session} ran ${Math.round(e.elapsed_ms / 1000)}s, past its budget`,
    });
  }
  step.emit({ type: 'worker.overran', block: b.id, session: e.session, turn: e.turn, elapsed_ms: e.elapsed_ms });
}

/** Life earns a bounded extension; silence gets the turn re-issued once, then the operator. */
function onProbed(step: Step, e: BodyOf<'worker.probed'>): void {
  const turn = pendingTurn(step, e);
  if (!turn) return;
  const b = step.block(e.block);
  const live = step.s.liveness;
  if (e.alive && b.live.extensions < live.maxExtensions) {
    step.emit({
      type: 'worker.extended',
      block: b.id,
      session: e.session,
      turn: e.turn,
      extension_ms: live.extensionMs,
      count: b.live.extensions + 1,
    });
    return;
  }
  const why = e.alive
    ? `still going after ${live.maxExtensions} extension(s) (${e.signs.join(', ')})`
    : `no sign of life (${e.signs.join(', ') || 'silent'})`;
  if (b.live.reissues < live.reissues) {
    step.emit({
      type: 'escalation.raised',
      block: b.id,
      trouble: 'overrun',
      handler: 'reissue',
      detail: `turn ${e.turn} of ${e.session}: ${why}`,
    });
    step.emit({ type: 'turn.reissued', block: b.id, session: e.session, turn: e.turn, reason: why });
    step.emit({
      type: 'block.dispatched',
      block: b.id,
      role: turn.role,
      session: turn.session,
      turn: turn.turn + 1,
      kind: turn.kind,
      phase: turn.phase,
      attempt: b.attempt,
      expect: turn.expect,
      ...(turn.kind === 'review' || turn.kind === 'challenge' ? { sha: turn.kind === 'review' ? b.attested! : b.challenged! } : {}),
      ...(turn.restating ? { restating: turn.restating as Exclude<TurnKind, 'restate'> } : {}),
    });
    return;
  }
  escalate(step, b.id, 'overrun', `turn ${e.turn} of ${e.session} overran again after ${b.live.reissues} re-issue(s): ${why}`, {
    after: 'reissue',
  });
}

/** Where a block from an earlier run resumes (see engine/runtime/recovery.ts). */
function onRecovered(step: Step, e: BodyOf<'block.recovered'>): void {
  const b = step.block(e.block);
  if (e.phase === 'review' && e.sha) dispatch(step, b.id, 'review', e.sha);
  else if (e.phase === 'merge') step.emit({ type: 'merge.queued', block: b.id });
  else if (e.phase === 'wrap') step.emit({ type: 'wrap.requested', block: b.id });
  else if (e.phase === 'parked' && e.page) {
    step.emit({
      type: 'escalation.raised',
      block: b.id,
      trouble: e.trouble ?? 'blocked',
      handler: 'operator',
      detail: e.reason ?? 'parked in an earlier run',
    });
  }
}

// ---- scheduling ----

/** After every input: fill free slots, hand out the MERGE lock, and end the run when settled. */
function schedule(step: Step): void {
  const s = step.s;
  if (!s.registered) return;
  // Blocks whose dependency was abandoned are parked with that reason.
  for (const id of s.order) {
    const b = s.blocks[id]!;
    if (b.phase !== 'pending') continue;
    const gone = b.info.depends_on.find((d) => s.blocks[d]?.phase === 'abandoned');
    if (gone) step.emit({ type: 'block.parked', block: id, reason: `it depends on ${gone}, which was abandoned` });
  }
  const ready = step.s.order
    .map((id) => step.s.blocks[id]!)
    .filter((b) => b.phase === 'pending' && b.info.depends_on.every((d) => step.s.blocks[d]?.phase === 'landed'))
    .sort((a, b) => a.info.priority - b.info.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const b of ready) {
    const active = step.s.order.filter((id) => ACTIVE_PHASES.has(step.s.blocks[id]!.phase)).length;
    if (active >= step.s.maxParallel) break;
    step.emit({ type: 'worktree.requested', block: b.id, attempt: b.attempt + 1 });
  }
  if (step.s.mergeLock === undefined && step.s.trunkHalt === undefined && step.s.mergeQueue.length > 0) {
    const next = step.block(step.s.mergeQueue[0]!);
    step.emit({ type: 'merge.locked', block: next.id, sha: next.attested! });
  }
  if (!step.s.watch && settled(step.s)) {
    const ids = (phase: string) => step.s.order.filter((id) => step.s.blocks[id]!.phase === phase);
    const landed = ids('landed');
    step.emit({
      type: 'run.finished',
      reason: 'done',
      exit: landed.length === step.s.order.length ? 0 : 3,
      landed,
      parked: step.s.order.filter((id) => !['landed', 'abandoned'].includes(step.s.blocks[id]!.phase)),
      abandoned: ids('abandoned'),
    });
  }
}

/** Waiting on something the engine started (a turn, git, tests) rather than on a person or a slot. */
function inFlight(b: BlockState): boolean {
  return !['nothing', 'operator', 'slot', 'lock'].includes(b.waiting.on);
}

/** After a stop signal: once every effect in flight has reported back, the run finishes. */
function stopWhenQuiet(step: Step): void {
  const s = step.s;
  if (s.order.some((id) => inFlight(s.blocks[id]!))) return;
  const ids = (phase: string) => s.order.filter((id) => s.blocks[id]!.phase === phase);
  step.emit({
    type: 'run.finished',
    reason: 'signal',
    exit: s.stopping === 'SIGINT' ? 130 : 143,
    landed: ids('landed'),
    parked: s.order.filter((id) => !['landed', 'abandoned'].includes(s.blocks[id]!.phase)),
    abandoned: ids('abandoned'),
    detail: `stopped by ${s.stopping}`,
  });
}

/** Nothing is running and nothing can start: every block landed, abandoned, parked or stuck behind one. */
function settled(s: EngineState): boolean {
  if (s.pagesPending.length > 0) return false;
  if (s.order.length === 0) return true;
  return s.order.every((id) => {
    const b = s.blocks[id]!;
    if (TERMINAL.has(b.phase) || b.phase === 'parked') return true;
    if (b.waiting.on === 'lock' && s.trunkHalt !== undefined) return true;
    if (b.phase === 'pending') return stuck(s, b, new Set());
    return false;
  });
}

function stuck(s: EngineState, b: BlockState, seen: Set<string>): boolean {
  if (seen.has(b.id)) return true;
  seen.add(b.id);
  return b.info.depends_on.some((d) => {
    const dep = s.blocks[d];
    if (!dep) return true;
    if (dep.phase === 'abandoned' || dep.phase === 'parked') return true;
    return dep.phase === 'pending' && stuck(s, dep, seen);
  });
}
