/** The merge lane: only the MERGE lock holder lands; trunk moved by someone else halts merges. */
import type { BodyOf } from '../events.ts';
import { releaseMerge, type Step, wrapSummary } from './step.ts';
import { dispatch } from './turns.ts';

export function onMergeObserved(step: Step, e: BodyOf<'merge.observed'>): void {
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

export function onTrunkTested(step: Step, e: BodyOf<'trunk.tested'>): void {
  const b = step.block(e.block);
  step.emit({ type: 'merge.unlocked', block: b.id });
  step.move(b.id, b.mergeVia ?? 'fast_forward');
  step.emit({ type: 'wrap.requested', block: b.id, summary: wrapSummary(step.block(b.id)) });
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

export function trunkTouched(step: Step, id: string, actual: string | null, detail: string): void {
  releaseMerge(step, id);
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
