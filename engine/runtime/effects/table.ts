/**
 * What every decision does outside the engine: one row per decision type, `null` where a
 * decision only records (a gate's verdict, a phase change). The engine's `perform` is a
 * lookup here; a new decision type does not compile until its row says what it does.
 */
import type { DecisionType, TronEvent } from '../../core/events.ts';
import type { Effect, Moment } from './context.ts';
import { observeFacts } from './gate.ts';
import { landStack, stackBlocks, testCandidate, testTrunk } from './lane.ts';
import { pushBranch, waitRetry } from './remote.ts';
import { askForge, waitForge } from './pr.ts';
import { extend, probe } from './liveness.ts';
import { page } from './page.ts';
import { stopBlockTurns, stopForBudget, stopReissued, turn } from './turn.ts';
import { prepareWorktree } from './worktree.ts';
import { wrapBlock } from './wrap.ts';
import { abandonBlock } from './work-ref.ts';

// biome-ignore lint/suspicious/noExplicitAny: each row's request type is its own; the engine hands it back to the same row.
export const EFFECTS: { [T in DecisionType]: Effect<T, any> | null } = {
  'run.finished': null,
  'worktree.requested': prepareWorktree,
  'block.dispatched': turn,
  'worker.unavailable': null,
  'turn.held': null,
  'reply.accepted': null,
  'reply.refused': null,
  'facts.requested': observeFacts,
  'gate.passed': pushBranch,
  'gate.failed': null,
  'block.phase': null,
  'merge.queued': null,
  'lane.stacked': stackBlocks,
  'candidate.requested': testCandidate,
  'bisect.step': testCandidate,
  'land.intent': landStack,
  'remote.retry': waitRetry,
  'pr.requested': askForge,
  'pr.wait': waitForge,
  'lane.closed': null,
  'test.requested': testTrunk,
  'wrap.requested': wrapBlock,
  'escalation.raised': page,
  'block.parked': stopBlockTurns,
  'block.abandoned': abandonBlock,
  'worker.overran': probe,
  'worker.extended': extend,
  'turn.reissued': stopReissued,
  'budget.exceeded': stopForBudget,
};

/** A decision and its job's input. */
export interface Job {
  decision: TronEvent;
  request: unknown;
}

/** The job a decision asks for: its request, built now and made JSON (a decision with no effect has none). */
export function jobOf(decision: TronEvent, at: Moment): Job {
  const effect = EFFECTS[decision.type as DecisionType];
  if (!effect) return { decision, request: undefined };
  const request = effect.request ? effect.request(decision as never, at) : decision;
  return { decision, request: JSON.parse(JSON.stringify(request)) };
}
