/**
 * `npm run simulate -- [--seed N] [--runs K | --minutes M] [--workers W] [--mutation NAME]
 * [--replay FILE] [--out DIR]`: searches seeds N, N+1, … (the CI range by default: seeds
 * 1 to CI_SEEDS) across W worker threads, prints the steps, the rate, the coverage and
 * every violation — each shrunk to its smallest schedule, written to DIR as a replayable
 * case (.json) and as a SIM template (.toml). Exit 0 only when no invariant was violated
 * and every decision type and escalation row was reached (a mutation hunt exits 0 when
 * the mutation was caught). `--replay FILE` re-runs one written case and prints its log.
 */
import { availableParallelism } from 'node:os';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Coverage } from './coverage.ts';
import { type Case, rerun, search } from './search.ts';
import { describeSchedule, shrink } from './shrink.ts';
import { MUTATIONS, mutation } from './mutations.ts';
import { REAL } from './run.ts';
import { renderTemplate, unplayable } from './template.ts';

/**
 * The seed range `npm run simulate` checks by default, and CI with it: at least
 * CI_MIN_STEPS simulated steps (1,146,233 today), about 47 CPU-seconds — under half a
 * minute on both cores of the 2-core development machine when it is not shared.
 */
export const CI_SEEDS = 6500;
/** The CI range must simulate at least this many steps: a change to the world that shrinks its runs fails it. */
export const CI_MIN_STEPS = 1_000_000;

interface Slice {
  from: number;
  stride: number;
  runs?: number;
  ms?: number;
  mutation?: string;
  stopAtFirst: boolean;
}

interface SliceResult {
  seeds: number;
  steps: number;
  coverage: Record<string, [string, number][]>;
  failures: { case: Case; invariant: string; message: string }[];
}

/** One worker's share: every `stride`-th seed from `from`. */
function runSlice(s: Slice): SliceResult {
  const engine = s.mutation ? mutation(s.mutation).engine : REAL;
  const r = search({
    from: s.from,
    stride: s.stride,
    ...(s.runs !== undefined ? { runs: s.runs } : {}),
    ...(s.ms !== undefined ? { ms: s.ms } : {}),
    engine,
    stopAtFirst: s.stopAtFirst,
  });
  const failures = r.failures.map((f) => ({ case: f.case, invariant: f.violation!.invariant, message: f.violation!.message }));
  const { seeds, steps, coverage } = r;
  return { seeds, steps, coverage: dump(coverage), failures };
}

function dump(c: Coverage): SliceResult['coverage'] {
  return {
    decisions: [...c.decisions],
    inputs: [...c.inputs],
    transitions: [...c.transitions],
    escalations: [...c.escalations],
    faults: [...c.faults],
  };
}

function mergeInto(into: Coverage, from: Coverage | SliceResult['coverage']): void {
  const maps = from instanceof Coverage ? dump(from) : from;
  for (const key of ['decisions', 'inputs', 'transitions', 'escalations', 'faults'] as const) {
    for (const [k, n] of maps[key]!) into[key].set(k, (into[key].get(k) ?? 0) + n);
  }
}

export interface SimulateOptions {
  seed: number;
  runs?: number;
  minutes?: number;
  workers: number;
  mutation?: string;
  out?: string;
  print: (line: string) => void;
}

export interface Summary {
  seeds: number;
  steps: number;
  ms: number;
  coverage: Coverage;
  failures: SliceResult['failures'];
}

