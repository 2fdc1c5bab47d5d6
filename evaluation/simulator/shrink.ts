/**
 * A failing seed is a reproduction: its schedule (the list of choices the world drew) is
 * shrunk to the fewest faults that still break the same invariant. A choice set to 0 is
 * the nominal outcome, and choices past the end of the list are 0, so shrinking is: cut
 * the list as short as it will go, then set each remaining fault to 0 where the failure
 * holds without it — until nothing more can go (or the attempt budget is spent).
 */
import { type Case, type Checked, rerun } from './search.ts';
import { POINTS, type Point } from './choices.ts';
import type { Engine } from './run.ts';

export interface Shrunk {
  case: Case;
  checked: Checked;
  /** Runs tried while shrinking. */
  attempts: number;
  /** Faults (non-nominal choices) before and after. */
  before: number;
  after: number;
}

const faults = (choices: readonly number[]) => choices.reduce((n, v) => n + (v !== 0 ? 1 : 0), 0);

/** Shrinks a failing case, keeping the invariant it breaks. */
export function shrink(failing: Checked, engine: Engine, maxAttempts = 3000): Shrunk {
  const invariant = failing.violation!.invariant;
  let best = failing;
  let choices = [...failing.case.choices];
  let attempts = 0;
  const holds = (candidate: number[]): Checked | undefined => {
    attempts += 1;
    const r = rerun({ ...failing.case, choices: candidate }, engine);
    return r.violation?.invariant === invariant ? r : undefined;
  };
  // Shortest prefix: halve the cut while the failure survives it.
  let hi = choices.length;
  let lo = 0;
  while (lo < hi && attempts < maxAttempts) {
    const mid = Math.floor((lo + hi) / 2);
    const r = holds(choices.slice(0, mid));
    if (r) {
      hi = mid;
      best = r;
    } else lo = mid + 1;
  }
  choices = choices.slice(0, hi);
  // Each fault, last first: gone where the failure holds without it.
  for (let changed = true; changed && attempts < maxAttempts; ) {
    changed = false;
    for (let i = choices.length - 1; i >= 0 && attempts < maxAttempts; i -= 1) {
      if (choices[i] === 0) continue;
      const candidate = [...choices];
      candidate[i] = 0;
      const r = holds(candidate);
      if (r) {
        choices = candidate;
        best = r;
        changed = true;
      }
    }
    while (choices.length > 0 && choices.at(-1) === 0) choices.pop();
  }
  return { case: { ...failing.case, choices }, checked: best, attempts, before: faults(failing.case.choices), after: faults(choices) };
}

/** The faults of a schedule, named: `#index point=outcome` for every non-nominal choice. */
export function describeSchedule(choices: readonly number[], points: readonly string[]): string[] {
  const out: string[] = [];
  choices.forEach((v, i) => {
    if (v === 0) return;
    const point = points[i] ?? '?';
    const table = (POINTS as Record<string, readonly (readonly [string, number])[]>)[point as Point];
    out.push(`#${i} ${point}=${table ? (table[v]?.[0] ?? v) : v}`);
  });
  return out;
}
