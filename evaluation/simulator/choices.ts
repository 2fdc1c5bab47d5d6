/**
 * Every choice the simulated world makes is drawn here, at a named point, from a table of
 * outcomes whose first is the nominal one (0: the world behaves). A run records the
 * values it drew: replaying that list reproduces the run exactly, and a list with more
 * zeros is a run with fewer faults — which is how a failing run is shrunk (shrink.ts).
 * Past the end of a list, every choice is nominal.
 */
import type { Rng } from './prng.ts';

/** The outcomes of each choice point, with their weights; the first is nominal. */
export const POINTS = {
  // the run's shape
  blocks: [
    ['2', 30],
    ['1', 10],
    ['3', 25],
    ['4', 20],
    ['6', 15],
  ],
  dep: [
    ['none', 50],
    ['previous', 30],
    ['earlier', 20],
  ],
  parallel: [
    ['2', 40],
    ['1', 20],
    ['4', 40],
  ],
  batch: [
    ['4', 40],
    ['1', 20],
    ['2', 40],
  ],
  verify: [
    ['no', 70],
    ['yes', 30],
  ],
  gather: [
    ['no', 70],
    ['yes', 30],
  ],
  'has-architect': [
    ['yes', 70],
    ['no', 30],
  ],
  budgets: [
    ['none', 70],
    ['block', 15],
    ['run', 8],
    ['both', 7],
  ],
  // Who else moves trunk, and where it lives: local trunk (teammates push to it), or a
  // remote ([remote]: teammates push there, and a landing is a push).
  teammates: [
    ['no', 45],
    ['yes', 20],
    ['remote', 15],
    ['remote-and-teammates', 20],
  ],
  // How a landing goes, in a run with a remote (drawn last, only then): pushed straight, or
  // through a pull request whose hosted checks must be green first ([forge] land = "pr"),
  // with or without a person's approving review.
  forge: [
    ['push', 50],
    ['pr', 35],
    ['pr-approval', 15],
  ],
  // between steps
  crash: [
    ['none', 9960],
    ['before-effect', 15],
    ['after-effect', 15],
    ['torn-write', 10],
  ],
  external: [
    ['none', 9960],
    ['teammate-push', 25],
    ['signal', 8],
    ['effect-fails', 7],
    ['plant-ref', 10],
  ],
  // the cluster around the engine (cluster runs only: cluster.ts)
  cluster: [
    ['none', 9865],
    ['agent-dies', 30],
    ['hostile-agent', 15],
    ['neighbour-steps', 45],
    ['pause-leader', 20],
    ['db-restart', 15],
    ['cut-off', 10],
  ],
  // A torn write in a cluster run: the batch is one commit, lost whole or committed with its answer lost.
  commit: [
    ['unknown', 50],
    ['lost', 50],
  ],
  // worker turns
  build: [
    ['done', 700],
    ['done-red-tests', 60],
    ['done-no-commits', 40],
    ['done-uncommitted', 30],
    ['done-engine-files', 8],
    ['blocked', 20],
    ['garbage', 30],
    ['two-lines', 15],
    ['illegal-word', 10],
    ['fails', 25],
    ['fails-auth', 25],
    ['hangs', 30],
    ['silent', 15],
    ['overspends', 10],
  ],
  challenge: [
    ['confirmed', 850],
    ['no-evidence', 50],
    ['garbage', 30],
    ['fails', 30],
    ['hangs', 20],
    ['silent', 10],
    ['blocked', 10],
  ],
  review: [
    ['approve', 700],
    ['changes', 150],
    ['garbage', 30],
    ['fails', 30],
    ['fails-auth', 15],
    ['hangs', 20],
    ['silent', 10],
  ],
  merge: [
    ['merged', 700],
    ['merged-without-rebase', 350],
    ['blocked', 40],
    ['garbage', 40],
    ['fails', 40],
    ['hangs', 20],
  ],
  architect: [
    ['retry', 600],
    ['page', 150],
    ['abandon', 100],
    ['garbage', 80],
    ['fails', 70],
  ],
  restate: [
    ['restated', 800],
    ['garbage-again', 120],
    ['fails', 80],
  ],
  // effects
  test: [
    ['as-tree', 940],
    ['flaky-red', 40],
    ['timeout', 20],
  ],
  rebase: [
    ['clean', 850],
    ['changed', 50],
    ['conflict', 140],
    ['red-in-stack', 40],
  ],
  // the remote ([remote] runs only)
  fetch: [
    ['ok', 950],
    ['unreachable', 50],
  ],
  push: [
    ['accepted', 860],
    ['unreachable', 80],
    ['answer-lost', 30],
    ['refused', 30],
  ],
  // the forge ([forge] land = "pr" runs only): what one ask about a landing's pull request finds
  pr: [
    ['green', 760],
    ['checks-red', 50],
    ['checks-pending', 60],
    ['checks-missing', 30],
    ['changes-requested', 30],
    ['closed', 10],
    ['unapproved', 30],
    ['rate-limited', 20],
    ['transient', 10],
    ['auth', 4],
  ],
  operator: [
    ['prompt', 700],
    ['late', 250],
    ['never', 50],
  ],
  answer: [
    ['RETRY', 850],
    ['ABANDON', 150],
  ],
} as const satisfies Record<string, readonly (readonly [string, number])[]>;
export type Point = keyof typeof POINTS;

const TOTALS = Object.fromEntries(Object.entries(POINTS).map(([k, v]) => [k, v.reduce((n, [, w]) => n + w, 0)])) as Record<Point, number>;

/** Where the choices come from: a generator (recording), or a recorded list (a reproduction). */
export class Chooser {
  /** The values drawn, in order: the run's whole schedule. */
  readonly values: number[] = [];
  /** The point of each value (for naming faults in a reproduction). */
  readonly points: string[] = [];
  /** From now on every choice is nominal (the crash-convergence check's continuation). */
  nominal = false;
  /** Faults reached: `point:outcome` → count. */
  readonly faults = new Map<string, number>();

  constructor(
    private readonly rng: Rng | undefined,
    private readonly script: readonly number[] | undefined,
  ) {}

  /** One outcome of `point`, by its table. */
  pick<P extends Point>(point: P): (typeof POINTS)[P][number][0] {
    const table = POINTS[point];
    const v = this.draw(point, table.length, () => {
      let r = this.rng!.below(TOTALS[point]);
      for (let i = 0; i < table.length; i += 1) {
        r -= table[i]![1];
        if (r < 0) return i;
      }
      return 0;
    });
    const label = table[v]![0];
    if (v !== 0) {
      const key = `${point}:${label}`;
      this.faults.set(key, (this.faults.get(key) ?? 0) + 1);
    }
    return label as (typeof POINTS)[P][number][0];
  }

  /** Which of `n` things (0: the first; mostly the first). */
  index(point: string, n: number): number {
    if (n <= 1) return 0;
    return this.draw(point, n, () => (this.rng!.below(2) === 0 ? 0 : this.rng!.below(n)));
  }

  /** A number in [0, n) that is not a fault (a delay, a size): still part of the schedule. */
  amount(point: string, n: number): number {
    return this.draw(point, n, () => this.rng!.below(n));
  }

  private draw(point: string, n: number, generate: () => number): number {
    let v = 0;
    if (!this.nominal) {
      const i = this.values.length;
      if (this.script) v = Math.min(this.script[i] ?? 0, n - 1);
      else v = generate();
    }
    this.values.push(v);
    this.points.push(point);
    return v;
  }
}
