/** Worker turns: dispatching them, and acting on a reply through the gateway (never guessed at). */
import type { PendingTurn } from '../state.ts';
import type { BodyOf } from '../events.ts';
import { parseReply, type Reply } from '../../gateway/parse.ts';
import type { Trouble } from '../../spine/spine.ts';
import type { PayloadOf, Word } from '../../gateway/glossary.ts';
import { dispatch, type Step } from './step.ts';
import { askFacts, onEvidence } from './gate.ts';
import { abandon, escalate, retry } from './escalate.ts';

export function onReply(step: Step, e: BodyOf<'reply.received'>): void {
  const b = step.block(e.block);
  if (b.waiting.on !== 'turn' || b.waiting.turn.session !== e.session || b.waiting.turn.turn !== e.turn) return; // a stale reply
  const pending = b.waiting.turn;
  if (!e.ok) {
    const message = `the turn failed (${e.failure ?? 'unknown'}): ${e.detail ?? ''}`.trim();
    step.emit({ type: 'reply.refused', block: b.id, session: e.session, turn: e.turn, kind: 'turn_failed', message });
    const health = step.s.workers[pending.role];
    if (e.cause && health && health.cause === e.cause && health.streak >= 2) {
      // The worker failed the way its previous turn failed: the worker is down, not the block.
      const detail = `the ${pending.role} worker failed twice in a row (${e.cause}): ${e.detail ?? e.failure ?? ''}`.trim();
      step.emit({ type: 'worker.unavailable', block: b.id, role: pending.role, cause: e.cause, detail });
      escalate(step, b.id, 'worker_unavailable', `${detail}; no ${pending.role} turn starts until you answer`);
      return;
    }
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
  const payload: Record<string, unknown> = parsed.payload ?? {};
  step.emit({ type: 'reply.accepted', block: b.id, session: e.session, turn: e.turn, word: parsed.word, payload });
  act(step, b.id, parsed);
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

type Act<W extends Word> = (step: Step, id: string, payload: PayloadOf<W>) => void;

/** What the engine does with each accepted word: one row per glossary word, typed by its payload. */
const ACTS: { [W in Word]: Act<W> } = {
  // The builder's word opens the gate; the gate's file decides (gate.ts).
  DONE: (step, id) => askFacts(step, id, 'gate'),
  CONFIRMED: (step, id, payload) => onEvidence(step, id, payload.evidence),
  BLOCKED: (step, id, payload) => escalate(step, id, 'blocked', payload.reason),
  APPROVE: (step, id) => {
    step.move(id, 'APPROVE');
    step.emit({ type: 'merge.queued', block: id });
  },
  CHANGES: (step, id, payload) => {
    const b = step.block(id);
    if (b.rounds.review + 1 >= step.budget('review')) {
      escalate(step, id, 'review_budget', `the reviewer asked for changes ${b.rounds.review + 1} times: ${payload.notes}`);
      return;
    }
    step.move(id, 'CHANGES');
    dispatch(step, id, 'build');
  },
  MERGED: (step, id) => askFacts(step, id, 'merge'),
  RETRY: (step, id) => retry(step, id, 'RETRY'),
  ABANDON: (step, id, payload) => abandon(step, id, payload.reason),
  PAGE: (step, id, payload) => {
    const b = step.block(id);
    // The page carries what the architect was asked about — a failing test's own lines — and not only its verdict.
    const asked =
      b.trouble && b.trouble.detail !== '' ? `\n\nwhat it was asked about (${b.trouble.trouble}):\n${bounded(b.trouble.detail)}` : '';
    escalate(step, id, b.trouble ? b.trouble.trouble : 'blocked', `${payload.reason}${asked}`, { to: 'operator' });
  },
  // The answer to a liveness probe: life, handled by the liveness timers, nothing to act on.
  WORKING: () => {},
};

/** Lines of an earlier trouble's detail a page carries, and characters. */
const CARRIED_LINES = 24;
const CARRIED_CHARS = 2000;
/** Of those, the last lines kept. */
const TAIL = 6;

/** A detail cut to what a page shows: its first lines and its last ones where it is longer. */
function bounded(detail: string): string {
  const lines = detail.split('\n');
  // A failure's own words come first (the assertion, then its stack); the runner's summary last.
  const kept =
    lines.length > CARRIED_LINES
      ? [...lines.slice(0, CARRIED_LINES - TAIL), `… (${lines.length - CARRIED_LINES} lines left out)`, ...lines.slice(-TAIL)]
      : lines;
  const text = kept.join('\n');
  return text.length > CARRIED_CHARS ? `${text.slice(0, CARRIED_CHARS)}…` : text;
}

/** Acts on one accepted reply. */
export function act(step: Step, id: string, reply: Reply): void {
  (ACTS[reply.word] as Act<typeof reply.word>)(step, id, reply.payload as never);
}
