/**
 * The lane with a remote ([remote]; DESIGN §3): a landing is one atomic push, leased on
 * the remote's trunk. What comes back is decided here, purely:
 *
 * - `remote.moved` — someone else pushed: local trunk already followed the remote's (the
 *   fold), and the stack closes with its blocks back at the front of the queue, so the
 *   lane stacks them again on the new trunk, tests the new top and pushes again. The
 *   other pusher's commits are never lost: the new stack is built on top of them.
 * - `remote.failed`, transient — tried again after a backoff that doubles each time
 *   (`remote.retry`, whose effect is the wait; `remote.waited` brings the lane back here),
 *   up to `[remote] retries` times; then, and at once for a refusal that will not pass by
 *   itself, the operator is paged with the remote's words and code, and the lane halts
 *   until they answer.
 * - A failed fetch before stacking changes nothing: the stack goes on from local trunk,
 *   and the push's lease still refuses it if the remote moved meanwhile.
 */
import type { BodyOf } from '../events.ts';
import type { Step } from '../decide/step.ts';
import { arrivedAt, close, pageAndPark } from './lane.ts';

export function onRemoteMoved(step: Step, e: BodyOf<'remote.moved'>): void {
  if (arrivedAt(step, e.stack) !== 'landing') return;
  close(step, `${e.detail}; the stack is built again on ${e.sha.slice(0, 12)}`);
}

export function onRemoteFailed(step: Step, e: BodyOf<'remote.failed'>): void {
  const stack = step.s.lane.stack;
  if (e.op !== 'push' || !stack || arrivedAt(step, e.stack) !== 'landing') return;
  const retries = step.s.lane.remote?.retries ?? 0;
  if (e.kind === 'transient' && e.attempt <= retries) {
    const backoff = step.s.lane.remote?.backoffMs ?? 0;
    step.emit({ type: 'remote.retry', stack: e.stack, attempt: e.attempt, wait_ms: backoff * 2 ** (e.attempt - 1) });
    return;
  }
  const landing = stack.step.at === 'landing' ? stack.step.blocks : [];
  const id = landing[0] ?? stack.asked[0]!;
  const tries = e.kind === 'transient' ? ` (after ${e.attempt} tries)` : '';
  const detail = `${e.code}: the remote refused the landing of ${landing.join(', ')}${tries} (${e.reason}); it said:\n${e.message}`;
  pageAndPark(step, id, 'remote_refused', detail);
  close(step, `the remote refused the landing (${e.code}); nothing landed`);
}

/** The backoff passed: the same landing is pushed again, from trunk as it is now. */
export function onRemoteWaited(step: Step, e: BodyOf<'remote.waited'>): void {
  const stack = step.s.lane.stack;
  if (stack?.id !== e.stack || stack.step.at !== 'landing') return;
  const { queuedTop, tested } = stack.step;
  const blocks = stack.entries.slice(0, stack.step.blocks.length);
  const sha = queuedTop ?? blocks.at(-1)!.sha;
  const queued = queuedTop !== undefined && { queued: true };
  step.emit({ type: 'land.intent', stack: stack.id, sha, from: step.s.trunkSha!, blocks, attempt: e.attempt + 1, tested, ...queued });
}
