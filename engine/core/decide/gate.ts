/** The truth gate: facts the engine derived itself decide, never the worker's claim. */
import type { BodyOf } from '../events.ts';
import { deriveFacts } from '../facts.ts';
import type { Step } from './step.ts';
import { dispatch } from './turns.ts';
import { escalate } from './escalate.ts';
import { trunkTouched } from './merge.ts';

export function expectations(step: Step, since?: string) {
  return {
    trunkSha: step.s.trunkSha!,
    mainStatus: step.s.mainStatus,
    trunkAllowed: step.s.trunkHistory.since(since || undefined),
    ...(step.ctx.testCommand ? { testCommand: step.ctx.testCommand } : {}),
  };
}

export function onFacts(step: Step, e: BodyOf<'facts.observed'>): void {
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
  // A MERGED head that holds every fact enters the lane like any other, if the patch is what review saw.
  const unchanged = e.patch_id === b.patchId;
  step.emit({ type: 'gate.passed', block: b.id, sha: e.head, facts });
  if (unchanged) {
    step.emit({ type: 'merge.queued', block: b.id });
    return;
  }
  step.move(b.id, 'patch.changed');
  dispatch(step, b.id, 'review', e.head);
}

/** Back to the phase with the failing fact stated, or escalation past the budget. */
export function afterGateFailure(step: Step, id: string, phase: 'build' | 'merge'): void {
  const b = step.block(id);
  if (b.rounds[phase] >= step.budget(phase)) {
    escalate(step, id, phase === 'build' ? 'gate_budget' : 'merge_failed', `the gate failed ${b.rounds[phase]} times:\n${b.feedback}`);
    return;
  }
  step.move(id, 'gate.failed');
  dispatch(step, id, phase);
}
