/**
 * The merge lane's benchmark (part of `npm run bench`): whole `tron start` runs on real
 * git, with `command` workers that build at once (a shell script writes a file, commits,
 * answers DONE, then CONFIRMED; the reviewer APPROVEs) and a real `node --test` suite
 * whose cost does not grow with the blocks. It prints, from the runs' events:
 *
 * - wall time per block at 10 and 40 independent blocks (max_parallel 4) — goal: at 40
 *   within 1.1× of at 10 (the lane must not be the bottleneck);
 * - the share of the run the lane was busy: the union, over the run, of every stack's
 *   lane.stacked → lane.closed — goal: ≤ 30%;
 * - builder merge turns — goal: none, since no two blocks touch the same file;
 * - how long an approved block waits to land (merge.queued → block.landed), and where a
 *   stack's time goes (rebase, candidate test, landing);
 * - the parallel efficiency of 6 slow builders (4 s each) at max_parallel 6, defined as
 *   t(one such block alone) / t(all six at max_parallel 6): 1 when six blocks take no
 *   longer than one, 1/6 when they take six times as long — goal: ≥ 0.8; with the CPU
 *   the six spent (the sandbox on where bwrap runs), the floor it sets under their wall on
 *   this machine's cores and the efficiency that floor allows at most;
 * - what `[merge] speculate` saves when reviews are slow: four blocks whose reviews take
 *   0.3 s (the first) and 2 s (the others), with a suite of 1.5 s, run with speculate and
 *   without — the last approval → the last landing, and the runs' walls. With it, the
 *   stack of four is tested while three of the reviews run.
 *
 * TRON_BENCH_LANE=0 skips it; TRON_BENCH_LANE_SIZES=10,40, TRON_BENCH_SLOW_MS=4000 and
 * TRON_BENCH_REPEATS=3 change the sizes, the slow builders' time and how many times each
 * configuration runs (the verdicts take the median run); TRON_BENCH_KEEP=1 keeps the
 * repositories.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { TronEvent } from '../engine/core/events.ts';
import { laneIntervals, unionMs } from '../engine/render/report-time.ts';
import { readLog } from '../engine/log/eventlog.ts';
import { configFile, makeProject } from '../engine/testing/project.ts';
import { GIT_IDENTITY_ENV } from '../engine/testing/repo.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from '../engine/testing/workers.ts';
import { chooseSandbox } from '../engine/workers/sandbox.ts';
import { availableParallelism } from 'node:os';
import { type CpuMethod, costOf, cpuMethod } from './bench-cost.ts';

const BIN = fileURLToPath(new URL('../bin/tron.js', import.meta.url));

/** A builder that writes items/<block>.txt and commits it, after `sleep` seconds. */
function builder(sleep: number): string {
  return `${builderPrelude('items/<block>.txt names itself')}${sleep > 0 ? `sleep ${sleep}` : ''}
mkdir -p items && echo "$TRON_BLOCK" > "items/$TRON_BLOCK.txt"
git add -A && git commit -qm "Add $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;
}

/** A `node --test` suite that reads every item: its cost stays the same as items land. */
const SUITE = {
  'test/items.test.js': `const { test } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
test('every item names itself', () => {
  const dir = path.join(__dirname, '..', 'items');
  for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) assert.strictEqual(fs.readFileSync(path.join(dir, f), 'utf8').trim(), f.replace(/\\.txt$/, ''));
});
`,
  'test/math.test.js': `const { test } = require('node:test');
