/**
 * Searching seeds: each seed is one simulated run (run.ts) plus its crash-convergence
 * check — the same schedule with the engine killed at a step chosen by the seed, against
 * the same schedule without the kill, both continuing in a world that turns nominal at
 * that step (every turn honest, every page answered). "Same outcome" is then well
 * defined whatever the world's randomness: the two runs share every fault before the
 * step and none after it, so they must end with the same blocks landed (once each) and
 * the same abandoned.
 */
import { clusterRun } from './cluster.ts';
import { Coverage } from './coverage.ts';
import { Rng } from './prng.ts';
import { REAL, type Engine, type RunResult, simulate, type Violation } from './run.ts';

/** A reproducible case: a seed's schedule, and the step of its convergence check (if that is what failed). */
export interface Case {
  seed: number;
  choices: readonly number[];
  /** The convergence check's crash step; absent: the run itself. */
  crashAt?: number;
}

export interface Checked {
  result: RunResult;
  violation?: Violation;
  case: Case;
  /** Steps simulated, over the run and its convergence pair. */
  steps: number;
}

/** One seed: its run, then (when the run held) its crash-convergence check. */
export function checkSeed(seed: number, engine: Engine = REAL, coverage?: Coverage): Checked {
  const result = simulate({ seed, engine, ...(coverage ? { coverage } : {}) });
  if (result.violation) return { result, violation: result.violation, case: { seed, choices: result.choices }, steps: result.steps };
  if (result.steps < 8) return { result, case: { seed, choices: result.choices }, steps: result.steps };
  const crashAt = 5 + new Rng(seed ^ 0x5eed).below(result.steps - 5);
  const pair = convergence({ seed, choices: result.choices, crashAt }, engine, coverage);
  return { result, ...(pair.violation ? { violation: pair.violation } : {}), case: pair.case, steps: result.steps + pair.steps };
}

/** The crash-convergence pair of a case: crashed at `crashAt`, and not. */
export function convergence(c: Case & { crashAt: number }, engine: Engine = REAL, coverage?: Coverage): Checked {
  const base = { seed: c.seed, script: c.choices, engine, nominalFrom: c.crashAt, ...(coverage ? { coverage } : {}) };
  const calm = simulate(base);
  const crashed = simulate({ ...base, crashAt: c.crashAt });
  const steps = calm.steps + crashed.steps;
  const out = { result: crashed, case: c, steps };
  if (calm.violation) return { ...out, result: calm, violation: calm.violation };
  if (crashed.violation) return { ...out, violation: crashed.violation };
  if (calm.reason !== 'done' || crashed.reason !== 'done') return out;
  const same = (a: string[], b: string[]) => a.join() === b.join();
  if (!same(calm.landed, crashed.landed) || !same(calm.abandoned, crashed.abandoned)) {
    const message =
      `killed at step ${c.crashAt}, the run ended with landed [${crashed.landed}] abandoned [${crashed.abandoned}]; ` +
      `without the kill, landed [${calm.landed}] abandoned [${calm.abandoned}]`;
    return { ...out, violation: { invariant: 'crash-converges', message, step: c.crashAt } };
  }
  return out;
}

/** Re-runs a case: its violation, if it still has one. */
export function rerun(c: Case, engine: Engine = REAL): Checked {
  if (c.crashAt !== undefined) return convergence({ ...c, crashAt: c.crashAt }, engine);
  const result = simulate({ seed: c.seed, script: c.choices, engine });
  return { result, ...(result.violation ? { violation: result.violation } : {}), case: c, steps: result.steps };
}

export interface SearchOptions {
  from: number;
  /** Every `stride`-th seed from `from` (workers share a range this way); 1 by default. */
  stride?: number;
  /** Where to count what the runs reached (a fresh one by default). */
  coverage?: Coverage;
  /** Seeds to run (from, from+1, …); or until `ms` of wall time have passed, whichever comes first. */
  runs?: number;
  ms?: number;
  engine?: Engine;
  /** Stop at the first violation (a mutation hunt) rather than collecting them. */
  stopAtFirst?: boolean;
  /** Pass over the seeds that run on a cluster (cluster.ts): a SIM template plays none of them. */
  withoutCluster?: boolean;
  now?: () => number;
}

export interface SearchResult {
  seeds: number;
  steps: number;
  ms: number;
  coverage: Coverage;
  failures: Checked[];
}

/** Runs seeds from `from` on, within the run count or the time budget. */
export function search(o: SearchOptions): SearchResult {
  const now = o.now ?? (() => performance.now());
  const coverage = o.coverage ?? new Coverage();
  const started = now();
  const failures: Checked[] = [];
  let steps = 0;
  let seeds = 0;
  for (let seed = o.from; ; seed += o.stride ?? 1) {
    if (o.runs !== undefined && seeds >= o.runs) break;
    if (o.ms !== undefined && (seeds & 15) === 0 && now() - started >= o.ms) break;
    if (o.withoutCluster && clusterRun(seed)) {
      seeds += 1;
      continue;
    }
    const checked = checkSeed(seed, o.engine ?? REAL, coverage);
    seeds += 1;
    steps += checked.steps;
    if (checked.violation) {
      failures.push(checked);
      if (o.stopAtFirst) break;
    }
  }
  return { seeds, steps, ms: now() - started, coverage, failures };
}
