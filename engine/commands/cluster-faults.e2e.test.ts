/**
 * The engine's and the database's faults, against a real PostgreSQL, through the CLI: the
 * database restarted mid-run, the leader SIGKILLed while a standby waits, two engines
 * (two clones, as on two hosts) started at once. Nothing lost, nothing landed twice.
 *
 * The restart needs a server this file starts itself (engine/testing/postgres.ts
 * `startCluster`, a throwaway cluster under /tmp), never the shared one of
 * TRON_TEST_DATABASE_URL.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestRepo, testGit } from '../testing/repo.ts';
import { clusterHosts, ended, landedOnce, untilLine } from '../testing/cluster-hosts.ts';
import { type Cluster, needPostgresServer, startCluster } from '../testing/postgres.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { openDatabase } from '../log/pg-log.ts';

const SERVER = needPostgresServer();
const NO_SERVER = skipWithout('the engine and database faults', SERVER);

describe.skipIf(NO_SERVER)('faults of the engine and the database', () => {
  let cluster: Cluster;
  const hosts = clusterHosts();
  beforeAll(async () => {
    requireAll(SERVER);
    cluster = await startCluster();
    // The schema is there before the tests watch the tables (any start would make it).
    await (await openDatabase(cluster.url)).end();
  }, 60_000);
  afterAll(() => cluster?.stop(), 60_000);
  afterEach(() => hosts.end());

  const connect = () => hosts.connect(cluster.url);
  const cli = (args: string[], env: Record<string, string> = {}) => hosts.cli(args, { env });

  /** A project whose builder holds its first turn until `go` exists, its log in the cluster's database. */
  const heldProject = (repository: string, lease: string) => hosts.heldProject({ database: cluster.url, repository, lease });

  it('stops cleanly when the database restarts mid-run, and the next start resumes through recovery: nothing lost, nothing landed twice', async () => {
    const { repo, go } = await heldProject('restarted', '30s');
    const db = await connect();
    const engine = cli(['start', '--repo', repo.dir, '--plain']);
    await untilLine(db, { type: 'worker.spawned' }, { repository: 'restarted', engine });
    const before = Number((await db.query(`select count(*) as n from tron_events where repository = 'restarted'`)).rows[0].n);
    await db.end();
    // The server goes down and comes back while the builder works: every connection of the engine is cut.
    cluster.restart('fast');
    writeFileSync(go, '');
    const stopped = await engine;
    expect(stopped.exitCode, `${stopped.stdout}\n${stopped.stderr}`).toBe(1);
    // Said in one coded line, no stack trace.
    expect(`${stopped.stdout}\n${stopped.stderr}`).toContain('TRON_DB_LOST');
    expect(`${stopped.stdout}\n${stopped.stderr}`).not.toMatch(/\n\s+at /);
    const again = await connect();
    // What was committed before the restart is all there.
    expect(
      Number((await again.query(`select count(*) as n from tron_events where repository = 'restarted'`)).rows[0].n),
    ).toBeGreaterThanOrEqual(before);
    // The engine let its lease go on a fresh connection as it stopped: the next start need not wait out the 30 s.
    const lease = await again.query(`select expires_at <= now() as lapsed from tron_lease where repository = 'restarted'`);
    expect(lease.rows[0].lapsed).toBe(true);
    const resumed = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(resumed.exitCode, `${resumed.stdout}\n${resumed.stderr}`).toBe(0);
    await landedOnce(repo, ['alpha'], (id) => id);
    const { rows } = await again.query<{ run: string; generation: string }>(
      `select distinct run, generation from tron_events where repository = 'restarted' order by run`,
    );
    expect(rows.map((r) => Number(r.generation))).toEqual([1, 2]);
    const second = await again.query<{ line: string }>(
      `select line from tron_events where repository = 'restarted' and run = $1 order by seq`,
      [rows[1]!.run],
    );
    const types = second.rows.map((r) => (JSON.parse(r.line) as { type: string }).type);
    expect(types).toContain('recovery.started');
    expect(types.at(-1)).toBe('run.finished');
  }, 180_000);

  it('has a waiting standby take over from a SIGKILLed leader within two lease periods, and land the block once', async () => {
    // Long enough that two periods hold however late a busy machine runs the standby's
    // polls (a quarter period apart) and this test's own.
    const leaseMs = 4000;
    const { repo, go } = await heldProject('killed', '4s');
    const db = await connect();
    // The leader holds alpha's build until `go`: it is alive until this test kills it.
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await untilLine(db, { type: 'block.dispatched' }, { repository: 'killed', engine: leader });
    // The standby waits beside the live leader, and says so.
    const standby = cli(['start', '--repo', repo.dir, '--plain', '--standby']);
    let said = '';
    standby.stdout!.on('data', (chunk: Buffer) => {
      said += chunk.toString();
    });
    while (!said.includes('standby —')) {
      if (ended(standby)) throw new Error(`the standby ended before it waited: ${said}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    // The database's clock just before the kill: the leader's last renewal was no later.
    const { rows: before } = await db.query<{ now: Date }>('select now() as now');
    leader.kill('SIGKILL');
    const died = await leader;
    expect(died.signal).toBe('SIGKILL');
    // When did the next generation take the lease? No later than its expiry less one
    // period (each renewal moves the expiry on), whenever this test gets to look.
    let takenAt: number | undefined;
    while (takenAt === undefined) {
      const { rows } = await db.query<{ generation: string; taken: Date }>(
        `select generation, expires_at - $1::interval as taken from tron_lease where repository = 'killed'`,
        [`${leaseMs} milliseconds`],
      );
      if (Number(rows[0]!.generation) === 2) takenAt = rows[0]!.taken.getTime();
      else if (ended(standby)) throw new Error('the standby ended without the lease');
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(takenAt - before[0]!.now.getTime()).toBeLessThanOrEqual(2 * leaseMs);
    writeFileSync(go, '');
    const done = await standby;
    expect(done.exitCode, `${done.stdout}\n${done.stderr}`).toBe(0);
    expect(done.stderr).toBe('');
    await landedOnce(repo, ['alpha'], (id) => id);
    const gens = await db.query(`select distinct generation from tron_events where repository = 'killed' order by generation`);
    expect(gens.rows.map((r) => Number(r.generation))).toEqual([1, 2]);
  }, 180_000);

  it('lets exactly one of two engines started at once on two clones lead; the other exits 2 naming it, and writes nothing', async () => {
    const { repo, go } = await heldProject('twins', '30s');
    const twin = hosts.folder('tron-twin-');
    await testGit(tmpdir(), 'clone', '-q', repo.dir, twin);
    const db = await connect();
    const a = cli(['start', '--repo', repo.dir, '--plain']);
    const b = cli(['start', '--repo', twin, '--plain']);
    // The loser ends at once; the leader waits on its builder.
    const first = await Promise.race([a.then((r) => ({ who: 'a', r })), b.then((r) => ({ who: 'b', r }))]);
    expect(first.r.exitCode, `${first.r.stdout}\n${first.r.stderr}`).toBe(2);
    expect(first.r.stderr).toContain('TRON_LEASE_HELD');
    expect(first.r.stderr).toContain('generation 1');
    writeFileSync(go, '');
    const [ra, rb] = await Promise.all([a, b]);
    const winner = first.who === 'a' ? rb : ra;
    expect(winner.exitCode, `${winner.stdout}\n${winner.stderr}`).toBe(0);
    const { rows } = await db.query(`select distinct run, generation from tron_events where repository = 'twins'`);
    expect(rows.map((r) => Number(r.generation))).toEqual([1]);
    await landedOnce(first.who === 'a' ? repo.at(twin) : repo, ['alpha'], (id) => id);
  }, 180_000);
  it('lets the documented reader role read a run from any host, and nothing more', async () => {
    const repo = await hosts.landingProject({ database: cluster.url, repository: 'read-only' }, ['alpha']);
    expect((await cli(['start', '--repo', repo.dir, '--plain'])).exitCode).toBe(0);
    const db = await connect();
    // As docs/cluster.md sets it up.
    await db.query(`create role tron_reader login password 'reads'`);
    await db.query('grant select on tron_events, tron_lease, tron_schema, tron_run_files to tron_reader');
    const reader = cluster.url.replace('//tron@', '//tron_reader:reads@');
    const other = hosts.folder('tron-reader-host-');
    const at = (args: string[]) => hosts.cli(args, { cwd: other });
    const status = await at(['status', '--database', reader, '--json']);
    expect(status.exitCode, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      repository: 'read-only',
      engine: 'finished',
      blocks: [{ block: 'alpha', phase: 'landed' }],
    });
    hosts.removeAtEnd(join(tmpdir(), 'tron-view', 'read-only'));
    for (const args of [['logs'], ['replay'], ['report'], ['view']]) {
      const r = await at([...args, '--database', reader]);
      expect(r.exitCode, `${args[0]}: ${r.stderr}`).toBe(0);
    }
    // The password is never printed.
    expect(status.stdout).not.toContain('reads@');
    // And it cannot write: not a line, not a lease; nor read the repository's key.
    const raw = await hosts.connect(reader);
    for (const sql of [
      `insert into tron_events (repository, run, seq, generation, line) values ('read-only', 'x', 1, 1, '{}')`,
      `update tron_lease set generation = 99`,
      // Nor learn the key the engines sign the lines with.
      'select key from tron_keys',
    ]) {
      const code = await raw.query(sql).then(
        () => undefined,
        (err: { code?: string }) => err.code,
      );
      expect(code, sql).toBe('42501');
    }
  }, 120_000);
  /** A crash project whose log is in the cluster's database under `repository`, with a short lease. */
  const clusterCrashProject = (repository: string): Promise<TestRepo> =>
    hosts.crashProject({ database: cluster.url, repository, lease: '1s' });

  /** Every line of the repository's runs in the table, oldest run first. */
  async function tableRuns(db: pg.Client, repository: string): Promise<{ type: string; seq: number; sha?: string }[][]> {
    const { rows } = await db.query<{ run: string; line: string }>(
      'select run, line from tron_events where repository = $1 order by run, seq',
      [repository],
    );
    const runs = new Map<string, { type: string; seq: number; sha?: string }[]>();
    for (const r of rows) runs.set(r.run, [...(runs.get(r.run) ?? []), JSON.parse(r.line) as { type: string; seq: number }]);
    return [...runs.values()];
  }

  /** Every block landed once, trunk linear and green at every landed sha, and trunk's files as a clean run leaves them. */
  async function finishedWell(repo: TestRepo, tree: string): Promise<void> {
    await landedOnce(repo, ['alpha', 'beta', 'gamma'], (id) => `Build ${id}`);
    expect(await repo.git('rev-list', '--min-parents=2', 'main')).toBe('');
    for (const id of ['alpha', 'beta', 'gamma']) {
      const sha = await repo.git('rev-parse', `refs/tron/landed/${id}`);
      const dir = join(repo.dir, '.tron', `check-${id}`);
      await repo.git('worktree', 'add', '-q', '--detach', dir, sha);
      expect((await execa('node', ['test.js'], { cwd: dir, reject: false })).exitCode, `${id} green at ${sha}`).toBe(0);
      await repo.git('worktree', 'remove', '--force', dir);
    }
    const files = (await repo.git('ls-tree', '-r', 'main')).split('\n').filter((l) => !l.includes('\t.tron/'));
    expect(files.join('\n')).toBe(tree);
  }

  it('lands every block exactly once with trunk green when the leader dies at a spread of event boundaries and a waiting standby takes over', async () => {
    const db = await connect();
    // A clean run first: how many lines a run writes, and the trunk it leaves.
    const clean = await clusterCrashProject('sweep-clean');
    expect((await cli(['start', '--repo', clean.dir, '--plain'])).exitCode).toBe(0);
    const cleanTree = (await clean.git('ls-tree', '-r', 'main')).split('\n').filter((l) => !l.includes('\t.tron/'));
    const [events] = await tableRuns(db, 'sweep-clean');
    const total = events!.length;
    const landing = events!.filter((e) => e.type === 'land.intent' || e.type === 'block.landed').map((e) => e.seq);
    // TRON_CRASH_SWEEP=full: every boundary (npm run test:crash); else a spread, with the first landing.
    const points =
      process.env.TRON_CRASH_SWEEP === 'full'
        ? Array.from({ length: total - 1 }, (_, i) => i + 1)
        : [...new Set([3, Math.floor(total / 3), landing[0]!, Math.floor((2 * total) / 3)])].sort((a, b) => a - b);
    for (const n of points) {
      const repository = `sweep-${n}`;
      const repo = await clusterCrashProject(repository);
      const leader = cli(['start', '--repo', repo.dir, '--plain'], { TRON_CRASH_AFTER_EVENT: String(n) });
      // The leader holds the lease before it writes a line (it may die before its first commit).
      while (!ended(leader) && (await db.query('select 1 from tron_lease where repository = $1', [repository])).rows.length === 0)
        await new Promise((r) => setTimeout(r, 20));
      const standby = cli(['start', '--repo', repo.dir, '--plain', '--standby']);
      const died = await leader;
      expect(died.signal, `the leader at event ${n}: ${died.stdout}`).toBe('SIGKILL');
      const done = await standby;
      expect(done.exitCode, `the standby after a crash at event ${n}: ${done.stdout}\n${done.stderr}`).toBe(0);
      expect(done.stderr).toBe('');
      await finishedWell(repo, cleanTree.join('\n'));
      // Two generations wrote, each its own run, and the standby's began by recovering.
      const gens = await db.query(
        `select run, min(generation) as g, max(generation) as h from tron_events where repository = $1 group by run order by run`,
        [repository],
      );
      // The leader's run (when a line of it was committed before it died) is generation 1's; the standby's, which began by recovering, generation 2's.
      const written = gens.rows.map((r) => [Number(r.g), Number(r.h)]);
      expect(written.at(-1)).toEqual([2, 2]);
      expect(written.slice(0, -1)).toEqual(written.length === 2 ? [[1, 1]] : []);
      const runs = await tableRuns(db, repository);
      if (runs.length === 2) expect(runs[0]!.length, `the leader's committed lines at event ${n}`).toBeLessThanOrEqual(n);
      expect(runs.at(-1)!.some((e) => e.type === 'recovery.started')).toBe(true);
      // Nothing landed twice across the two engines: each block's landing is recorded once.
      const landedEvents = runs.flat().filter((e) => e.type === 'block.landed');
      expect(landedEvents.length, `block.landed lines after a crash at event ${n}`).toBe(3);
    }
  }, 900_000);
});