const assert = require('node:assert');
test('arithmetic still works', () => assert.strictEqual(6 * 7, 42));
`,
};

interface LaneRun {
  /** Where the lane's time went, summed over stacks: replaying, testing, landing (ms). */
  parts: { rebase: number; test: number; land: number };
  blocks: number;
  wallMs: number;
  /** Mean time from a block's approval (its first merge.queued) to its block.landed. */
  approvedToLandedMs: number;
  /** From the run's last approval (merge.queued) to its last block.landed. */
  lastApprovalToLandedMs: number;
  laneBusyMs: number;
  stacks: number;
  mergeTurns: number;
  landed: number;
  exit: number | undefined;
  /** CPU seconds of `tron start` and everything it started, when counted (the six-block runs). */
  cpuS?: number;
  /** Why the run failed, when it did. */
  failed?: TronEvent;
}

/** A reviewer that approves after 0.3 s (the first block) or 2 s (any other): reviews that end apart. */
const SLOW_REVIEWS = `[workers.reviewer]\nadapter = "command"\ncommand = ["sh", "-c", "cat > /dev/null; if [ \\"$TRON_BLOCK\\" = b001 ]; then sleep 0.3; else sleep 2; fi; echo '>>APPROVE'"]\n`;

/** A test of the suite that takes 1.5 s. */
const SLOW_TEST = {
  'test/slow.test.js': `const { test } = require('node:test');
test('takes its time', () => new Promise((done) => setTimeout(done, 1500)));
`,
};

/** The run's shape beyond its size: slow reviews and a slow suite, [merge] speculate on or off, its CPU counted. */
interface Shape {
  slowReviews?: boolean;
  speculate?: boolean;
  cpu?: CpuMethod;
}

/** One `tron start` of `blocks` independent blocks at `maxParallel`, each builder taking `sleep` seconds. */
async function laneRun(blocks: number, maxParallel: number, sleep: number, shape: Shape = {}): Promise<LaneRun> {
  const scripts = mkdtempSync(join(tmpdir(), 'tron-bench-workers-'));
  const builderPath = writeBuilder(scripts, builder(sleep));
  const ids = Array.from({ length: blocks }, (_, i) => `b${String(i + 1).padStart(3, '0')}`);
  const workers = approvingWorkers(builderPath);
  const repo = await makeProject({
    blocks: Object.fromEntries(ids.map((id) => [id, {}])),
    files: shape.slowReviews ? { ...SUITE, ...SLOW_TEST } : SUITE,
    config: configFile({
      maxParallel,
      workers: shape.slowReviews ? `${workers.slice(0, workers.indexOf('[workers.reviewer]'))}${SLOW_REVIEWS}` : workers,
      ...(shape.speculate !== undefined && { extra: `\n[merge]\nspeculate = ${shape.speculate}\n` }),
    }).replace('test = "node test.js"', 'test = "node --test test/*.test.js"'),
  });
  try {
    const argv = ['node', BIN, 'start', '--repo', repo.dir];
    const run = shape.cpu
      ? await costOf(argv, repo.dir, shape.cpu).then((c) => ({ exitCode: c.exit, cpuS: c.cpuS }))
      : await execa(argv[0]!, argv.slice(1), {
          reject: false,
          stdin: 'ignore',
          env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
          extendEnv: false,
        }).then((r) => ({ exitCode: r.exitCode, cpuS: undefined }));
    const runs = join(repo.dir, '.tron', 'runs');
    const events: TronEvent[] = readLog(join(runs, readdirSync(runs).sort().at(-1)!, 'events.jsonl')).events;
    const lane = laneIntervals(events);
    const parts = { rebase: 0, test: 0, land: 0 };
    const opened = new Map<string, number>();
    for (const e of events) {
      if (e.type === 'lane.stacked') opened.set(`r${e.stack}`, e.ts);
      if (e.type === 'rebase.done') parts.rebase += e.ts - (opened.get(`r${e.stack}`) ?? e.ts);
      if (e.type === 'candidate.requested' || e.type === 'bisect.step') opened.set(`t${e.stack}`, e.ts);
      if (e.type === 'candidate.tested') parts.test += e.ts - (opened.get(`t${e.stack}`) ?? e.ts);
      if (e.type === 'land.intent') opened.set(`l${e.stack}`, e.ts);
      if (e.type === 'lane.closed' && opened.has(`l${e.stack}`)) parts.land += e.ts - opened.get(`l${e.stack}`)!;
    }
    const approved = new Map<string, number>();
    const waits: number[] = [];
    for (const e of events) {
      if (e.type === 'merge.queued' && !approved.has(e.block)) approved.set(e.block, e.ts);
      if (e.type === 'block.landed' && approved.has(e.block)) waits.push(e.ts - approved.get(e.block)!);
    }
    const lastLanded = events.findLast((e) => e.type === 'block.landed')?.ts ?? Number.NaN;
    return {
      lastApprovalToLandedMs: lastLanded - Math.max(...approved.values()),
      approvedToLandedMs: waits.reduce((a, b) => a + b, 0) / Math.max(1, waits.length),
      parts,
      blocks,
      wallMs: events.at(-1)!.ts - events[0]!.ts,
      laneBusyMs: unionMs(lane),
      stacks: lane.length,
      mergeTurns: events.filter((e) => e.type === 'block.dispatched' && e.kind === 'merge').length,
      landed: events.filter((e) => e.type === 'block.landed').length,
      exit: run.exitCode,
      ...(run.cpuS !== undefined && { cpuS: run.cpuS }),
      ...(run.exitCode !== 0 ? { failed: events.find((e) => e.type === 'run.failed') } : {}),
    };
  } finally {
    if (process.env.TRON_BENCH_KEEP) console.log(`kept ${repo.dir}`);
    else await repo.cleanup();
    rmSync(scripts, { recursive: true, force: true });
  }
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const pct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(0)}%`;

