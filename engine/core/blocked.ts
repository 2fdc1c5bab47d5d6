/**
 * Blocked: a block that waits on a dependency that did not land and will not in this run
 * without someone's say — the dependency is parked for the operator, was abandoned, or is
 * itself blocked. It is not the operator's to answer (an answer to it changes nothing
 * while its dependency stays where it is), so every view tells it apart from a block
 * parked for the operator and names the dependency. A block whose dependency was
 * abandoned is still parked in the fold, with its reason (DESIGN: "parked with a
 * reason"); this is how the views see that it waits on the dependency. Derived from the
 * fold, so old logs read the same way.
 */
import type { EngineState } from './state.ts';

/** The dependency a blocked block waits on, and where that dependency is. */
export interface Blocker {
  /** The direct dependency that did not land. */
  dependency: string;
  /** Where it is: parked for the operator, abandoned, or blocked in turn. */
  is: 'parked' | 'abandoned' | 'blocked';
}

/**
 * Why `id` is blocked, or undefined when it is not: a pending or parked block with a
 * dependency that is abandoned, parked, or blocked in turn (first in `depends_on` order).
 * A block parked for its own trouble had every dependency landed before it ran, so a
 * parked block with a dependency that did not land was parked because of it.
 */
export function blockedBy(s: EngineState, id: string, seen: Set<string> = new Set()): Blocker | undefined {
  const b = s.blocks.get(id);
  if (!b || (b.phase !== 'pending' && b.phase !== 'parked') || seen.has(id)) return undefined;
  seen.add(id);
  for (const dependency of b.info.depends_on) {
    const dep = s.blocks.get(dependency);
    if (!dep) continue;
    if (dep.phase === 'abandoned') return { dependency, is: 'abandoned' };
    if (blockedBy(s, dependency, seen)) return { dependency, is: 'blocked' };
    if (dep.phase === 'parked') return { dependency, is: 'parked' };
  }
  return undefined;
}

/** "waits on subtract, which is parked for the operator": a blocker in words, for every view. */
export function blockerWords(blocker: Blocker): string {
  const where =
    blocker.is === 'parked'
      ? 'which is parked for the operator; it runs once that lands'
      : blocker.is === 'abandoned'
        ? 'which was abandoned; it cannot run unless that dependency is removed from its depends_on'
        : 'which is blocked in turn';
  return `waits on ${blocker.dependency}, ${where}`;
}