/** A worker thread's entry: tsx's loader, then this file (worker threads do not inherit the loader). */
function workerBoot(): URL {
  const code = `const { register } = await import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}); register(); await import(${JSON.stringify(import.meta.url)});`;
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

/** Runs the search across worker threads; resolves with the totals. */
export async function runSearch(o: SimulateOptions): Promise<Summary> {
  const started = performance.now();
  const ms = o.minutes !== undefined ? o.minutes * 60_000 : undefined;
  const runs = o.runs ?? (ms === undefined ? CI_SEEDS : undefined);
  const slices: Slice[] = Array.from({ length: o.workers }, (_, i) => ({
    from: o.seed + i,
    stride: o.workers,
    ...(runs !== undefined ? { runs: Math.ceil((runs - i) / o.workers) } : {}),
    ...(ms !== undefined ? { ms } : {}),
    ...(o.mutation ? { mutation: o.mutation } : {}),
    stopAtFirst: o.mutation !== undefined,
  }));
  const results =
    o.workers === 1
      ? [runSlice(slices[0]!)]
      : await Promise.all(
          slices.map(
            (slice) =>
              new Promise<SliceResult>((done, failed) => {
                const w = new Worker(workerBoot(), { workerData: slice });
                w.once('message', done);
                w.once('error', failed);
              }),
          ),
        );
  const coverage = new Coverage();
  for (const r of results) mergeInto(coverage, r.coverage);
  const failures = results.flatMap((r) => r.failures).sort((a, b) => a.case.seed - b.case.seed);
  return {
    seeds: results.reduce((n, r) => n + r.seeds, 0),
    steps: results.reduce((n, r) => n + r.steps, 0),
    ms: performance.now() - started,
    coverage,
    failures,
  };
}

/**
 * Shrinks a failure, prints the reproduction, and writes it (case and template) when
 * asked. Returns the name written and what of the run its template cannot play on real git.
 */
export function reproduce(
  f: SliceResult['failures'][number],
  o: { mutation?: string; out?: string; print: (line: string) => void },
): { name: string; unplayable: string[] } {
  const engine = o.mutation ? mutation(o.mutation).engine : REAL;
  const first = rerun(f.case, engine);
  const shrunk = shrink(first, engine);
  const v = shrunk.checked.violation!;
  const faults = describeSchedule(shrunk.case.choices, shrunk.checked.result.points);
  o.print(`\nseed ${f.case.seed}: ${f.invariant} — ${f.message.split('\n')[0]}`);
  o.print(`  shrunk from ${shrunk.before} to ${shrunk.after} fault(s) in ${shrunk.attempts} runs: ${v.message.split('\n')[0]}`);
  for (const line of faults) o.print(`    ${line}`);
  const name = `sim-${o.mutation ?? 'engine'}-${v.invariant}-${f.case.seed}`;
  const notPlayed = unplayable(rerun(shrunk.case, REAL).result);
  if (!o.out) return { name, unplayable: notPlayed };
  mkdirSync(o.out, { recursive: true });
  const caseFile = join(o.out, `${name}.json`);
  writeFileSync(
    caseFile,
    `${JSON.stringify({ ...shrunk.case, ...(o.mutation ? { mutation: o.mutation } : {}), invariant: v.invariant }, null, 1)}\n`,
  );
  writeFileSync(join(o.out, `${name}.toml`), renderTemplate(shrunk, { ...(o.mutation ? { mutation: o.mutation } : {}) }));
  o.print(`  written: ${caseFile} (npm run simulate -- --replay ${caseFile}) and ${name}.toml`);
  if (notPlayed.length > 0) o.print(`  the template cannot play on real git: ${notPlayed.join('; ')}`);
  return { name, unplayable: notPlayed };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      seed: { type: 'string', default: '1' },
      runs: { type: 'string' },
      minutes: { type: 'string' },
      workers: { type: 'string' },
      mutation: { type: 'string' },
      replay: { type: 'string' },
      out: { type: 'string' },
      coverage: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const print = (line: string) => console.log(line);
  if (values.replay) return replayCase(values.replay, print);
  const o: SimulateOptions = {
    seed: Number(values.seed),
    ...(values.runs !== undefined ? { runs: Number(values.runs) } : {}),
    ...(values.minutes !== undefined ? { minutes: Number(values.minutes) } : {}),
    workers: Number(values.workers ?? Math.min(2, availableParallelism())),
    ...(values.mutation ? { mutation: values.mutation } : {}),
    ...(values.out ? { out: resolve(values.out) } : {}),
    print,
  };
  if (o.mutation) mutation(o.mutation);
  const s = await runSearch(o);
  const rate = Math.round((s.steps / s.ms) * 1000);
  print(
    `${s.seeds} seeds from ${o.seed}, ${s.steps.toLocaleString('en-US')} steps in ${(s.ms / 1000).toFixed(1)} s ` +
      `(${rate.toLocaleString('en-US')} steps/s on ${o.workers} worker(s))${o.mutation ? `, mutation ${o.mutation}` : ''}`,
  );
  print(values.coverage ? `\n${s.coverage.render()}` : s.coverage.render().split('\n\n').at(-1)!);
  for (const f of s.failures.slice(0, 5)) reproduce(f, o);
  if (s.failures.length > 5) print(`\n… and ${s.failures.length - 5} more failing seed(s)`);
  if (o.mutation) return s.failures.length > 0 ? 0 : 1;
  if (s.failures.length === 0) print('no invariant violated');
  const ciRange = values.runs === undefined && values.minutes === undefined;
  const short = ciRange && s.steps < CI_MIN_STEPS;
  if (short)
    print(
      `the CI range simulated ${s.steps.toLocaleString('en-US')} steps, fewer than ${CI_MIN_STEPS.toLocaleString('en-US')}: raise CI_SEEDS`,
    );
  return s.failures.length === 0 && s.coverage.complete() && !short ? 0 : 1;
}

function replayCase(file: string, print: (line: string) => void): number {
  const c = JSON.parse(readFileSync(file, 'utf8')) as Case & { mutation?: string };
  const engine = c.mutation ? mutation(c.mutation).engine : REAL;
  const r = rerun(c, engine);
  r.result.logs.forEach((log, i) => {
    print(`--- start ${i + 1}`);
    for (const e of log) {
      const { v: _v, ts: _ts, ...rest } = e as unknown as Record<string, unknown>;
      print(JSON.stringify(rest));
    }
  });
  print(r.violation ? `\n${r.violation.invariant} at step ${r.violation.step}: ${r.violation.message}` : '\nno invariant violated');
  return r.violation ? 1 : 0;
}

if (!isMainThread && parentPort) parentPort.postMessage(runSlice(workerData as Slice));
else if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: Error) => {
      console.error(`simulate: ${err.message}`);
      process.exit(2);
    },
  );
}

export { MUTATIONS };
