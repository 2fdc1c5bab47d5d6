/**
 * How engines, standbys and agents come up and go down against a real PostgreSQL, through
 * the CLI: many started at once on an empty database, a leader paused past its lease or
 * cut off from the database (it exits, with its coded line), a waiting standby riding a
 * database restart, clones in folders of different names sharing one lease.
 *
 * The restart needs a server this file starts itself (engine/testing/postgres.ts
 * `startCluster`), never the shared one of TRON_TEST_DATABASE_URL; each test takes a fresh
 * database of that server.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testGit } from '../testing/repo.ts';
import { clusterHosts, type Ended, ended, untilLine } from '../testing/cluster-hosts.ts';
import { type Cluster, needPostgresServer, startCluster } from '../testing/postgres.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { openDatabase } from '../log/pg-log.ts';
import { migrateJobs } from '../queue/pg-jobs.ts';

const SERVER = needPostgresServer();
const NO_SERVER = skipWithout('the engines coming up and going down', SERVER);

describe.skipIf(NO_SERVER)('engines coming up and going down', () => {
  let cluster: Cluster;
  const hosts = clusterHosts();
  let databases = 0;
  beforeAll(async () => {
    requireAll(SERVER);
    cluster = await startCluster();
  }, 60_000);
  afterAll(() => cluster?.stop(), 60_000);
  afterEach(() => hosts.end());

  /** A fresh, empty database of the cluster: its URL. */
  async function freshDatabase(): Promise<string> {
    databases += 1;
    const name = `lifecycle_${databases}`;
    const admin = await connect(cluster.url);
    await admin.query(`create database ${name}`);
    return cluster.url.replace(/\/postgres$/, `/${name}`);
  }

  const { cli, connect, said, cloneOf } = hosts;

  /** A project whose builder holds its first turn until `go` exists, its log in `url`, on a remote the clones are made from. */
  const heldProject = (url: string, lease: string, repository?: string, extra = '', clusterExtra = '') =>
    hosts.heldProject({ database: url, lease, ...(repository !== undefined && { repository }), extra, clusterExtra, remote: true });

  const until = (db: pg.Client, type: string, engine?: Ended, generation?: number) =>
    untilLine(db, { type }, { ...(engine && { engine }), ...(generation !== undefined && { generation }) });

  /** The lease row of the database's one repository. */
  async function leaseOf(db: pg.Client): Promise<{ generation: number; lapsed: boolean; repository: string }> {
    const { rows } = await db.query<{ generation: string; lapsed: boolean; repository: string }>(
      'select repository, generation, expires_at <= now() as lapsed from tron_lease',
    );
    expect(rows).toHaveLength(1);
    return { ...rows[0]!, generation: Number(rows[0]!.generation) };
  }

  it('brings up four engines and two agents of two repositories started at once on an empty database', async () => {
    const url = await freshDatabase();
    const db = await connect(url);
    const projects = [await heldProject(url, '30s', undefined, '\n[remote]\n'), await heldProject(url, '30s', undefined, '\n[remote]\n')];
    const clones = await Promise.all(
      projects.flatMap(({ repo }) => [cloneOf(repo, 'first'), cloneOf(repo, 'second'), cloneOf(repo, 'agent')]),
    );
    // All at once: two engines of each repository (one leads, one stands by) and an agent of each.
    const engines = clones.filter((_, i) => i % 3 !== 2).map((dir) => cli(['start', '--repo', dir, '--plain', '--standby']));
    const agents = clones.filter((_, i) => i % 3 === 2).map((dir) => cli(['agent', '--repo', dir, '--database', url]));
    await Promise.all([
      ...engines.map((e) => Promise.race([said(e, 'run 2'), said(e, 'standby —')])),
      ...agents.map((a) => said(a, 'claims')),
    ]);
    for (const p of [...engines, ...agents]) expect(ended(p), `${p.spawnargs.join(' ')} still runs`).toBe(false);
    const { rows } = await db.query('select repository, generation from tron_lease order by repository');
    expect(rows.map((r) => Number(r.generation))).toEqual([1, 1]);
  }, 180_000);

  it('has clones in folders of other names share one lease without [cluster] repository, and refuses the same remote under another name', async () => {
    const url = await freshDatabase();
    const { repo, go } = await heldProject(url, '30s');
    const db = await connect(url);
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await until(db, 'worker.spawned', leader);
    const remote = await repo.git('remote', 'get-url', 'origin');
    // One lease, named by the remote every clone shares (normalized: no trailing .git).
    expect((await leaseOf(db)).repository).toBe(remote.replace(/\.git$/, ''));
    const standby = cli(['start', '--repo', await cloneOf(repo, 'somewhere-else'), '--plain', '--standby']);
    await said(standby, `leads ${remote.replace(/\.git$/, '')}`);
    // The same remote under a name of its own: refused, naming the first, before it takes anything.
    const third = await cloneOf(repo, 'third');
    const named = join(third, '.tron', 'config.toml');
    writeFileSync(named, `${readFileSync(named, 'utf8')}`.replace('[cluster]\n', '[cluster]\nrepository = "mine"\n'));
    await testGit(third, 'commit', '-qam', 'named');
    const refused = await cli(['start', '--repo', third, '--plain']);
    expect(refused.exitCode, `${refused.stdout}\n${refused.stderr}`).toBe(2);
    expect(refused.stderr).toContain('TRON_REPOSITORY_CONFLICT');
    expect(refused.stderr).toContain(`as "${remote.replace(/\.git$/, '')}"`);
    writeFileSync(go, '');
    expect((await leader).exitCode).toBe(0);
    // The standby takes the released lease and finds nothing left to do.
    const done = await standby;
    expect(done.exitCode, `${done.stdout}\n${done.stderr}`).toBe(0);
    const { rows } = await db.query('select distinct repository from tron_events');
    expect(rows).toHaveLength(1);
  }, 180_000);

  it("says what to set when the database holds runs under the clone's folder name (an older tron's) and none under the remote's", async () => {
    const url = await freshDatabase();
    const { repo } = await heldProject(url, '30s');
    const db = await connect(url);
    // A database an older tron wrote: the repository named by its folder.
    await (await openDatabase(url)).end();
    const folder = repo.dir.split('/').at(-1)!;
    await db.query(`insert into tron_lease values ($1, 3, 'an older tron', now())`, [folder]);
    const refused = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(refused.exitCode, `${refused.stdout}\n${refused.stderr}`).toBe(2);
    expect(refused.stderr).toContain('TRON_REPOSITORY_RENAMED');
    expect(refused.stderr).toContain(`[cluster] repository = "${folder}"`);
  }, 120_000);

  it('has a leader paused past its lease exit within seconds of waking, with TRON_LEASE_LOST, while the standby finishes', async () => {
    const url = await freshDatabase();
    const { repo, go } = await heldProject(url, '3s');
    const db = await connect(url);
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await until(db, 'worker.spawned', leader);
    const standby = cli(['start', '--repo', await cloneOf(repo), '--plain', '--standby']);
    await said(standby, 'standby —');
    leader.kill('SIGSTOP');
    // The standby takes the lapsed lease and starts its run (generation 2).
    await until(db, 'run.started', standby, 2);
    leader.kill('SIGCONT');
    const woke = Date.now();
    const old = await leader;
    expect(Date.now() - woke, 'seconds from waking to exit').toBeLessThan(15_000);
    expect(old.exitCode, `${old.stdout}\n${old.stderr}`).toBe(1);
    expect(`${old.stdout}\n${old.stderr}`).toContain('TRON_LEASE_LOST');
    expect(`${old.stdout}\n${old.stderr}`).not.toMatch(/\n\s+at /);
    writeFileSync(go, '');
    const done = await standby;
    // The standby goes on to the end (0; or 3 should the old leader's pool, as it woke, have claimed the
    // standby's turn before it stopped — jobs claimed across generations, issue 37 item 1).
    expect([0, 3], `${done.stdout}\n${done.stderr}`).toContain(done.exitCode);
    expect((await leaseOf(db)).generation).toBe(2);
  }, 180_000);

  it('has a waiting standby ride a database restart: it says so once, reconnects, takes over from the stopped leader and finishes', async () => {
    const url = await freshDatabase();
    const { repo, go } = await heldProject(url, '30s');
    let db = await connect(url);
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await until(db, 'worker.spawned', leader);
    const standby = cli(['start', '--repo', await cloneOf(repo, 'standby-host'), '--plain', '--standby']);
    await said(standby, 'standby —');
    await db.end();
    // The server goes down and comes back: every connection of both is cut.
    cluster.restart('fast');
    const stopped = await leader;
    expect(stopped.exitCode, `${stopped.stdout}\n${stopped.stderr}`).toBe(1);
    expect(`${stopped.stdout}\n${stopped.stderr}`).toContain('TRON_DB_LOST');
    await said(standby, 'is back');
    db = await connect(url);
    await until(db, 'run.started', standby, 2);
    writeFileSync(go, '');
    const done = await standby;
    expect(done.exitCode, `${done.stdout}\n${done.stderr}`).toBe(0);
    expect(done.stdout.match(/went away/g), done.stdout).toHaveLength(1);
    expect(`${done.stdout}\n${done.stderr}`).not.toMatch(/\n\s+at /);
    expect((await leaseOf(db)).generation).toBe(2);
  }, 180_000);

  it('has an agent ride a database restart: it says so once, reconnects, and runs the next turn', async () => {
    const url = await freshDatabase();
    const { repo, go } = await heldProject(url, '30s', undefined, '\n[remote]\n', 'jobs = "agents"\nheartbeat = "500ms"\n');
    const made = await openDatabase(url);
    await migrateJobs(made);
    await made.end();
    const agent = cli(['agent', '--repo', await cloneOf(repo, 'agent-host'), '--database', url]);
    await said(agent, 'claims');
    cluster.restart('fast');
    await said(agent, 'is back');
    writeFileSync(go, '');
    const engine = cli(['start', '--repo', repo.dir, '--plain']);
    const done = await engine;
    expect(done.exitCode, `${done.stdout}\n${done.stderr}\n${hosts.output(agent)}`).toBe(0);
    const said_ = hosts.output(agent);
    expect(said_.match(/went away/g), said_).toHaveLength(1);
    expect(said_).toMatch(/builder_turn|build/);
    expect(ended(agent), said_).toBe(false);
    agent.kill('SIGTERM');
    const left = await agent;
    expect(left.exitCode, said_).toBe(0);
    expect(said_).not.toMatch(/\n\s+at /);
  }, 180_000);

  it('has a leader whose every connection is dropped exit 1 with TRON_DB_LOST within seconds, its lease let go', async () => {
    const url = await freshDatabase();
    const { repo } = await heldProject(url, '30s');
    const db = await connect(url);
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await until(db, 'worker.spawned', leader);
    const { rows } = await db.query<{ n: number }>(
      'select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
    );
    expect(rows[0]!.n).toBeGreaterThan(0);
    const cut = Date.now();
    const stopped = await leader;
    expect(Date.now() - cut, 'seconds from the cut to exit').toBeLessThan(15_000);
    expect(stopped.exitCode, `${stopped.stdout}\n${stopped.stderr}`).toBe(1);
    expect(`${stopped.stdout}\n${stopped.stderr}`).toContain('TRON_DB_LOST');
    expect(`${stopped.stdout}\n${stopped.stderr}`).not.toMatch(/\n\s+at /);
    expect((await leaseOf(db)).lapsed, 'the lease let go').toBe(true);
  }, 120_000);
  it('has a leader whose effect fails exit 1 with TRON_ENGINE_FAILED within seconds, its lease let go', async () => {
    const url = await freshDatabase();
    const { repo, go } = await heldProject(url, '30s');
    const db = await connect(url);
    const leader = cli(['start', '--repo', repo.dir, '--plain']);
    await until(db, 'worker.spawned', leader);
    // The engine cannot write the turn's transcript: a folder stands where the file was.
    const runs = join(repo.dir, '.tron', 'runs');
    const transcript = join(runs, readdirSync(runs).sort().at(-1)!, 'transcript.md');
    rmSync(transcript, { force: true });
    mkdirSync(transcript);
    const cut = Date.now();
    writeFileSync(go, '');
    const stopped = await leader;
    expect(Date.now() - cut, 'seconds from the failure to exit').toBeLessThan(15_000);
    const out = `${stopped.stdout}\n${stopped.stderr}`;
    expect(stopped.exitCode, out).toBe(1);
    expect(out).toMatch(/TRON_ENGINE_FAILED: the effect of [a-z.]+ for alpha failed: EISDIR/);
    expect(out).not.toMatch(/\n\s+at /);
    expect((await leaseOf(db)).lapsed, 'the lease let go').toBe(true);
  }, 120_000);
});
