/**
 * The truth gate: facts the engine derived itself decide, never the worker's claim. Every
 * verdict of the gate — `gate.failed`, `gate.passed` — is decided here: on the facts of a
 * `>>DONE` (then the challenge), on the evidence of the `>>CONFIRMED` that answers it, and
 * on the facts of a `>>MERGED` head.
 */
import type { BodyOf } from '../events.ts';
import { deriveFacts, evidenceProblem, type Expected } from '../facts.ts';
import type { BlockState } from '../state.ts';
import { dispatch, type Step } from './step.ts';
import { escalate } from './escalate.ts';
import { pageAndPark } from '../lane/lane.ts';

/** What the facts of block `b` are measured against: the engine's own record, never the worker's word. */
function expectations(step: Step, b: BlockState): Expected {
  return {
    trunkSha: step.s.trunkSha!,
    mainStatus: step.s.mainStatus,
    trunkAllowed: step.s.trunkHistory.since(b.factsTrunk || undefined),
    ...(step.ctx.testCommand ? { testCommand: step.ctx.testCommand } : {}),
    ...(b.gitFiles ? { gitFiles: b.gitFiles } : {}),
    ...(b.rejected ? { rejected: b.rejected } : {}),
  };
}

/**
 * The facts of a block's head, observed by the engine in checkouts it owns: after a
 * `>>DONE` (`gate`: measured against the block's base) or a `>>MERGED` (`merge`: against
 * trunk now).
 */
export function askFacts(step: Step, id: string, purpose: 'gate' | 'merge'): void {
  const base = purpose === 'gate' ? step.block(id).base! : step.s.trunkSha!;
  step.emit({ type: 'facts.requested', block: id, purpose, base, trunk_sha: step.s.trunkSha! });
}

export function onFacts(step: Step, e: BodyOf<'facts.observed'>): void {
  const b = step.block(e.block);
  const facts = deriveFacts(e as never, expectations(step, b));
  const failed = facts.filter((f) => !f.ok);
  if (failed.some((f) => f.name === 'trunk_untouched')) {
    step.emit({ type: 'gate.failed', block: b.id, sha: e.head, purpose: e.purpose, facts });
    pageAndPark(step, b.id, 'trunk_touched', failed.find((f) => f.name === 'trunk_untouched')!.evidence, e.trunk_sha);
    return;
  }
  const engineFiles = failed.find((f) => f.name === 'engine_files_untouched');
  if (engineFiles) {
    // A branch that rewrites the engine's config or its blocks never lands on a worker's
    // word, nor on a second try by the same worker: the operator decides.
    step.emit({ type: 'gate.failed', block: b.id, sha: e.head, purpose: e.purpose, facts });
    escalate(step, b.id, 'engine_files', `${short(e.head)}: ${engineFiles.evidence}`);
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

/**
 * The builder's `>>CONFIRMED`, answering the challenge: evidence for every criterion passes
 * the gate at the sha challenged, with the facts observed there; anything less fails it.
 */
export function onEvidence(step: Step, id: string, evidence: Record<string, string>): void {
  const b = step.block(id);
  const problem = evidenceProblem(evidence, b.info.criteria);
  const sha = b.challenged!;
  if (problem) {
    step.emit({ type: 'gate.failed', block: id, sha, purpose: 'evidence', facts: [{ name: 'evidence', ok: false, evidence: problem }] });
    afterGateFailure(step, id, 'build');
    return;
  }
  const facts = b.observed ? deriveFacts(b.observed, expectations(step, b)) : [];
  facts.push({ name: 'evidence', ok: true, evidence: `evidence given for all ${b.info.criteria.length} criteria` });
  step.emit({ type: 'gate.passed', block: id, sha, facts });
  step.move(id, 'CONFIRMED');
  dispatch(step, id, 'review', sha);
}

const short = (sha: string) => sha.slice(0, 12);

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
