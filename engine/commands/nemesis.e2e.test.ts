/**
 * The nemesis: real engines (a leader and standbys, each host a clone of its own), a real
 * PostgreSQL this file starts, a git remote served by `git daemon` — and faults injected
 * from outside, on a schedule drawn from a seed: a leader paused with SIGSTOP past its
 * lease and woken, an engine SIGKILLed, the database restarted under everyone. Each host
 * runs under a supervisor, as docs/cluster.md asks: an engine that ended is started again
 * as a standby. Then what really happened is checked against what tron promises:
 *
 * - every block landed on the remote once, and every position of the remote's trunk is green;
 * - trunk only moved forward (no merge, no force: the remote's reflog is linear);
 * - no stale generation wrote: each run's lines are of one generation, and generations only grow;
 * - every engine that had to stop stopped — a woken leader whose lease was taken, a leader
 *   whose database went — within seconds, with its coded line and no stack trace; and once
 *   the run finished, every engine ended.
 *
 * `TRON_NEMESIS_SEED=n` draws another schedule (the CI run uses seed 1);
 * `TRON_NEMESIS_SECONDS` makes the faulty part longer (20 s by default).
 *
 * The hosts, their folders and engines, the project and the connections are the cluster
 * files' (engine/testing/cluster-hosts.ts); the supervisor and the faults are this file's.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { clusterHosts, ended, type TronRun } from '../testing/cluster-hosts.ts';
import { type Cluster, needPostgresServer, startCluster } from '../testing/postgres.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { blockFile } from '../testing/project.ts';
import { testGit } from '../testing/repo.ts';

const SERVER = needPostgresServer();
const NO_SERVER = skipWithout('the nemesis', SERVER);
const SEED = Number(process.env.TRON_NEMESIS_SEED ?? 1);
const FAULTY_MS = 1000 * Number(process.env.TRON_NEMESIS_SECONDS ?? 20);
const LEASE_MS = 2000;
const BLOCKS = ['alpha', 'beta', 'delta', 'epsilon', 'gamma', 'zeta'];
/** How long an engine that must stop may take to end (docs/cluster.md: within seconds; 15 s on a busy machine). */
const STOPS_WITHIN_MS = 20_000;

