/**
 * The nemesis: real engines, agents and a real PostgreSQL this file starts, three
 * repositories on that one database, each on a remote served by `git daemon` — and faults
 * injected from outside, on a schedule drawn from a seed. Repository `one` runs on three
 * hosts (a leader and two standbys), `two` and `three` on two; one and two each have two
 * `tron agent`s (`[cluster] jobs = "agents"`: every turn and test run is a job an agent
 * claims), three's engine runs its jobs in its own pool (`jobs = "here"`). Each
 * engine and agent runs under a supervisor, as docs/cluster.md asks: an engine that ended
 * is started again as a standby, an agent that ended is started again. Every process
 * reaches PostgreSQL, and every git of the hosts and agents its remote, through a TCP proxy
 * (engine/testing/tcp-proxy.ts) the nemesis controls.
 *
 * The faults: a leader paused with SIGSTOP past its lease and woken, an engine SIGKILLed,
 * the database restarted under everyone, an agent SIGKILLed (mostly one holding a job:
 * mid-turn or mid-test) or paused past its heartbeat, every connection cut, a partition
 * (new connections refused and live ones cut for a while), every connection slowed, and a
 * teammate pushing to a remote's trunk. Every schedule begins with three's leader paused
 * past its lease while its pool holds a turn, then a database restart while standbys wait,
 * so the faults of issue #37 are exercised whatever the seed (docs/evaluation.md shows each
 * found when its fix is reverted). Then what really happened is checked against what
 * tron promises:
 *
 * - every block of each repository landed on its own remote once, and every position of each
 *   remote's trunk is green;
 * - trunk only moved forward (no merge, no force: each remote's reflog is linear);
 * - no stale generation wrote: each run's lines are of one generation, and generations only grow;
 * - every job was run by a pool of its own repository, and every reply in a repository's log
 *   is the result its job's holding attempt recorded (tron_jobs);
 * - every engine that had to stop stopped — a woken leader whose lease was taken, a leader
 *   whose database went — within seconds, with its coded line and no stack trace; an engine
 *   that never led stopped only when asked to or when it could not reach the database at its
 *   start; once the run finished, every engine ended, and every agent ended on SIGTERM.
 *
 * `TRON_NEMESIS_SEED=n` draws another schedule (the CI run uses seed 1);
 * `TRON_NEMESIS_SECONDS` makes the drawn part longer (15 s by default, after the first two faults).
 *
 * The hosts, their folders and processes, the projects and the connections are the cluster
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
import type { RemoteProject } from '../testing/remote-project.ts';
import { testGit } from '../testing/repo.ts';
import { type TcpProxy, tcpProxy } from '../testing/tcp-proxy.ts';

const SERVER = needPostgresServer();
const NO_SERVER = skipWithout('the nemesis', SERVER);
const SEED = Number(process.env.TRON_NEMESIS_SEED ?? 1);
const FAULTY_MS = 1000 * Number(process.env.TRON_NEMESIS_SECONDS ?? 15);
const LEASE_MS = 2000;
/** How long an engine or agent that must stop may take to end (docs/cluster.md: within seconds; 15 s on a busy machine). */
const STOPS_WITHIN_MS = 20_000;
/** A supervisor starts a process again no sooner than this after it last started it. */
const RESPAWN_MS = 1000;

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
const pidOf = (name: string | null | undefined) => Number(/pid (\d+)/.exec(name ?? '')?.[1]);

/** A repository of the run: its project, its proxied remote, its hosts' and agents' clones. */
interface Repo {
  name: string;
  ids: string[];
  project: RemoteProject;
  git: TcpProxy;
  hostDirs: string[];
  agentDirs: string[];
  /** Trunk before the run. */
  start: string;
  /** Some engine of it ended 0 with every block landed. */
  finished: boolean;
  /** Teammates' pushes to its trunk. */
  pushes: number;
}

interface Proc {
  kind: 'engine' | 'agent';
  repo: Repo;
  dir: string;
  child: TronRun;
  startedAt: number;
  out: () => string;
  /** When it had to stop (a lease taken while paused, a database gone, the run over): it must end within STOPS_WITHIN_MS. */
  mustStopBy?: number;
  why?: string;
  /** An engine seen holding its repository's lease. */
  led?: boolean;
  /** Ended by the nemesis (SIGKILL) or at the end (SIGTERM): not its own doing. */
  killed?: boolean;
}

