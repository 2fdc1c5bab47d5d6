/**
 * `npm run bench`: how fast tron's own logic is, apart from git, tests and workers —
 * the gateway parser, the decision step, replay of a long log — and how fast the CLI
 * starts next to a bare Node (evaluation/startup.ts), and what the sandbox — with a
 * builder's private object store — adds to every worker turn and test run
 * (evaluation/bench-sandbox.ts), and what the engine costs a block on one host — CPU, wall and git
 * processes of eight sequential blocks, and its overhead against a careful script
 * (evaluation/bench-cost.ts). Prints one line per measurement; never part of `npm test`
 * (speed is measured here, not asserted there).
 *
 * The replay curve is the shape that matters (docs/contributing.md, "Performance has a shape"): synthetic runs of 250, 1,000
 * and 1,800 blocks (about 28 events a block, as real runs have; 1,800 blocks is about
 * 50,000 events) must replay at the same cost per event. The goal: the 50,000-event
 * replay within 1 s, and µs/event at 1,800 blocks within 1.5× of that at 250.
 * TRON_BENCH_SIZES=250,500 and TRON_BENCH_REPEATS=1 change the sizes and repeats.
 *
 * Then the simulator's steps per second (evaluation/bench-simulator.ts), and the merge lane
 * on real git (evaluation/bench-lane.ts): per-block wall at 10 and 40
 * blocks, the lane's busy share, builder merge turns, the parallel efficiency of slow
 * builders, and what [merge] speculate saves when reviews are slow.
 *
 * Then `tron serve` under load (evaluation/bench-serve.ts): the engine's WAKE latency with
 * and without 50 SSE clients following a run that appends an event every millisecond, and
 * with a thousand finished runs on disk while `/metrics` and `/api/v1/runs` are scraped.
 *
 * Last, the push path's cost per stack with [remote] against without (evaluation/bench-remote.ts).
 * Then the log in PostgreSQL (evaluation/bench-cluster.ts): a log append made durable, p50
 * and p99, on the database against the file; and effects as jobs with `tron agent`
 * (evaluation/bench-agents.ts): decision → job claimed, six slow builders on six agents,
 * the single writer's events per second with eight instant agents.
 */
import { performance } from 'node:perf_hooks';
import { parseReply } from '../engine/gateway/parse.ts';
import { decide } from '../engine/core/decide/decide.ts';
import { replay } from '../engine/core/replay.ts';
import { apply, initialState, type EngineState } from '../engine/core/state.ts';
import { loadSpine } from '../engine/spine/load.ts';
import type { EventBody, TronEvent } from '../engine/core/events.ts';
import { benchStartup } from './startup.ts';
import { benchLane } from './bench-lane.ts';
import { benchSandbox } from './bench-sandbox.ts';
import { benchServe } from './bench-serve.ts';
import { benchSimulator } from './bench-simulator.ts';
import { benchRemote } from './bench-remote.ts';
import { benchCluster } from './bench-cluster.ts';
import { benchAgents } from './bench-agents.ts';
import { benchCost } from './bench-cost.ts';

function measure(name: string, runs: number, work: () => void): void {
  work();
  const start = performance.now();
  for (let i = 0; i < runs; i += 1) work();
  const ms = performance.now() - start;
  console.log(`${name.padEnd(44)} ${(ms / runs).toFixed(4).padStart(10)} ms/op  (${runs} runs)`);
}

const sha = (n: number) => n.toString(16).padStart(40, '0');

