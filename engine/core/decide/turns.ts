/** Worker turns: dispatching them, and acting on a reply through the gateway (never guessed at). */
import type { PendingTurn, TurnKind } from '../state.ts';
import type { BodyOf } from '../events.ts';
import { parseReply } from '../../gateway/parse.ts';
import { deriveFacts, evidenceProblem } from '../facts.ts';
import type { Trouble } from '../../spine/spine.ts';
import type { Word } from '../../gateway/glossary.ts';
import { EXPECT, sessionOf, type Step } from './step.ts';
import { afterGateFailure, expectations } from './gate.ts';
import { abandon, escalate, retry } from './escalate.ts';

/** Issue a turn of `kind` for the block, in the session its role keeps for this attempt. */
export function dispatch(step: Step, id: string, kind: Exclude<TurnKind, 'restate' | 'architect'>, sha?: string): void {
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

export function onReply(step: Step, e: BodyOf<'reply.received'>): void {
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
export function troubleWithReply(step: Step, id: string, pending: PendingTurn, trouble: Trouble, message: string): void {
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

export function act(step: Step, id: string, word: Word, payload: Record<string, unknown>): void {
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
