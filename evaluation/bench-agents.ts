/**
 * Effects as jobs on the database's queue, and `tron agent` (part of `npm run bench`; alone:
 * `npx tsx evaluation/bench-agents.ts`). Three figures (docs/cluster.md):
 *
 * - **decision → job claimed**, p50 and p99 (goal p50 ≤ 50 ms): from the moment a decision
 *   is appended (with its job: one group-commit insert) to the moment a worker pool has
 *   claimed it (graphile-worker woken by NOTIFY, then `tron_claim`), 200 decisions 15 ms apart;
 *   and the same with 20 idle pools of one slot, every one woken by each job (the herd);
 * - **six 4 s builders on six agents**: whole `tron start` runs with `[cluster] jobs =
 *   "agents"`, six `tron agent` processes each in its own clone of a served remote. The
 *   efficiency is t(1 block) / t(6 blocks), each the wall from run.started to run.finished,
 *   the medians of TRON_BENCH_REPEATS (3) pairs run in turn (goal ≥ 0.9): 1 when six blocks
 *   take no longer than one. The six are independent (each builder writes a file of its
 *   own), so all six are dispatched at once and land in one stack. Printed beside it, not
 *   the goal: the builders' share, 6 × 4 s / (6 agents × t(6 blocks)) — the rest of a
 *   block's wall is its gate, evidence and review turns and the landing, in both runs —
 *   and how busy the machine's cores were from the last builder's end to the run's end
 *   (/proc/stat): with that much CPU work and no core ever idle, t(6 blocks) could not be
 *   below the builders' end + that work / the cores, so t(1) over that is the most these
 *   cores allow;
 * - **events per second of the single writer with 8 agents and instant workers**: eight
 *   agent processes that finish every job at once, and a writer that keeps 16 jobs in flight,
 *   appending each result and the next decision with its job, for 5 s.
 *
 * The database is TRON_TEST_DATABASE_URL, else a throwaway cluster (engine/testing/postgres.ts).
 * TRON_BENCH_AGENTS=0 skips it, TRON_BENCH_AGENTS=six runs the six builders only;
 * TRON_BENCH_SLOW_MS changes the builders' 4 s; TRON_BENCH_TIMELINE=1 prints where each
 * agents run's time went: its events, then each job's path (printTrace).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { systemClock } from '../engine/os/clock.ts';
import type { EventBody, TronEvent } from '../engine/core/events.ts';
import { readLog } from '../engine/log/eventlog.ts';
import { acquireLease } from '../engine/log/lease.ts';
import { migrateJobs } from '../engine/queue/pg-jobs.ts';
import { type Database, openDatabase, PgEventLog } from '../engine/log/pg-log.ts';
import type { EffectContext } from '../engine/runtime/effects/context.ts';
import { JobBroker, startWorkers } from '../engine/queue/job-queue.ts';
import { missing } from '../engine/testing/needs.ts';
import { needPostgres, testDatabase } from '../engine/testing/postgres.ts';
import { configFile, makeProject } from '../engine/testing/project.ts';
import { makeBareRemote, serveDaemon } from '../engine/testing/remote-server.ts';
import { GIT_IDENTITY_ENV } from '../engine/testing/repo.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from '../engine/testing/workers.ts';

const BIN = fileURLToPath(new URL('../bin/tron.js', import.meta.url));
const WORKER = fileURLToPath(new URL('../engine/testing/queue-worker.ts', import.meta.url));
const INSTANT_SHA = 'a'.repeat(40);
const BODY: EventBody = { type: 'block.parked', block: 'alpha', reason: 'a line of ordinary length for the bench' };
const ENV = { ...GIT_IDENTITY_ENV, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', TRON_DATABASE_URL: '' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;

/** A run's log holding a fresh lease: the engine's side, without the engine. */
async function writer(url: string, repository: string) {
  const db = await openDatabase(url);
  await migrateJobs(db);
  const lease = await acquireLease(db, { repository, periodMs: 60_000 });
  const log = (await PgEventLog.open(db, lease, '20260101-000000-001', Buffer.alloc(32, 3))).attach(systemClock);
  log.groupCommit = true;
  return { db, log };
}

/**
 * Decision → claimed, `n` decisions 15 ms apart, with `pools` idle pools holding the role:
 * each job wakes every one of them (graphile-worker's NOTIFY), one claims it.
 */