/** A synthetic run: `blocks` blocks each built, challenged, reviewed, landed and wrapped. */
function syntheticRun(blocks: number): TronEvent[] {
  const ctx = { spine: loadSpine(), testCommand: 'true' };
  const events: TronEvent[] = [];
  let state: EngineState = initialState();
  let seq = 0;
  const feed = (body: EventBody) => {
    const e = { ...body, v: 1, seq: ++seq, ts: seq } as TronEvent;
    events.push(e);
    const out = decide(state, e, ctx);
    for (const d of out.decisions) events.push({ ...d, v: 1, seq: ++seq, ts: seq } as TronEvent);
    state = out.state;
    return out.decisions;
  };
  const liveness = { probe_wait_ms: 1000, extension_ms: 1000, max_extensions: 1, reissues: 1 };
  feed({
    type: 'run.started',
    run: 'bench',
    version: '0',
    trunk: 'main',
    trunk_sha: sha(0),
    main_status: '',
    max_parallel: 1,
    architect: false,
    liveness,
    watch: false,
    pid: 1,
  });
  const ids = Array.from({ length: blocks }, (_, i) => `b${String(i).padStart(4, '0')}`);
  feed({
    type: 'register.loaded',
    blocks: ids.map((id) => ({ id, title: id, depends_on: [], priority: 0, criteria: ['works'], digest: id })),
  });
  feed({ type: 'recovery.finished', answers: 0 });
  let trunk = 0;
  for (let i = 0; i < blocks; i += 1) {
    const id = ids[i]!;
    const head = sha(1000 + i);
    const base = sha(trunk);
    const session = `${id}.1.builder`;
    feed({ type: 'worktree.ready', block: id, attempt: 1, base, path: id });
    feed({ type: 'reply.received', block: id, role: 'builder', session, turn: 1, ok: true, reply: '>>DONE' });
    const tests = { exit: 0, timed_out: false, log: 'x', tail: '' };
    feed({
      type: 'facts.observed',
      block: id,
      purpose: 'gate',
      base,
      head,
      commits: 1,
      trunk_sha: base,
      main_status: '',
      clean: true,
      status: '',
      tests,
      patch_id: 'p',
      fast_forward: true,
    });
    feed({
      type: 'reply.received',
      block: id,
      role: 'builder',
      session,
      turn: 2,
      ok: true,
      reply: '>>CONFIRMED {"evidence":{"c1":"yes"}}',
    });
    feed({ type: 'reply.received', block: id, role: 'reviewer', session: `${id}.1.reviewer`, turn: 1, ok: true, reply: '>>APPROVE' });
    const stack = i + 1;
    const results = [{ block: id, outcome: 'fast_forward' as const, onto: base, sha: head, patch_before: 'p', patch_after: 'p' }];
    feed({ type: 'rebase.done', stack, trunk_sha: base, results });
    feed({ type: 'candidate.tested', stack, sha: head, blocks: [id], ok: true, tests });
    feed({ type: 'block.landed', block: id, sha: head, from: base, top: head });
    feed({ type: 'block.wrapped', block: id, summary: id });
    trunk = 1000 + i;
  }
  return events;
}

/** Replays `run` once: the milliseconds it took, by the wall clock and in CPU time (which a busy machine disturbs less). */
function timeReplay(run: readonly TronEvent[]): { ms: number; cpuMs: number } {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const result = replay(run, { spine, testCommand: 'true' });
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  if (!result.ok) throw new Error(`the synthetic run does not replay: ${JSON.stringify(result.divergence)}`);
  return { ms, cpuMs: (used.user + used.system) / 1000 };
}

const spine = loadSpine();
const noise = 'lorem ipsum '.repeat(80_000);
measure('gateway: a one-line reply', 20_000, () => parseReply('>>DONE {"summary":"ok"}', { role: 'builder', phase: 'build' }));
measure('gateway: a 1 MB reply, line at the end', 50, () => parseReply(`${noise}\n>>DONE`, { role: 'builder', phase: 'build' }));
const run = syntheticRun(200);
console.log(`synthetic run: 200 blocks, ${run.length} events`);
measure('fold: apply every event of the run', 5, () => void run.reduce(apply, initialState()));
measure('replay: re-decide the whole run', 5, () => {
  const result = replay(run, { spine, testCommand: 'true' });
  if (!result.ok) throw new Error(`the synthetic run does not replay: ${JSON.stringify(result.divergence)}`);
});

// The shape of replay: per-event cost must not grow with the run (docs/contributing.md). Each size
// is replayed a few times and the fastest is kept, so a busy machine blurs it less.
const sizes = (process.env.TRON_BENCH_SIZES ?? '250,1000,1800').split(',').map(Number);
const repeats = Number(process.env.TRON_BENCH_REPEATS ?? 3);
console.log(`\nreplay curve (max_parallel 1, best of ${repeats})`);
console.log(
  `${'blocks'.padStart(7)} ${'events'.padStart(8)} ${'events/block'.padStart(13)} ${'replay ms'.padStart(10)} ${'µs/event'.padStart(9)} ${'cpu ms'.padStart(8)}`,
);
const perEvent: number[] = [];
for (const blocks of sizes) {
  const events = syntheticRun(blocks);
  let best = { ms: Infinity, cpuMs: Infinity };
  for (let i = 0; i < repeats; i += 1) {
    const t = timeReplay(events);
    if (t.ms < best.ms) best = t;
  }
  const us = (best.ms * 1000) / events.length;
  perEvent.push(us);
  console.log(
    `${String(blocks).padStart(7)} ${String(events.length).padStart(8)} ${(events.length / blocks).toFixed(1).padStart(13)} ${best.ms.toFixed(1).padStart(10)} ${us.toFixed(1).padStart(9)} ${best.cpuMs.toFixed(0).padStart(8)}`,
  );
}
if (perEvent.length > 1) {
  const ratio = perEvent.at(-1)! / perEvent[0]!;
  console.log(`µs/event at ${sizes.at(-1)} blocks / at ${sizes[0]} blocks: ${ratio.toFixed(2)}×`);
}

benchStartup();

benchSimulator();
await benchSandbox();
await benchCost();
await benchLane();
await benchServe();
await benchRemote();

await benchCluster();
await benchAgents();