/** What a standby says once it waits on the database for a leader's lease. */
const WAITING = /taking over when its lease lapses/;

/** Faults drawn after the first two; each names what it does in the printed schedule. */
const FAULTS = ['pause', 'kill', 'restart', 'kill-agent', 'stall-agent', 'cut', 'partition', 'slow', 'push', 'calm'] as const;

describe.skipIf(NO_SERVER)('the nemesis', () => {
  let cluster: Cluster;
  const hosts = clusterHosts();
  const proxies: TcpProxy[] = [];
  beforeAll(async () => {
    requireAll(SERVER);
    cluster = await startCluster();
  }, 60_000);
  afterAll(() => cluster?.stop(), 60_000);
  afterEach(async () => {
    await hosts.end();
    for (const p of proxies.splice(0)) await p.close();
  }, 60_000);

  it(`keeps every promise of two repositories' engines and agents under pauses, kills, database restarts and a bad network (seed ${SEED})`, async () => {
    const procs: Proc[] = [];
    const schedule: string[] = [];
    let began = Date.now();
    /** A fault as the schedule prints it: when, in seconds from the start, and what. */
    const at = (what: string) => `${((Date.now() - began) / 1000).toFixed(1)}s ${what}`;
    // The nemesis's own look at the database (never through the proxy), connected again after each restart it makes.
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
    const pgPort = Number(new URL(cluster.url).port);
    const dbProxy = await tcpProxy({ port: pgPort });
    proxies.push(dbProxy);
    const proxiedDb = `postgres://tron@127.0.0.1:${dbProxy.port}/postgres`;

    /** A repository: the crash project on a served remote reached through a proxy, turns that take a while, more blocks. */
    const repository = async (
      name: string,
      hostCount: number,
      jobs: 'agents' | 'here',
      more: Record<string, { depends_on?: string[] }>,
    ): Promise<Repo> => {
      const project = await hosts.servedProject(
        { database: proxiedDb, repository: name, lease: `${LEASE_MS / 1000}s`, clusterExtra: `jobs = "${jobs}"\nheartbeat = "500ms"\n` },
        (config) => {
          // Builds take 2 s and reviews 1 s, so the faults fall in the middle of the work.
          const builder = /command = \["([^"]+builder\.sh)"\]/.exec(config)![1]!;
          writeFileSync(builder, readFileSync(builder, 'utf8').replace('echo "$TRON_BLOCK" >', 'sleep 2; echo "$TRON_BLOCK" >'));
          return config.replace("cat > /dev/null; echo '>>APPROVE'", "cat > /dev/null; sleep 1; echo '>>APPROVE'");
        },
      );
      const { repo, bare, served } = project;
      const git = await tcpProxy({ port: served.port });
      proxies.push(git);
      await repo.git('remote', 'set-url', 'origin', `git://127.0.0.1:${git.port}/repo.git`);
      for (const [id, spec] of Object.entries(more)) await repo.write(`.tron/blocks/${id}.md`, blockFile(id, spec));
      if (Object.keys(more).length > 0) {
        await repo.commitAll('tron: more blocks');
        await repo.git('push', '-q', 'origin', 'main');
      }
      const hostDirs = [repo.dir];
      for (let i = 1; i < hostCount; i += 1) hostDirs.push(await hosts.cloneOf(repo, `${name}-host-${i}`));
      const agentDirs = jobs === 'here' ? [] : [await hosts.cloneOf(repo, `${name}-agent-0`), await hosts.cloneOf(repo, `${name}-agent-1`)];
      return {
        name,
        ids: ['alpha', 'beta', 'gamma', ...Object.keys(more)].sort(),
        project,
        git,
        hostDirs,
        agentDirs,
        start: (await bare.git('rev-parse', 'main')).trim(),
        finished: false,
        pushes: 0,
      };
    };
    // One: four blocks, two at a time, two waiting on others. Two: the crash project's three, the same ids (a result
    // of one's alpha given to two's engine would read as its own, but for the checks below).
    const one = await repository('one', 3, 'agents', { delta: { depends_on: ['beta'] } });
    const two = await repository('two', 2, 'agents', {});
    const three = await repository('three', 2, 'here', { delta: { depends_on: ['beta'] } });
    const repos = [one, two, three];

    const launch = (kind: Proc['kind'], repo: Repo, dir: string, standby: boolean): Proc => {
      const args = kind === 'engine' ? ['start', '--repo', dir, '--plain', ...(standby ? ['--standby'] : [])] : ['agent', '--repo', dir];
      const child = hosts.cli(args, { env: repo.project.env, timeout: 300_000 });
      const p: Proc = { kind, repo, dir, child, startedAt: Date.now(), out: () => hosts.output(child) };
      procs.push(p);
      return p;
    };
    const live = (kind: Proc['kind'], repo?: Repo) => procs.filter((p) => p.kind === kind && (!repo || p.repo === repo) && !ended(p.child));
    const short = (p: Proc) => `${p.kind === 'agent' ? 'agent ' : ''}${p.dir.split('/').at(-1)}`;
    /** Each repository's lease: its generation, and the pid of the engine holding it; an engine seen holding it has led. */
    const leases = async (): Promise<Map<string, { generation: number; pid: number }>> => {
      const rows = await query<{ repository: string; generation: string; holder: string }>(
        'select repository, generation, holder from tron_lease where expires_at > now()',
      );
      const map = new Map(rows.map((r) => [r.repository, { generation: Number(r.generation), pid: pidOf(r.holder) }]));
      for (const p of procs) if (p.kind === 'engine' && map.get(p.repo.name)?.pid === p.child.pid) p.led = true;
      return map;
    };
    const landedOn = async (repo: Repo) =>
      (await repo.project.bare.git('for-each-ref', '--format=%(refname:strip=3)', 'refs/tron/landed/')).split('\n').filter(Boolean).sort();
    /** The engines that lead now: they must stop when their database goes. */
    const leadersMustStop = async (why: string) => {
      const now = await leases();
      if (Date.now() - lastLook > 1000) {
        lastLook = Date.now();
        ownJobs(await query('select repository, run, seq, role, attempt, worker, pool from tron_jobs where worker is not null'));
      }
      for (const p of procs) {
        if (p.kind !== 'engine' || ended(p.child) || now.get(p.repo.name)?.pid !== p.child.pid) continue;
        p.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
        p.why ??= why;
      }
    };
    /** A teammate's commit pushed straight to `repo`'s trunk (plain git, fetched again when tron moved trunk first). */
    const push = async (repo: Repo) => {
      const mate = hosts.folder('tron-nemesis-mate-');
      const bare = repo.project.bare.dir;
      await testGit(mate, 'clone', '-q', bare, join(mate, 'c'));
      const c = join(mate, 'c');
      for (let i = 0; i < 5; i += 1) {
        await testGit(c, 'fetch', '-q', 'origin');
        await testGit(c, 'reset', '-q', '--hard', 'origin/main');
        writeFileSync(join(c, `mate-${repo.pushes}.txt`), 'a teammate was here\n');
        await testGit(c, 'add', '-A');
        await testGit(c, 'commit', '-q', '-m', `Teammate ${repo.pushes}`);
        const pushed = await execa('git', ['push', '-q', 'origin', 'HEAD:main'], { cwd: c, reject: false });
        if (pushed.exitCode === 0) {
          repo.pushes += 1;
          return;
        }
      }
    };

    const detail = () =>
      `schedule (seed ${SEED}): ${schedule.join(', ')}\n${procs
        .map(
          (p, i) =>
            `--- ${i}: ${p.kind} of ${p.repo.name} in ${p.dir}, pid ${p.child.pid}${p.led ? ', led' : ''} (exit ${p.child.exitCode ?? p.child.signalCode}):\n${p.out()}`,
        )
        .join('\n')}`;
    /** Every job claimed so far was claimed by an agent of its own repository (the engine's own pool runs none here). */
    const ownJobs = (
      jobs: Array<{
        repository: string;
        run: string;
        seq: number;
        role: string;
        attempt: number;
        worker: string | null;
        pool: string | null;
      }>,
    ) => {
      for (const j of jobs) {
        if (j.worker === null) continue;
        // An agents' job (no pool named): an agent of its repository; an engine's own: that engine's pool.
        const by = procs.find((p) => p.child.pid === pidOf(j.worker) && (j.pool === null ? p.kind === 'agent' : j.worker === j.pool));
        const owner = by ? `${by.kind === 'agent' ? 'an agent' : 'an engine'} of ${by.repo.name}` : 'no pool it may run on';
        expect(
          owner,
          `job ${j.repository}/${j.run}/${j.seq} (${j.role} for ${j.pool ?? 'the agents'}, attempt ${j.attempt}) was claimed by ${j.worker}, ${owner}\n${detail()}`,
        ).toBe(`${j.pool === null ? 'an agent' : 'an engine'} of ${j.repository}`);
      }
    };
    let lastLook = 0;
    // Who leads, looked at every 100 ms whatever the schedule is doing (a pause, a partition): an engine seen leading has led.
    const watching = setInterval(() => void leases(), 100);

    // The leaders first; once each has written its first line, its standbys (started at once, one of them could lead
    // instead) — three's first, whose leader the schedule pauses first —, then the agents.
    for (const r of repos) launch('engine', r, r.hostDirs[0]!, false);
    for (const r of [three, one, two]) {
      while ((await query(`select 1 from tron_events where repository = '${r.name}' limit 1`)).length === 0) await sleep(100);
      for (const h of r.hostDirs.slice(1)) launch('engine', r, h, true);
    }
    for (const r of repos) for (const a of r.agentDirs) launch('agent', r, a, false);

    const draw = draws(SEED);
    began = Date.now();
    // The first two faults come whenever they can (each may wait for standbys to wait); the drawn ones, for FAULTY_MS after.
    let faultyUntil = Number.POSITIVE_INFINITY;
    const deadline = Date.now() + 240_000;
    // The first two faults: three's leader paused past its lease while its own pool runs a turn and its standby waits,
    // then at once a restart while standbys wait.
    const first: string[] = ['pause', 'restart'];
    const deck: string[] = [];
    let nextFault = Date.now() + 1500;
    const allFinished = () => repos.every((r) => r.finished);
    let agentsStopped = false;
    while (!allFinished() || procs.some((p) => !ended(p.child))) {
      expect(Date.now(), `the run did not finish\n${detail()}`).toBeLessThan(deadline);
      // The supervisors: every host runs an engine until its repository's run has finished; every agent runs until all have.
      for (const r of repos) {
        for (const h of r.hostDirs) {
          const last = procs.findLast((p) => p.kind === 'engine' && p.dir === h)!;
          if (!ended(last.child)) continue;
          if (!r.finished && last.child.exitCode === 0 && (await landedOn(r)).length === r.ids.length) {
            r.finished = true;
            // Its run is over: every engine of it still up (a standby, which takes the released lease and finds nothing to do) ends.
            for (const p of live('engine', r)) {
              p.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
              p.why ??= 'was up when the run finished';
            }
          }
          if (!r.finished && Date.now() - last.startedAt > RESPAWN_MS) launch('engine', r, h, true);
        }
        for (const a of r.agentDirs) {
          const last = procs.findLast((p) => p.kind === 'agent' && p.dir === a)!;
          if (ended(last.child) && !agentsStopped && Date.now() - last.startedAt > RESPAWN_MS) launch('agent', r, a, false);
        }
      }
      // Both runs are over: the agents are told to stop (SIGTERM), and must.
      if (allFinished() && !agentsStopped) {
        agentsStopped = true;
        for (const p of live('agent')) {
          p.killed = true;
          p.mustStopBy = Date.now() + STOPS_WITHIN_MS;
          p.why = 'was sent SIGTERM once both runs finished';
          p.child.kill('SIGTERM');
        }
      }
      // Every process that had to stop has stopped, in time.
      for (const p of procs) {
        if (p.mustStopBy !== undefined && !ended(p.child))
          expect(Date.now(), `${short(p)} of ${p.repo.name} ${p.why} and still runs: ${p.out()}`).toBeLessThan(p.mustStopBy);
      }
      if (Date.now() < faultyUntil && Date.now() >= nextFault && !allFinished()) {
        if (deck.length === 0) {
          // A deck of every fault, shuffled by the seed: each comes once before any comes again.
          deck.push(...FAULTS);
          for (let i = deck.length - 1; i > 0; i -= 1) {
            const j = draw(i + 1);
            [deck[i], deck[j]] = [deck[j]!, deck[i]!];
          }
        }
        const fault = first.shift() ?? deck.pop()!;
        // A repository the fault is aimed at: one, mostly.
        // The repository it is aimed at: one, mostly; the first pause at three's leader, whose engine runs its jobs itself
        // (jobs = "here"): its woken leader waits on a result that can no longer come (#37).
        const repo = schedule.length < 2 ? three : [one, one, two, three][draw(4)]!;
        if (fault === 'pause' || fault === 'kill') {
          // Mostly its leader; now and then a standby. The first pause is of three's leader once its standby waits and
          // its pool runs a job (at most 20 s).
          for (let i = 0; schedule.length === 0 && i < 200; i += 1) {
            const holder = (await leases()).get('three')?.pid;
            const running = await query<{ worker: string }>(
              `select worker from tron_jobs where repository = 'three' and state = 'running'`,
            );
            const standby = live('engine', three).some((p) => p.child.pid !== holder && WAITING.test(p.out()));
            if (standby && running.some((j) => pidOf(j.worker) === holder)) break;
            await sleep(100);
          }
          const now = await leases();
          const leaderOf = (r: Repo) => live('engine', r).find((p) => p.child.pid === now.get(r.name)?.pid);
          const leading = leaderOf(repo) ?? (schedule.length < 2 ? leaderOf(one) : undefined);
          const engines = live('engine', repo);
          const victim = leading && (schedule.length < 2 || draw(3) > 0) ? leading : engines[draw(engines.length)];
          if (victim) {
            schedule.push(at(`${fault} ${short(victim)}`));
            if (fault === 'kill') {
              victim.killed = true;
              victim.child.kill('SIGKILL');
            } else {
              const before = (await leases()).get(victim.repo.name);
              victim.child.kill('SIGSTOP');
              await sleep(LEASE_MS * 2 + draw(LEASE_MS));
              // A leader stays paused until another took its lease (at most 4 s more): woken, it must find it gone.
              const taken = async () => {
                const now = (await leases()).get(victim.repo.name);
                return now !== undefined && before !== undefined && now.generation > before.generation;
              };
              for (let i = 0; before?.pid === victim.child.pid && i < 40 && !(await taken()); i += 1) await sleep(100);
              const after = (await leases()).get(victim.repo.name);
              victim.child.kill('SIGCONT');
              // It led, and its lease was taken while it slept: woken, it must go.
              if (before !== undefined && before.pid === victim.child.pid && after && after.generation > before.generation) {
                victim.mustStopBy ??= Date.now() + STOPS_WITHIN_MS;
                victim.why ??= `was woken after its lease (generation ${before.generation}) was taken`;
              }
            }
          } else schedule.push(at(`${fault} (no engine)`));
        } else if (fault === 'restart') {
          // The first restart falls while standbys wait (they ride it: docs/cluster.md).
          const forced = schedule.length === 1;
          const waiting = () => live('engine').filter((p) => WAITING.test(p.out())).length;
          for (let i = 0; forced && i < 100 && waiting() < 2; i += 1) await sleep(100);
          schedule.push(at(forced ? `restart (${waiting()} standbys waiting)` : 'restart'));
          await leadersMustStop('lost its database (restarted)');
          await db?.end().catch(() => undefined);
          db = undefined;
          cluster.restart('fast');
        } else if (fault === 'kill-agent' || fault === 'stall-agent') {
          // Mostly an agent holding a job (mid-turn or mid-test), of one or two (three has none).
          const repo = draw(3) > 0 ? one : two;
          const running = await query<{ worker: string }>(
            `select worker from tron_jobs where repository = '${repo.name}' and state = 'running'`,
          );
          const agents = live('agent', repo);
          const holding = agents.filter((p) => running.some((j) => pidOf(j.worker) === p.child.pid));
          const victim = holding.length > 0 && draw(3) > 0 ? holding[draw(holding.length)] : agents[draw(agents.length)];
          if (victim) {
            const job = running.some((j) => pidOf(j.worker) === victim.child.pid) ? ' holding a job' : '';
            schedule.push(at(`${fault} ${short(victim)}${job}`));
            if (fault === 'kill-agent') {
              victim.killed = true;
              victim.child.kill('SIGKILL');
            } else {
              // Past its lapse (1.5 heartbeats of 500 ms): its job is given to another attempt; woken, its result is refused.
              victim.child.kill('SIGSTOP');
              await sleep(1500 + draw(1500));
              victim.child.kill('SIGCONT');
            }
          } else schedule.push(at(`${fault} (no agent)`));
        } else if (fault === 'cut') {
          schedule.push(at('cut'));
          await leadersMustStop('lost its database (every connection cut)');
          dbProxy.cut();
          for (const r of repos) r.git.cut();
        } else if (fault === 'partition') {
          const ms = 1000 + draw(1500);
          schedule.push(at(`partition ${ms} ms`));
          await leadersMustStop('lost its database (partitioned)');
          for (const p of [dbProxy, ...repos.map((r) => r.git)]) {
            p.refuse();
            p.cut();
          }
          await sleep(ms);
          for (const p of [dbProxy, ...repos.map((r) => r.git)]) p.accept();
        } else if (fault === 'slow') {
          const ms = 50 + draw(250);
          schedule.push(at(`slow ${ms} ms`));
          for (const p of [dbProxy, ...repos.map((r) => r.git)]) p.delay(ms);
          await sleep(1500 + draw(1500));
          for (const p of [dbProxy, ...repos.map((r) => r.git)]) p.delay(0);
        } else if (fault === 'push') {
          schedule.push(at(`push to ${repo.name}`));
          await push(repo);
        } else schedule.push(at('calm'));
        if (first.length === 0 && faultyUntil === Number.POSITIVE_INFINITY) faultyUntil = Date.now() + FAULTY_MS;
        nextFault = first.length > 0 ? Date.now() : Date.now() + 1000 + draw(1500);
      }
      await sleep(100);
    }

    clearInterval(watching);
    const count = (kind: Proc['kind']) => procs.filter((p) => p.kind === kind).length;
    console.log(
      `nemesis, seed ${SEED}: ${schedule.join(', ') || 'no fault'}; ${count('engine')} engine and ${count('agent')} agent processes`,
    );
    if (process.env.TRON_NEMESIS_VERBOSE === '1') console.log(detail());
    // Every process ended as it may: killed by the nemesis; 0; or 1 with its coded line, no stack trace, and for an
    // engine only when it had to stop, had led, or could not reach its database at its start.
    for (const p of procs) {
      const r = await p.child;
      if (r.signal === 'SIGKILL' && p.killed) continue;
      const name = `${short(p)} of ${p.repo.name} (pid ${p.child.pid})`;
      expect(p.out(), `${name} printed a stack trace\n${detail()}`).not.toMatch(/\n\s+at /);
      if (p.kind === 'agent') {
        if (p.killed) expect(r.exitCode, `${name} did not end 0 on SIGTERM\n${detail()}`).toBe(0);
        // On its own, only when it could not reach the database at its start — or, still open (docs/evaluation.md),
        // stopped as "not registered" when its start met a restart or a busy host; its supervisor starts it again.
        else expect(p.out(), `${name} ended on its own\n${detail()}`).toMatch(/TRON_DB_UNREACHABLE|is not registered: it was never/);
        continue;
      }
      expect([0, 1], `${name} ended ${r.exitCode ?? r.signal}\n${detail()}`).toContain(r.exitCode);
      if (r.exitCode !== 1) continue;
      expect(p.out(), `${name}\n${detail()}`).toMatch(/TRON_LEASE_LOST|TRON_DB_LOST|TRON_DB_UNREACHABLE|TRON_REMOTE_UNREACHABLE/);
      // It led: seen holding the lease, named as the leader by another, or it lost a lease it held.
      const led =
        p.led || /TRON_LEASE_LOST/.test(p.out()) || procs.some((o) => o.out().includes(`pid ${p.child.pid} leads ${p.repo.name};`));
      if (led || p.mustStopBy !== undefined) continue;
      // Else it may only have failed to reach the database at its start: a standby that waited rides what comes (#37).
      expect(p.out(), `${name} never led and nothing asked it to stop, yet it stopped\n${detail()}`).toMatch(/TRON_DB_UNREACHABLE/);
      expect(p.out(), `${name} waited as a standby, then stopped though it never led\n${detail()}`).not.toMatch(WAITING);
    }
    for (const r of repos) {
      const { bare } = r.project;
      // Every block landed on its own remote once.
      expect(await landedOn(r), `${r.name}'s landed refs\n${detail()}`).toEqual(r.ids);
      const subjects = (await bare.git('log', '--format=%s', `${r.start}..main`)).split('\n');
      for (const id of r.ids)
        expect(
          subjects.filter((s) => s === `Build ${id}`),
          `${id} on ${r.name}'s trunk\n${detail()}`,
        ).toHaveLength(1);
      expect(subjects.filter((s) => s.startsWith('Teammate')).length, `${r.name}'s teammates' commits`).toBe(r.pushes);
      // Trunk only moved forward: no merge commit, and every move of it descends from the one before.
      expect(await bare.git('rev-list', '--min-parents=2', 'main'), detail()).toBe('');
      const moves = (await bare.git('reflog', '--format=%H', 'main')).split('\n').filter(Boolean).reverse();
      for (let i = 1; i < moves.length; i += 1) {
        const forward = await execa('git', ['merge-base', '--is-ancestor', moves[i - 1]!, moves[i]!], { cwd: bare.dir, reject: false });
        expect(forward.exitCode, `${r.name}'s trunk moved from ${moves[i - 1]} to ${moves[i]}, not forward\n${detail()}`).toBe(0);
      }
      // Every position of the remote's trunk is green.
      const check = hosts.folder('tron-nemesis-check-');
      await testGit(check, 'clone', '-q', bare.dir, join(check, 'c'));
      for (const sha of (await bare.git('rev-list', '--first-parent', `${r.start}..main`)).split('\n').filter(Boolean)) {
        await testGit(join(check, 'c'), 'checkout', '-q', '--detach', sha);
        const tests = await execa('node', ['test.js'], { cwd: join(check, 'c'), reject: false });
        expect(tests.exitCode, `${r.name}'s trunk red at ${sha}: ${tests.stdout}\n${detail()}`).toBe(0);
      }
    }
    const reader = await hosts.connect(cluster.url);
    // No stale generation wrote: each run's lines are of one generation, and generations grow run after run.
    // Run ids begin with the time they started: their order is the order of the runs.
    for (const r of repos) {
      const { rows } = await reader.query<{ run: string; lo: string; hi: string }>(
        'select run, min(generation) as lo, max(generation) as hi from tron_events where repository = $1 group by run order by run',
        [r.name],
      );
      for (const row of rows)
        expect(row.lo, `${r.name}'s run ${row.run} written by generations ${row.lo}..${row.hi}\n${detail()}`).toBe(row.hi);
      const gens = rows.map((row) => Number(row.lo));
      expect(gens, `${r.name}'s generations\n${detail()}`).toEqual([...gens].sort((a, b) => a - b));
    }
    // Every job was run by a pool of its own repository: an agent started for it (the engine's own pool runs none here).
    const { rows: jobs } = await reader.query<{
      repository: string;
      run: string;
      seq: number;
      role: string;
      state: string;
      attempt: number;
      worker: string | null;
      pool: string | null;
      outcome: { ok?: boolean; inputs?: Array<Record<string, unknown>> } | null;
    }>('select repository, run, seq, role, state, attempt, worker, pool, outcome from tron_jobs order by repository, run, seq');
    expect(jobs.length, 'jobs were run').toBeGreaterThan(0);
    ownJobs(jobs);
    // Every reply in a repository's log is the one its job's holding attempt recorded: a reply of the same block, role,
    // session and turn in the outcome of a done job of that repository and run (the database takes a result only from the
    // attempt that holds the job). A late result of a killed, stalled or foreign attempt has no such job.
    for (const r of repos) {
      const { rows } = await reader.query<{ run: string; line: string }>(
        `select run, line from tron_events where repository = $1 and line like '%"type":"reply.received"%' order by run, seq`,
        [r.name],
      );
      let replies = 0;
      for (const row of rows) {
        const e = JSON.parse(row.line) as Record<string, unknown>;
        if (e.type !== 'reply.received' || e.ok !== true) continue;
        replies += 1;
        const answers = jobs.some(
          (j) =>
            j.repository === r.name &&
            j.run === row.run &&
            j.state === 'done' &&
            j.outcome?.ok === true &&
            (j.outcome.inputs ?? []).some(
              (i) =>
                i.type === 'reply.received' &&
                i.block === e.block &&
                i.role === e.role &&
                i.session === e.session &&
                i.turn === e.turn &&
                i.reply === e.reply,
            ),
        );
        expect(answers, `${r.name}'s run ${row.run}: ${row.line} answers no job of it that its holding attempt finished\n${detail()}`).toBe(
          true,
        );
      }
      expect(replies, `${r.name}'s log holds replies`).toBeGreaterThanOrEqual(r.ids.length);
    }
  }, 400_000);
});
