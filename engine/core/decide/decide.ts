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
import type { EngineState } from '../state.ts';
import type { BodyOf, EventBody, TronEvent } from '../events.ts';
import { apply } from '../state.ts';
import { type DecideContext, Step, pendingTurn } from './step.ts';
import { dispatch, onReply } from './turns.ts';
import { onFacts } from './gate.ts';
import { onMergeObserved, onTrunkTested, trunkTouched } from './merge.ts';
import { onOperator } from './escalate.ts';
import { onOverrun, onProbed } from './liveness.ts';
import { schedule, stopWhenQuiet } from './schedule.ts';

export type { DecideContext } from './step.ts';

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

export function react(step: Step, e: TronEvent): void {
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

/** Where a block from an earlier run resumes (see engine/runtime/recovery.ts). */
export function onRecovered(step: Step, e: BodyOf<'block.recovered'>): void {
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