async function dispatchLatency(url: string, n = 200, pools = 1): Promise<{ p50: number; p99: number }> {
  const { log } = await writer(url, `bench-dispatch-${pools}`);
  const appended = new Map<number, number>();
  const lat: number[] = [];
  const started = [];
  for (let i = 0; i < pools; i += 1)
    started.push(
      await startWorkers({
        url,
        roles: ['test'],
        slots: pools === 1 ? 2 : 1,
        repository: `bench-dispatch-${pools}`,
        agent: `bench ${i}`,
        heartbeatMs: 2000,
        onClaimed: (key) => lat.push(performance.now() - appended.get(key.seq)!),
        run: async () => ({ ok: true, inputs: [] }),
      }),
    );
  try {
    const warm = 10;
    for (let i = 0; i < n + warm; i += 1) {
      const e = log.append(BODY);
      appended.set(e.seq, performance.now());
      log.enqueue(e.seq, { kind: 'test.requested', role: 'test', request: { i } });
      await sleep(15);
    }
    while (lat.length < n + warm) await sleep(20);
    const kept = lat.slice(warm);
    return { p50: pct(kept, 0.5), p99: pct(kept, 0.99) };
  } finally {
    for (const pool of started) await pool.stop();
    await log.close();
  }
}

async function writerThroughput(url: string, agents = 8, inFlight = 16, ms = 5000): Promise<{ events: number; perSecond: number }> {
  const { db, log } = await writer(url, 'bench-writer');
  const pools: ResultPromise[] = [];
  for (let i = 0; i < agents; i += 1) {
    pools.push(
      execa('node', ['--import', 'tsx', WORKER], {
        env: {
          TRON_TEST_QUEUE_URL: url,
          TRON_TEST_ROLE: 'test',
          TRON_TEST_REPOSITORY: 'bench-writer',
          TRON_TEST_INSTANT: '1',
          TRON_TEST_HEARTBEAT_MS: '2000',
          TSX_DISABLE_CACHE: '1',
        },
        reject: false,
        buffer: false,
      }),
    );
  }
  const broker = new JobBroker({ url, log, at: log.at, localRoles: [], heartbeatMs: 2000, slots: 0 });
  await broker.serve({} as EffectContext);
  let stopAt = Number.POSITIVE_INFINITY;
  let counting = false;
  let counted = 0;
  const one = async (): Promise<void> => {
    while (performance.now() < stopAt) {
      const decision = log.append(BODY);
      // A trunk test's job: its instant agent reports that test's result, which the broker reads by the job's kind.
      const request = { block: 'alpha', sha: INSTANT_SHA };
      log.enqueue(decision.seq, { kind: 'test.requested', role: 'test', request });
      if (counting) counted += 1;
      const out = await broker.outcome({ decision: { ...decision, type: 'test.requested', ...request } as TronEvent, request });
      for (const body of [out ?? []].flat()) {
        log.append(body);
        if (counting) counted += 1;
      }
    }
  };
  try {
    // Once every agent has said it lives (its first heartbeat), 1 s of warm-up.
    for (;;) {
      const { rows } = await db.client.query<{ n: string }>(`select count(*) as n from tron_agents where worker like 'queue-worker pid %'`);
      if (Number(rows[0]!.n) >= agents) break;
      await sleep(100);
    }
    stopAt = performance.now() + 60_000;
    const loops = Array.from({ length: inFlight }, () => one());
    await sleep(1000);
    counting = true;
    const from = performance.now();
    await sleep(ms);
    counting = false;
    const took = performance.now() - from;
    stopAt = 0;
    await Promise.all(loops);

    return { events: counted, perSecond: (counted * 1000) / took };
  } finally {
    await broker.close();
    await log.close();
    for (const p of pools) p.kill('SIGTERM');
    await Promise.all(pools.map((p) => p.catch(() => undefined)));
  }
}