function line(label: string, r: LaneRun): void {
  console.log(
    `${label.padEnd(40)} ${s(r.wallMs).padStart(8)} ${s(r.wallMs / r.blocks).padStart(10)} ${pct(r.laneBusyMs, r.wallMs).padStart(6)} ${String(r.stacks).padStart(7)} ${String(r.mergeTurns).padStart(12)} ${`${r.landed}/${r.blocks}`.padStart(7)} ${s(r.approvedToLandedMs).padStart(9)}   ${[r.parts.rebase, r.parts.test, r.parts.land].map((x) => Math.round(x / Math.max(1, r.stacks))).join(' / ')}${r.exit === 0 ? '' : `  exit ${r.exit}${r.failed?.type === 'run.failed' ? `: ${r.failed.detail}` : ''}`}`,
  );
}

/** The run of median wall time among `runs` (an odd count gives a run that happened). */
function median(runs: readonly LaneRun[]): LaneRun {
  return [...runs].sort((a, b) => a.wallMs - b.wallMs)[Math.floor((runs.length - 1) / 2)]!;
}

/**
 * Runs the lane benchmark and prints its table and verdicts. Every configuration runs
 * TRON_BENCH_REPEATS times (3 by default), the slow pair interleaved so that both see the
 * same machine; each run is printed, and the verdicts use each configuration's median run.
 */
