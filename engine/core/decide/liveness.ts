/** Liveness — talk before you page: an overrun turn is probed, life earns an extension, silence a re-issue. */
import type { TurnKind } from '../state.ts';
import type { BodyOf } from '../events.ts';
import { pendingTurn, type Step } from './step.ts';
import { escalate } from './escalate.ts';

export function onOverrun(step: Step, e: BodyOf<'timer.fired'>): void {
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
export function onProbed(step: Step, e: BodyOf<'worker.probed'>): void {
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
