/**
 * What the simulated world does with each decision the core makes: one row per decision
 * type, so a decision type added to the core does not compile until the simulator says how
 * its world answers it.
 *
 * - `effect`: the world queues it and answers it later, in `execute` (answers.ts), whose
 *   switch is exhaustive over these rows — optionally only `when` the decision asks for one;
 * - `act`: the world acts on it at once (stops turns, resumes a paused one);
 * - `none`: nothing in this world answers it, and why. `reactions.test.ts` holds every
 *   `none` against the engine's own table of effects (engine/runtime/effects/table.ts): a
 *   decision the engine runs an effect for is `none` here only with the reason the world
 *   does without it.
 */
import type { DecisionType, EventOf } from '../../engine/core/events.ts';
import type { SimWorld } from './sim.ts';

type Reaction<T extends DecisionType> =
  | { readonly effect: true; readonly when?: (d: EventOf<T>) => boolean }
  | { readonly act: (sim: SimWorld, d: EventOf<T>) => void }
  | { readonly none: string };

/** The reason of a decision the engine itself runs no effect for (its row in EFFECTS is null). */
export const NO_EFFECT = 'the engine runs no effect for it';

const none = { none: NO_EFFECT } as const;
const effect = { effect: true } as const;

export const REACTIONS = {
  'run.finished': none,
  'worktree.requested': effect,
  'block.dispatched': effect,
  'worker.unavailable': none,
  'turn.held': none,
  'reply.accepted': none,
  'reply.refused': none,
  'facts.requested': effect,
  'gate.passed': {
    none: 'its effect keeps the work under refs/tron/work/ and pushes the branch only with [remote] push_branches; the world keeps no work refs and models no branch pushes',
  },
  'gate.failed': none,
  'block.phase': none,
  'merge.queued': none,
  'lane.stacked': effect,
  'candidate.requested': effect,
  'bisect.step': effect,
  'land.intent': effect,
  'remote.retry': effect,
  'pr.requested': effect,
  'pr.wait': effect,
  'lane.closed': none,
  'test.requested': effect,
  'wrap.requested': effect,
  // Only the operator's row pages; the architect's and the restater's are worker turns (block.dispatched).
  'escalation.raised': { effect: true, when: (d) => d.handler === 'operator' },
  'block.parked': { act: (sim, d) => sim.abort((t) => t.block === d.block) },
  'block.abandoned': { act: (sim, d) => sim.abort((t) => t.block === d.block) },
  'worker.overran': effect,
  'worker.extended': {
    act: (sim, d) => {
      const t = sim.turnItem(d.session, d.turn);
      if (t) {
        t.paused = false;
        t.hang -= 1;
      }
    },
  },
  'turn.reissued': { act: (sim, d) => sim.abort((t) => t.session === d.session && t.turn === d.turn) },
  'budget.exceeded': {
    act: (sim, d) => {
      if (d.scope === 'run') sim.abort(() => true);
    },
  },
} as const satisfies { [T in DecisionType]: Reaction<T> };

/** The decision types the world answers as effects: `execute`'s switch covers exactly these. */
export type SimEffect = { [T in DecisionType]: (typeof REACTIONS)[T] extends { effect: true } ? T : never }[DecisionType];

/** Whether `type` is a decision type (the rest of a log is inputs and notes, which the world does not react to). */
export function isDecision(type: string): type is DecisionType {
  return Object.hasOwn(REACTIONS, type);
}
