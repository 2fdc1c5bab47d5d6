/**
 * The decision step's working parts: the context it is given, the `Step` that
 * accumulates decisions (applying each to the state as it is made), and small helpers
 * every concern shares. Pure, like everything under engine/core/.
 */
import { blockedBy } from '../blocked.ts';
import { apply, type BlockState, type EngineState, type PendingTurn, TERMINAL, type TurnKind } from '../state.ts';
import type { BodyOf, EventBody, TronEvent } from '../events.ts';
import type { Spine } from '../../spine/spine.ts';
import type { Word } from '../../gateway/glossary.ts';

export interface DecideContext {
  spine: Spine;
  /** The test command, named in fact evidence. */
  testCommand?: string;
}

/** What one turn kind accepts. */
export const EXPECT: Record<Exclude<TurnKind, 'restate'>, Word[]> = {
  build: ['DONE', 'BLOCKED'],
  challenge: ['CONFIRMED', 'BLOCKED'],
  review: ['APPROVE', 'CHANGES'],
  merge: ['MERGED', 'BLOCKED'],
  probe: ['WORKING'],
  architect: ['RETRY', 'PAGE', 'ABANDON'],
};

export { ACTIVE_PHASES, TERMINAL } from '../state.ts';

/** Accumulates decisions, applying each to the state as it is made. */
export class Step {
  readonly out: EventBody[] = [];
  constructor(
    public s: EngineState,
    private readonly input: TronEvent,
    readonly ctx: DecideContext,
    /** The state the input arrived at, before the fold took it in (lane.ts arrivedAt). */
    readonly was: EngineState,
  ) {}

  emit(body: EventBody): void {
    this.out.push(body);
    this.s = apply(this.s, { ...body, v: this.input.v, seq: this.input.seq, ts: this.input.ts } as TronEvent);
  }

  block(id: string): BlockState {
    const b = this.s.blocks.get(id);
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

export function sessionOf(b: BlockState, role: 'builder' | 'reviewer'): string {
  return `${b.id}.${b.attempt}.${role}`;
}

/** The pending turn, if `e` is about it (timers and probes of finished turns are stale). */
export function pendingTurn(step: Step, e: { block: string; session: string; turn: number }): PendingTurn | undefined {
  const b = step.s.blocks.get(e.block);
  if (b?.waiting.on !== 'turn') return undefined;
  const t = b.waiting.turn;
  return t.session === e.session && t.turn === e.turn ? t : undefined;
}

/**
 * Ends the run: the one place `run.finished` is built. Every block is counted once, as
 * landed, abandoned or parked (anything not terminal).
 */
export function finishRun(step: Step, reason: 'done' | 'signal' | 'error' | 'budget', exit: number, detail?: string): void {
  const s = step.s;
  const inPhase = (phase: string) => s.order.filter((id) => s.blocks.get(id)!.phase === phase);
  const open = s.order.filter((id) => !TERMINAL.has(s.blocks.get(id)!.phase));
  // A block waiting on a dependency that did not land is not the operator's: counted apart.
  const blocked = open.flatMap((id) => {
    const by = blockedBy(s, id);
    return by ? [{ block: id, by: by.dependency }] : [];
  });
  step.emit({
    type: 'run.finished',
    reason,
    exit,
    landed: inPhase('landed'),
    parked: open.filter((id) => !blocked.some((b) => b.block === id)),
    abandoned: inPhase('abandoned'),
    ...(blocked.length > 0 ? { blocked } : {}),
    ...(detail !== undefined ? { detail } : {}),
  });
}

/** What a landed block's record keeps: the builder's own summary, or its title and landed sha. */
export function wrapSummary(b: BlockState): string {
  return b.summary ?? `${b.info.title} (landed at ${b.landedSha?.slice(0, 12) ?? '?'})`;
}

/**
 * Issues a worker turn — or, while that role's worker is unavailable (worker.unavailable,
 * until the operator answers), holds it: the block is not sent into the same failure.
 * Every turn the step starts goes through here.
 */
export function issue(step: Step, turn: Omit<BodyOf<'block.dispatched'>, 'type'>): void {
  const role = turn.role as PendingTurn['role'];
  if (step.s.workers[role]?.held) step.emit({ ...turn, role, type: 'turn.held' });
  else step.emit({ ...turn, type: 'block.dispatched' });
}

/** Issues the held turns of every worker that is available again, unchanged. */
export function releaseHeld(step: Step): void {
  // Only the blocks holding a turn are looked at (s.heldTurns), never the whole register.
  for (const id of step.s.heldTurns) {
    const b = step.s.blocks.get(id)!;
    if (b.waiting.on !== 'worker' || step.s.workers[b.waiting.held.role]?.held) continue;
    step.emit({ ...b.waiting.held, type: 'block.dispatched' });
  }
}

/** Issue a turn of `kind` for the block, in the session its role keeps for this attempt. */
export function dispatch(step: Step, id: string, kind: Exclude<TurnKind, 'restate' | 'architect'>, sha?: string): void {
  const b = step.block(id);
  const role = kind === 'review' ? 'reviewer' : 'builder';
  const session = sessionOf(b, role);
  issue(step, {
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