/** mulberry32: the schedule's draws, from the seed alone. */
function draws(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Engine {
  host: string;
  child: TronRun;
  out: () => string;
  /** When it had to stop (its lease taken while paused, its database restarted): it must end within STOPS_WITHIN_MS. */
  mustStopBy?: number;
  why?: string;
}

describe.skipIf(NO_SERVER)('the nemesis', () => {
  let cluster: Cluster;
  const hosts = clusterHosts();
  beforeAll(async () => {
    requireAll(SERVER);
    cluster = await startCluster();
  }, 60_000);
  afterAll(() => cluster?.stop(), 60_000);
  afterEach(() => hosts.end(), 60_000);

  it(`keeps every promise while engines are paused past their lease, killed, and the database restarts under them (seed ${SEED})`, async () => {
    const engines: Engine[] = [];
    const schedule: string[] = [];
    // The nemesis's own look at the database, connected again after each restart it makes.
    let db: pg.Client | undefined;
    const query = async <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => {
      try {
        db ??= await hosts.connect(cluster.url);
        return (await db.query<R>(sql)).rows;
      } catch {
        await db?.end().catch(() => undefined);
        db = undefined;
        return [];
      }
    };
    // Turns that take a while (a build 2 s, a review 2 s), so the faults fall in the middle of the work.
    const project = await hosts.servedProject({ database: cluster.url, lease: `${LEASE_MS / 1000}s` }, (config) => {
      const builder = /command = \["([^"]+builder\.sh)"\]/.exec(config)![1]!;
      writeFileSync(builder, readFileSync(builder, 'utf8').replace('echo "$TRON_BLOCK" >', 'sleep 2; echo "$TRON_BLOCK" >'));
      return config.replace("cat > /dev/null; echo '>>APPROVE'", "cat > /dev/null; sleep 2; echo '>>APPROVE'");
    });
    const { repo, bare } = project;
    // Three more blocks for the crash project's honest builder: six, two at a time, some waiting on others.
    await repo.write('.tron/blocks/delta.md', blockFile('delta', {}));
    await repo.write('.tron/blocks/epsilon.md', blockFile('epsilon', { depends_on: ['beta'] }));
    await repo.write('.tron/blocks/zeta.md', blockFile('zeta', { depends_on: ['gamma', 'delta'] }));
    await repo.commitAll('tron: six blocks');
    await repo.git('push', '-q', 'origin', 'main');
    const start = (await bare.git('rev-parse', 'main')).trim();
    // Three hosts: the first clone, and two more of the remote, each in a folder of its own.
    const hostDirs = [repo.dir, await hosts.cloneOf(repo, 'host-b'), await hosts.cloneOf(repo, 'host-c')];
    const launch = (host: string, standby: boolean): Engine => {
      const child = hosts.cli(['start', '--repo', host, '--plain', ...(standby ? ['--standby'] : [])], {
        env: project.env,
        timeout: 300_000,
      });
      const e: Engine = { host, child, out: () => hosts.output(child) };
      engines.push(e);
      return e;
    };
    const live = () => engines.filter((e) => !ended(e.child));
    /** The lease: its generation, and the pid of the engine holding it. */
    const lease = async (): Promise<{ generation: number; pid: number | undefined }> => {
      const [row] = await query<{ generation: string; holder: string }>('select generation, holder from tron_lease');
      return { generation: Number(row?.generation ?? 0), pid: row ? Number(/pid (\d+)/.exec(row.holder)?.[1]) : undefined };
    };
    const landedOnRemote = async () =>
      (await bare.git('for-each-ref', '--format=%(refname:strip=3)', 'refs/tron/landed/')).split('\n').filter(Boolean).sort();
    /** A run that finished: some engine ended 0 after every block landed. */
    let finished = false;

    // The leader first; once it has written its first line, the standbys (started at once, one of them could lead instead).
    launch(hostDirs[0]!, false);
    while ((await query('select 1 from tron_events limit 1')).length === 0) await sleep(100);
    for (const h of hostDirs.slice(1)) launch(h, true);

    const draw = draws(SEED);
    const faultyUntil = Date.now() + FAULTY_MS;
    const deadline = Date.now() + 240_000;
    let nextFault = Date.now() + 1000;
    while (!finished || live().length > 0) {
      expect(Date.now(), `the run did not finish: schedule ${schedule.join(', ')}`).toBeLessThan(deadline);
      // The supervisor: every host runs an engine until the run has finished.
      for (const h of hostDirs) {
        const last = engines.findLast((e) => e.host === h)!;
        if (!ended(last.child)) continue;
        if (!finished && last.child.exitCode === 0 && (await landedOnRemote()).length === BLOCKS.length) {
          finished = true;
          // The run is over: every engine still up (a standby, which takes the released lease and finds nothing to do) ends.
          for (const e of live()) {
            e.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
            e.why ??= 'was up when the run finished';
          }
        }
        if (!finished) launch(h, true);
      }
      // Every engine that had to stop has stopped, in time.
      for (const e of engines) {
        if (e.mustStopBy !== undefined && !ended(e.child))
          expect(Date.now(), `an engine on ${e.host} ${e.why} and still runs: ${e.out()}`).toBeLessThan(e.mustStopBy);
      }
      if (Date.now() < faultyUntil && Date.now() >= nextFault && live().length > 0) {
        const fault = ['pause', 'kill', 'restart', 'calm'][draw(4)]!;
        // Mostly the leader; now and then a standby.
        const { pid } = await lease();
        const leading = live().find((e) => e.child.pid === pid);
        const victim = leading && draw(3) > 0 ? leading : live()[draw(live().length)]!;
        schedule.push(`${fault}${fault === 'restart' || fault === 'calm' ? '' : ` ${victim.host.split('/').at(-1)}`}`);
        if (fault === 'pause') {
          const before = await lease();
          victim.child.kill('SIGSTOP');
          await sleep(LEASE_MS * 2 + draw(LEASE_MS));
          const after = await lease();
          victim.child.kill('SIGCONT');
          // It led, and its lease was taken while it slept: woken, it must go.
          if (before.pid === victim.child.pid && after.generation > before.generation) {
            victim.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
            victim.why ??= `was woken after its lease (generation ${before.generation}) was taken`;
          }
        } else if (fault === 'kill') {
          victim.child.kill('SIGKILL');
        } else if (fault === 'restart') {
          const before = await lease();
          await db?.end().catch(() => undefined);
          db = undefined;
          cluster.restart('fast');
          // Whoever led when the database went stops (TRON_DB_LOST); standbys ride it.
          const leader = live().find((e) => e.child.pid === before.pid);
          if (leader) {
            leader.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
            leader.why ??= 'lost its database';
          }
        }
        nextFault = Date.now() + 1500 + draw(2500);
      }
      await sleep(100);
    }

    console.log(`nemesis, seed ${SEED}: ${schedule.join(', ') || 'no fault'}; ${engines.length} engine processes`);
    const detail = () =>
      `schedule (seed ${SEED}): ${schedule.join(', ')}\n${engines.map((e, i) => `--- engine ${i} on ${e.host} (exit ${e.child.exitCode ?? e.child.signalCode}):\n${e.out()}`).join('\n')}`;
    // Every engine ended: 0, or 1 with its coded line (no stack trace), or killed by the nemesis.
    for (const e of engines) {
      const r = await e.child;
      if (r.signal === 'SIGKILL') continue;
      expect([0, 1], detail()).toContain(r.exitCode);
      if (r.exitCode === 1) expect(e.out(), detail()).toMatch(/TRON_LEASE_LOST|TRON_DB_LOST|TRON_DB_UNREACHABLE/);
      expect(e.out(), detail()).not.toMatch(/\n\s+at /);
    }
    // Every block landed on the remote once.
    expect(await landedOnRemote(), detail()).toEqual(BLOCKS);
    const subjects = (await bare.git('log', '--format=%s', `${start}..main`)).split('\n');
    for (const id of BLOCKS)
      expect(
        subjects.filter((s) => s === `Build ${id}`),
        `${id} on trunk\n${detail()}`,
      ).toHaveLength(1);
    // Trunk only moved forward: no merge commit, and every move of it descends from the one before.
    expect(await bare.git('rev-list', '--min-parents=2', 'main'), detail()).toBe('');
    const moves = (await bare.git('reflog', '--format=%H', 'main')).split('\n').filter(Boolean).reverse();
    for (let i = 1; i < moves.length; i += 1) {
      const forward = await execa('git', ['merge-base', '--is-ancestor', moves[i - 1]!, moves[i]!], { cwd: bare.dir, reject: false });
      expect(forward.exitCode, `trunk moved from ${moves[i - 1]} to ${moves[i]}, not forward\n${detail()}`).toBe(0);
    }
    // Every position of the remote's trunk is green.
    const check = hosts.folder('tron-nemesis-check-');
    await testGit(check, 'clone', '-q', bare.dir, join(check, 'c'));
    for (const sha of (await bare.git('rev-list', '--first-parent', `${start}..main`)).split('\n').filter(Boolean)) {
      await testGit(join(check, 'c'), 'checkout', '-q', '--detach', sha);
      const tests = await execa('node', ['test.js'], { cwd: join(check, 'c'), reject: false });
      expect(tests.exitCode, `trunk red at ${sha}: ${tests.stdout}\n${detail()}`).toBe(0);
    }
    // No stale generation wrote: each run's lines are of one generation, and generations grow run after run.
    const reader = await hosts.connect(cluster.url);
    // Run ids begin with the time they started: their order is the order of the runs.
    const { rows } = await reader.query<{ run: string; lo: string; hi: string }>(
      'select run, min(generation) as lo, max(generation) as hi from tron_events group by run order by run',
    );
    for (const r of rows) expect(r.lo, `run ${r.run} written by generations ${r.lo}..${r.hi}\n${detail()}`).toBe(r.hi);
    const gens = rows.map((r) => Number(r.lo));
    expect(gens, detail()).toEqual([...gens].sort((a, b) => a - b));
  }, 400_000);
});
