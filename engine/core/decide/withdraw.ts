/**
 * A person withdraws a block on the forge ([intake]): they close its issue, or take the
 * intake label off it, while the block is under way. The poll (or a webhook's early poll)
 * sees the issue leave the labelled list and records `issue.withdrawn` — the decision path
 * learns it only as that input, never by asking the forge itself.
 *
 * The block is abandoned, with the person's action (and their last comment) as the
 * reason — the same as a pull request a person closes (pr.ts): closing an issue says
 * "not this", and an abandoned block is what tron's report and its dependents' parking
 * already know how to tell. Its running turn is stopped (block.abandoned's effect); a
 * stack it is in is given up — at once when it waits on its pull request, else once the
 * stack's rebase or test under way has reported (lane.ts settleStack: never under it) —
 * the other blocks going back to the queue.
 *
 * Nothing changes for a block that has landed (tron closes a landed block's issue itself),
 * was given up already, or whose landing is under way (trunk may already have moved: the
 * landing is recorded as it went).
 */
import type { BodyOf } from '../events.ts';
import { abandon } from './escalate.ts';
import { close } from '../lane/lane.ts';
import { TERMINAL, type Step } from './step.ts';

export function onIssueWithdrawn(step: Step, e: BodyOf<'issue.withdrawn'>): void {
  const b = step.s.blocks.get(e.block);
  if (!b || TERMINAL.has(b.phase) || b.phase === 'wrap') return;
  const stack = step.s.lane.stack;
  if (stack?.asked.includes(e.block) && stack.step.at === 'landing') return;
  const said = e.words ? ` (the last comment there, ${e.words})` : '';
  const reason =
    e.action === 'closed'
      ? `${e.by ?? 'a person'} closed its issue #${e.issue}${said}`
      : `the intake label was taken off its issue #${e.issue}${said}`;
  abandon(step, e.block, reason);
  // A stack waiting on its pull request has nothing under way in the lane's checkout: given up at once.
  if (stack?.asked.includes(e.block) && stack.step.at === 'forge')
    close(step, `${e.block} withdrawn on the forge (issue #${e.issue} ${e.action})`);
}
