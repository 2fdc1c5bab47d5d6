/**
 * The decision step of the flow driver: `(state, input) → (state, decisions)`. Pure —
 * no clock, no git, no I/O: inputs are recorded events and every decision is an event
 * that fully describes the effect it asks for. Resume folds the log; replay feeds the
 * recorded inputs back through this function and compares the decisions.
 *
 * Invariants enforced here: a reply is acted on only through the gateway (never
 * guessed); a block reaches review only with an attested sha; trunk moves only to the
 * top of a stack the engine tested green (merge.ts); trunk moved by someone else halts
 * the merge lane until the operator answers.
 */
import type { EngineState } from '../state.ts';
import type { BodyOf, EventBody, EventOf, EventType, TronEvent } from '../events.ts';
import { apply } from '../state.ts';
import { type DecideContext, dispatch, finishRun, pendingTurn, Step, wrapSummary } from './step.ts';
import { onReply } from './turns.ts';
import { onFacts } from './gate.ts';
import { onCandidateTested, onLanded, onLandRefused, onRebased, onTrunkTested } from '../lane/lane.ts';
import { escalate, onOperator } from './escalate.ts';
import { onRemoteFailed, onRemoteMoved, onRemoteWaited } from '../lane/remote.ts';
import { onPrFailed, onPrObserved, onPrWaited } from '../lane/pr.ts';
import { onOverrun, onProbed } from './liveness.ts';
import { schedule, stopWhenQuiet } from './schedule.ts';
import { onUsage } from './budget.ts';
import { onIssueWithdrawn } from './withdraw.ts';

export type { DecideContext } from './step.ts';

/** The pure step. */
export function decide(state: EngineState, input: TronEvent, ctx: DecideContext): { state: EngineState; decisions: EventBody[] } {
  const step = new Step(apply(state, input), input, ctx, state);
  if (step.s.finished) return { state: step.s, decisions: [] };
  if (input.type === 'run.failed') {
    // An effect failed: the engine cannot go on, and the run ends here — decided, so it replays.
    react(step, input);
    return { state: step.s, decisions: step.out };
  }
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
  // A reaction may have stopped the run (its budget spent): then nothing new is scheduled.
  if (step.s.stopping !== undefined) stopWhenQuiet(step);
  else schedule(step);
  return { state: step.s, decisions: step.out };
}

type Reaction<T extends EventType> = (step: Step, e: EventOf<T>) => void;

/** What each input sets off; inputs with nothing to react to are absent. */
const REACTIONS = {
  // A block given up while its worktree or its facts were on their way (withdraw.ts) stays given up.
  'worktree.ready': (step, e) => givenUp(step, e.block) || dispatch(step, e.block, 'build'),
  'worktree.failed': (step, e) =>
    givenUp(step, e.block) || escalate(step, e.block, 'worktree_failed', `its worktree could not be made: ${e.detail}`),
  'reply.received': onReply,
  'facts.observed': (step, e) => givenUp(step, e.block) || onFacts(step, e),
  'rebase.done': onRebased,
  'candidate.tested': onCandidateTested,
  'block.landed': onLanded,
  'land.refused': onLandRefused,
  'remote.moved': onRemoteMoved,
  'remote.failed': onRemoteFailed,
  'remote.waited': onRemoteWaited,
  'pr.observed': onPrObserved,
  'pr.failed': onPrFailed,
  'pr.waited': onPrWaited,
  'trunk.tested': onTrunkTested,
  'block.wrapped': (step, e) => step.move(e.block, 'wrapped'),
  'operator.answered': onOperator,
  'block.recovered': onRecovered,
  'timer.fired': onOverrun,
  'worker.probed': onProbed,
  'run.failed': (step, e) => finishRun(step, 'error', 1, e.detail),
  'usage.recorded': onUsage,
  'issue.withdrawn': onIssueWithdrawn,
} satisfies { [T in EventType]?: Reaction<T> };

function givenUp(step: Step, id: string): boolean {
  return step.s.blocks.get(id)?.phase === 'abandoned';
}

function react(step: Step, e: TronEvent): void {
  const reaction = (REACTIONS as { [T in EventType]?: Reaction<T> })[e.type] as Reaction<typeof e.type> | undefined;
  reaction?.(step, e as never);
}

/** Where a block from an earlier run resumes (see engine/runtime/recovery.ts). */
export function onRecovered(step: Step, e: BodyOf<'block.recovered'>): void {
  const b = step.block(e.block);
  if (e.phase === 'review' && e.sha) dispatch(step, b.id, 'review', e.sha);
  else if (e.phase === 'merge') step.emit({ type: 'merge.queued', block: b.id });
  else if (e.phase === 'wrap') step.emit({ type: 'wrap.requested', block: b.id, summary: wrapSummary(b) });
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