export async function benchLane(): Promise<void> {
  if (process.env.TRON_BENCH_LANE === '0') return;
  const sizes = (process.env.TRON_BENCH_LANE_SIZES ?? '10,40').split(',').map(Number);
  const slowMs = Number(process.env.TRON_BENCH_SLOW_MS ?? 4000);
  const repeats = Math.max(1, Number(process.env.TRON_BENCH_REPEATS ?? 3));
  console.log(`\nmerge lane (real git, command workers, node --test; wall from run.started to run.finished; median of ${repeats})`);
  console.log(
    `${'run'.padEnd(40)} ${'wall'.padStart(8)} ${'per block'.padStart(10)} ${'lane'.padStart(6)} ${'stacks'.padStart(7)} ${'merge turns'.padStart(12)} ${'landed'.padStart(7)} ${'to land'.padStart(9)}   ms/stack: rebase / test / land`,
  );
  const independent: LaneRun[] = [];
  let turns = 0;
  for (const n of sizes) {
    const runs: LaneRun[] = [];
    for (let i = 0; i < repeats; i++) {
      runs.push(await laneRun(n, 4, 0));
      line(`${n} independent blocks, max_parallel 4`, runs.at(-1)!);
    }
    independent.push(median(runs));
    turns += runs.reduce((sum, r) => sum + r.mergeTurns, 0);
  }
  const ones: LaneRun[] = [];
  const sixes: LaneRun[] = [];
  // The six-block runs' CPU, counted as the cost bench counts it: with the sandbox on, it sets a floor under their wall.
  const cpu = await cpuMethod();
  const counted = cpu.kind === 'none' ? {} : { cpu };
  for (let i = 0; i < repeats; i++) {
    ones.push(await laneRun(1, 1, slowMs / 1000));
    line(`1 block, ${slowMs / 1000} s builder`, ones.at(-1)!);
    sixes.push(await laneRun(6, 6, slowMs / 1000, counted));
    line(`6 blocks, ${slowMs / 1000} s builders, max_parallel 6`, sixes.at(-1)!);
  }
  turns += sixes.reduce((sum, r) => sum + r.mergeTurns, 0);
  const one = median(ones);
  const six = median(sixes);
  const first = independent[0]!;
  const last = independent.at(-1)!;
  const growth = last.wallMs / last.blocks / (first.wallMs / first.blocks);
  const busiest = Math.max(...independent.map((r) => r.laneBusyMs / r.wallMs));
  const efficiency = one.wallMs / six.wallMs;
  console.log(`per-block wall at ${last.blocks} / at ${first.blocks} (medians): ${growth.toFixed(2)}× (goal ≤ 1.1×)`);
  console.log(
    `lane busy, the most of any size's median run: ${pct(busiest, 1)} of the run; at ${last.blocks} blocks: ${pct(last.laneBusyMs, last.wallMs)} (goal ≤ 30% at 40)`,
  );
  console.log(`builder merge turns, all runs: ${turns} (goal 0: no two blocks touch the same file)`);
  console.log(
    `parallel efficiency, t(1 block) / t(6 blocks at max_parallel 6), medians: ${s(one.wallMs)} / ${s(six.wallMs)} = ${efficiency.toFixed(2)} (goal ≥ 0.8)`,
  );
  const sandbox = (await chooseSandbox('auto', process.env)).sandbox.kind;
  if (six.cpuS !== undefined) {
    // Six blocks' CPU spread over every core is the least wall they can take: the efficiency cannot pass t(1) over it.
    const cores = availableParallelism();
    const floorMs = (1000 * six.cpuS) / cores;
    console.log(
      `  with the sandbox ${sandbox === 'bwrap' ? 'on (bwrap)' : 'off (no bwrap here)'}: the six blocks spent ${six.cpuS.toFixed(2)} CPU-s, a floor of ${s(floorMs)} of wall on ${cores} cores, so the efficiency can be at most ${Math.min(1, one.wallMs / floorMs).toFixed(2)} here; their wall was ${(six.wallMs / floorMs).toFixed(1)}× that floor (when issue #41 was filed: efficiency 0.58–0.59, wall within 1.3× of the floor)`,
    );
  } else console.log(`  with the sandbox ${sandbox === 'bwrap' ? 'on (bwrap)' : 'off'}: its CPU floor not measured (no cgroup, no perf)`);
  const plain: LaneRun[] = [];
  const speculative: LaneRun[] = [];
  for (let i = 0; i < repeats; i++) {
    plain.push(await laneRun(4, 4, 0, { slowReviews: true, speculate: false }));
    line('4 blocks, reviews 0.3/2 s, suite 1.5 s', plain.at(-1)!);
    speculative.push(await laneRun(4, 4, 0, { slowReviews: true, speculate: true }));
    line('  the same with [merge] speculate', speculative.at(-1)!);
  }
  const [off, on] = [median(plain), median(speculative)];
  console.log(
    `[merge] speculate, slow reviews: last approval → last landing ${Math.round(off.lastApprovalToLandedMs)} ms without, ${Math.round(on.lastApprovalToLandedMs)} ms with; wall ${s(off.wallMs)} → ${s(on.wallMs)} (medians)`,
  );
}