/** A builder that sleeps, then writes items/<block>.txt and commits it. */
function slowBuilder(seconds: number): string {
  return `${builderPrelude('items/<block>.txt names itself')}sleep ${seconds}
mkdir -p items && echo "$TRON_BLOCK" > "items/$TRON_BLOCK.txt"
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;
}

/** The events of the run `tron start` made last in `repo`, and that run's id. */
function lastRun(repo: string): { run: string; events: TronEvent[] } {
  const run = readdirSync(join(repo, '.tron', 'runs'))
    .sort()
    .at(-1)!;
  return { run, events: readLog(join(repo, '.tron', 'runs', run, 'events.jsonl')).events };
}

/**
 * CPU time (ms) this bench's processes have used so far: this process and every child it
 * reaped (each `tron start`, the git daemon's connections), and each agent with the children
 * it reaped (its git calls and workers) — from /proc (0 where there is none).
 */
function treeCpuMs(agents: readonly ResultPromise[]): number {
  const of = (pid: number | string) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime, stime, cutime, cstime: fields 14–17 of stat(5), 12–15 here (after pid, comm).
      return ((Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 1000) / 100;
    } catch {
      return 0;
    }
  };
  return of('self') + agents.reduce((sum, a) => sum + (a.pid ? of(a.pid) : 0), 0);
}

/** The whole machine's CPU so far, all cores, in ms (/proc/stat's first line): busy, and busy + idle. */
function machineCpu(): { busy: number; all: number } {
  try {
    // user nice system idle iowait irq softirq steal, in USER_HZ (100 a second).
    const [user, nice, system, idle, iowait, irq, softirq, steal] = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const busy = user! + nice! + system! + irq! + softirq! + (steal ?? 0);
    return { busy: busy * 10, all: (busy + idle! + iowait!) * 10 };
  } catch {
    return { busy: 0, all: 0 };
  }
}

/**
 * What the machine did after a run's builders ended (the last build turn's reply) to its
 * end, from `samples` of machineCpu taken during it: the cores' busy share, and the least
 * wall the run could have had on these cores with that much CPU work after its builders.
 */
function afterBuilders(events: readonly TronEvent[], samples: ReadonlyArray<{ at: number; busy: number; all: number }>) {
  const started = events.find((e) => e.type === 'run.started')!.ts;
  const finished = events.findLast((e) => e.type === 'run.finished')!.ts;
  // Each block's first builder reply ends its build; after the last of those the cores had all the rest to do.
  const builds = new Map<string, number>();
  for (const e of events) if (e.type === 'reply.received' && e.role === 'builder' && !builds.has(e.block)) builds.set(e.block, e.ts);
  const from = Math.max(...builds.values());
  const at = (t: number) => samples.find((x) => x.at >= t) ?? samples.at(-1)!;
  const a = at(from);
  const b = at(finished);
  const busy = b.busy - a.busy;
  const share = b.all > a.all ? busy / (b.all - a.all) : Number.NaN;
  return { tail: finished - from, share, bound: from - started + busy / availableParallelism() };
}

/** Wall (run.started → run.finished) of a run's events. */
function wallOf(events: readonly TronEvent[]): number {
  return events.findLast((e) => e.type === 'run.finished')!.ts - events.find((e) => e.type === 'run.started')!.ts;
}

/**
 * Where a run's time went, job by job (TRON_BENCH_TIMELINE=1): each queued decision's path
 * from the engine's line (its clock) through the database (commit, claim, done: the
 * database's clock, the same host) and the agent's own steps (fetch, worktree, turn, push:
 * its result's `steps`) to the engine's next line for the block (the result read, the
 * work adopted, the reply decided). All ms; the run's events first, ms from run.started.
 */
async function printTrace(db: Database, repository: string, run: string, events: readonly TronEvent[]): Promise<void> {
  const started = events.find((e) => e.type === 'run.started')!.ts;
  for (const e of events)
    if (!['usage.recorded', 'worker.spawned', 'worker.exited', 'block.phase'].includes(e.type))
      console.log(
        `${String(e.ts - started).padStart(6)} ${e.type} ${(e as { block?: string }).block ?? ''} ${(e as { role?: string }).role ?? ''}`,
      );
  const { rows } = await db.client.query<{
    seq: number;
    kind: string;
    role: string;
    created: number;
    claimed: number;
    done: number;
    steps: Record<string, number> | null;
  }>(
    `select seq, kind, role, extract(epoch from created_at) * 1000 as created, extract(epoch from claimed_at) * 1000 as claimed,
            extract(epoch from done_at) * 1000 as done, outcome -> 'steps' as steps
       from tron_jobs where repository = $1 and run = $2 order by seq`,
    [repository, run],
  );
  const ms = (n: number) => String(Math.round(n)).padStart(5);
  console.log(' from | job                    | commit claim | fetch trunk wtree  turn  push other | read+adopt → input');
  for (const j of rows) {
    const decision = events.find((e) => e.seq === j.seq)!;
    const block = (decision as { block?: string }).block ?? '';
    // The input that answers the job: the first line after `done` that is about its block (or, for the lane, any).
    const answer = events.find(
      (e) => e.ts >= Math.floor(Number(j.done)) && e.seq > j.seq && (block === '' || (e as { block?: string }).block === block),
    );
    const steps = j.steps ?? {};
    const stepSum = Object.values(steps).reduce((a, b) => a + b, 0);
    const agent = Number(j.done) - Number(j.claimed);
    console.log(
      `${ms(decision.ts - started)} | ${`${j.kind} ${block} ${j.role}`.padEnd(22)} | ${ms(Number(j.created) - decision.ts)}  ${ms(Number(j.claimed) - Number(j.created))} | ${ms(steps.fetch ?? 0)} ${ms(steps.trunk ?? 0)} ${ms(steps.worktree ?? 0)} ${ms(steps.turn ?? agent)} ${ms(steps.push ?? 0)} ${ms(j.steps ? agent - stepSum : 0)} | ${ms(answer ? answer.ts - Number(j.done) : Number.NaN)} → ${answer?.type ?? '?'}`,
    );
  }
}

/** One pair: the walls (ms), the six-block run's CPU, what its cores did after its builders, the load average. */
interface Run {
  one: number;
  six: number;
  sixCpu: number;
  after: ReturnType<typeof afterBuilders>;
  load: number;
}

async function sixAgents(url: string, slowMs: number, repeats: number): Promise<{ runs: Run[]; claimP50: number; claimP99: number }> {
  const scratch = mkdtempSync(join(tmpdir(), 'tron-bench-agents-'));
  const bare = await makeBareRemote();
  const served = await serveDaemon(bare);
  const repo = await makeProject({
    blocks: { solo: {} },
    config: configFile({
      maxParallel: 6,
      workers: approvingWorkers(writeBuilder(scratch, slowBuilder(slowMs / 1000))),
      extra: `\n[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\nretries = 50\n\n[cluster]\ndatabase = "${url}"\nrepository = "bench-six"\njobs = "agents"\nheartbeat = "1s"\n`,
    }),
  });
  const agents: ResultPromise[] = [];
  const db = await openDatabase(url);
  try {
    await repo.git('push', '-q', bare.dir, 'main');
    await repo.git('remote', 'add', 'origin', served.url);
    await repo.git('fetch', '-q', 'origin');
    for (let n = 0; n < 6; n += 1) {
      const clone = join(scratch, `clone-${n}`);
      await execa('git', ['clone', '-q', served.url, clone], { env: ENV });
      agents.push(
        execa('node', [BIN, 'agent', '--repo', clone, '--database', url], { env: ENV, reject: false, stdin: 'ignore', buffer: false }),
      );
    }
    const start = async () => {
      const cpu0 = treeCpuMs(agents);
      const samples: Array<{ at: number; busy: number; all: number }> = [];
      const sample = () => samples.push({ at: Date.now(), ...machineCpu() });
      const sampler = setInterval(sample, 20);
      const started = await execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], { env: ENV, reject: false, stdin: 'ignore' });
      clearInterval(sampler);
      sample();
      if (started.exitCode !== 0) throw new Error(`tron start exited ${started.exitCode}: ${started.stdout}\n${started.stderr}`);
      const { run, events } = lastRun(repo.dir);
      const cpu = treeCpuMs(agents) - cpu0;
      if (process.env.TRON_BENCH_TIMELINE === '1') {
        await printTrace(db, 'bench-six', run, events);
        console.log(`CPU used by the run (engine, agents, their git and workers, the remote): ${Math.round(cpu)} ms`);
      }
      return { wall: wallOf(events), cpu, after: afterBuilders(events, samples) };
    };
    const { writeFileSync } = await import('node:fs');
    const { blockFile } = await import('../engine/testing/project.ts');
    /** Commits blocks `ids` and pushes trunk (agents build on the remote's trunk, as a user pushes before starting); the next start runs them. */
    const add = async (ids: string[]) => {
      for (const id of ids) writeFileSync(join(repo.dir, '.tron', 'blocks', `${id}.md`), blockFile(id, {}));
      await repo.commitAll(`blocks ${ids.join(', ')}`);
      await repo.git('push', '-q', bare.dir, 'main');
    };
    const runs: Run[] = [];
    // The one-block and six-block runs in turn, so both see the same machine.
    for (let k = 1; k <= repeats; k += 1) {
      if (k > 1) await add([`solo${k}`]);
      const load = loadavg()[0]!;
      const one = (await start()).wall;
      await add(Array.from({ length: 6 }, (_, i) => (k === 1 ? `b${i + 1}` : `r${k}b${i + 1}`)));
      const six = await start();
      runs.push({ one, six: six.wall, sixCpu: six.cpu, after: six.after, load: (load + loadavg()[0]!) / 2 });
    }
    const { rows } = await db.client.query<{ p50: number; p99: number }>(
      `select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.99) within group (order by ms) as p99
         from (select extract(epoch from claimed_at - created_at) * 1000 as ms from tron_jobs
               where repository = 'bench-six' and kind = 'block.dispatched') t`,
    );
    return { runs, claimP50: Number(rows[0]!.p50), claimP99: Number(rows[0]!.p99) };
  } finally {
    for (const a of agents) a.kill('SIGTERM');
    await Promise.all(agents.map((a) => a.catch(() => undefined)));
    await db.end();
    await served.stop().catch(() => undefined);
    await Promise.all([repo.cleanup(), bare.cleanup()]);
    rmSync(scratch, { recursive: true, force: true });
  }
}

export async function benchAgents(): Promise<void> {
  if (process.env.TRON_BENCH_AGENTS === '0') return;
  const lacking = missing(needPostgres());
  if (lacking.length > 0) {
    console.log(`${'effects as jobs, tron agent'.padEnd(44)} skipped: ${lacking.join('; ')}`);
    return;
  }
  const server = await testDatabase();
  try {
    console.log('\neffects as jobs on the database queue (graphile-worker), tron agent');
    const only = process.env.TRON_BENCH_AGENTS === 'six';
    if (!only) {
      const d = await dispatchLatency(server.url);
      console.log(
        `${'decision → job claimed'.padEnd(44)} ${d.p50.toFixed(1).padStart(8)} ms p50, ${d.p99.toFixed(1)} ms p99 (goal p50 ≤ 50 ms)`,
      );
      // Every job wakes every idle agent (NOTIFY), each asking the queue: what twenty cost (4 connections each, under the default 100).
      const herd = await dispatchLatency(server.url, 200, 20);
      console.log(
        `${'  the same, 20 idle agents woken by each'.padEnd(44)} ${herd.p50.toFixed(1).padStart(8)} ms p50, ${herd.p99.toFixed(1)} ms p99`,
      );
    }
    const slowMs = Number(process.env.TRON_BENCH_SLOW_MS ?? 4000);
    const repeats = Number(process.env.TRON_BENCH_REPEATS ?? 3);
    const s = await sixAgents(server.url, slowMs, repeats);
    console.log(
      `${'turn committed → claimed by an agent process'.padEnd(44)} ${s.claimP50.toFixed(1).padStart(8)} ms p50, ${s.claimP99.toFixed(1)} ms p99 (the database's clock)`,
    );
    const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    const pctOf = (x: number) => `${Math.round(x * 100)}%`;
    for (const r of s.runs)
      console.log(
        `  one block ${sec(r.one)}, six blocks ${sec(r.six)}: ${(r.one / r.six).toFixed(2)}, builders' share ${((6 * slowMs) / (6 * r.six)).toFixed(2)}, CPU of the six ${sec(r.sixCpu)}; after its builders ${sec(r.after.tail)}, the cores ${pctOf(r.after.share)} busy (load average ${r.load.toFixed(1)})`,
      );
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const one = median(s.runs.map((r) => r.one));
    const six = median(s.runs.map((r) => r.six));
    const load = median(s.runs.map((r) => r.load));
    console.log(
      `six ${slowMs / 1000} s builders on six agents: t(1 block) / t(6 blocks), medians = ${sec(one)} / ${sec(six)} = ${(one / six).toFixed(2)} (goal ≥ 0.9; load average ${load.toFixed(1)} on ${availableParallelism()} cores)`,
    );
    console.log(
      `${"  builders' share of the six-block run".padEnd(44)} 6 × ${slowMs / 1000} s / (6 agents × ${sec(six)}) = ${((6 * slowMs) / (6 * six)).toFixed(2)} (the rest: each block's gate, evidence and review turns, and the landing)`,
    );
    // The builders sleep; what the run does around them is CPU, most of it in the ~2 s after they end, on this host's cores.
    console.log(
      `${'  CPU the six-block run used'.padEnd(44)} ${sec(median(s.runs.map((r) => r.sixCpu)))} (engine, agents, their git and workers, the remote; all on these ${availableParallelism()} cores)`,
    );
    // How much of the gap is the cores: had the CPU work after the builders run with no core ever idle, t(6) would have been `bound`.
    const share = median(s.runs.map((r) => r.after.share));
    const bound = median(s.runs.map((r) => r.after.bound));
    console.log(
      `${'  the cores after the builders ended'.padEnd(44)} ${pctOf(share)} busy (the whole machine's CPU, /proc/stat); with none idle, t(6 blocks) ≥ ${sec(bound)}: at best ${(one / bound).toFixed(2)} on these ${availableParallelism()} cores`,
    );
    if (only) return;
    const w = await writerThroughput(server.url);
    console.log(
      `${'single writer, 8 agents, instant workers'.padEnd(44)} ${w.perSecond.toFixed(0).padStart(8)} events/s (${w.events} events in 5 s)`,
    );
  } finally {
    await server.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchAgents();
