/** The exception spine: a stuck or uninterpretable block walks its ESCALATION row, in order. */
import type { BlockState, EngineState, PendingTurn, TurnKind } from '../state.ts';
import { ACTIVE_PHASES } from '../state.ts';
import type { BodyOf } from '../events.ts';
import { ESCALATION, OUTCOMES, type Trouble } from '../../spine/spine.ts';
import { EXPECT, issue, TERMINAL, type Step } from './step.ts';

/**
 * Move a block along its ESCALATION row: the first handler, or the one after `after`,
 * skipping handlers that cannot act (no architect configured, its budget spent).
 */
export function escalate(step: Step, id: string, trouble: Trouble, detail: string, opts: { after?: string; to?: string } = {}): void {
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
      issue(step, {
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
      step.emit({ type: 'escalation.raised', block: id, trouble, detail, handler });
      issue(step, {
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
export function lastTurn(b: BlockState): PendingTurn | undefined {
  return b.lastTurn;
}

export function retry(step: Step, id: string, on: string): void {
  const b = step.block(id);
  // A block parked or in the merge lane gave its build-and-review slot back: with every slot
  // taken since, it waits for one as a pending block does, so max_parallel holds for an
  // answered block too (the schedule starts it from trunk, its guidance kept).
  if (!ACTIVE_PHASES.has(b.phase) && step.s.index.active >= step.s.maxParallel) {
    step.emit({ type: 'block.phase', block: id, from: b.phase, to: 'pending', on });
    return;
  }
  if (b.phase !== OUTCOMES.RETRY.to) step.emit({ type: 'block.phase', block: id, from: b.phase, to: OUTCOMES.RETRY.to, on });
  step.emit({ type: 'worktree.requested', block: id, attempt: b.attempt + 1, base: step.s.trunkSha! });
}

export function abandon(step: Step, id: string, reason: string): void {
  step.emit({ type: 'block.abandoned', block: id, reason });
  for (const dependent of dependentsOf(step.s, id)) {
    const d = step.block(dependent);
    if (!TERMINAL.has(d.phase) && d.phase !== 'parked') {
      step.emit({ type: 'block.parked', block: dependent, reason: `it depends on ${id}, which was abandoned: ${reason}` });
    }
  }
}

/** Every block that depends on `id`, directly or through others, in register order. */
export function dependentsOf(s: EngineState, id: string): string[] {
  const found = new Set<string>();
  const todo = [id];
  while (todo.length > 0) {
    for (const d of s.index.dependents.get(todo.pop()!) ?? []) {
      if (found.has(d)) continue;
      found.add(d);
      todo.push(d);
    }
  }
  const at = (x: string) => s.index.position.get(x)!;
  return [...found].sort((a, b) => at(a) - at(b));
}

export function onOperator(step: Step, e: BodyOf<'operator.answered'>): void {
  // The engine refuses answers for blocks it does not have before they become inputs; a
  // recorded one (an older log) is still never a reason to fail.
  const b = step.s.blocks.get(e.block);
  if (b?.phase !== 'parked') return;
  if (e.word === 'RETRY') {
    const waitingOn = b.info.depends_on.filter((d) => step.s.blocks.get(d)?.phase !== 'landed');
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
