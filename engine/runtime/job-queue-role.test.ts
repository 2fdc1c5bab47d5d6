/**
 * The agents' database role of docs/cluster.md ("Roles"), made with exactly the grants
 * `agentGrants` prints, in a throwaway cluster of its own (making a role needs a superuser,
 * which a CI's given URL need not be): it claims and completes jobs through the queue, and
 * can read or write nothing of the log, the lease or the jobs' table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { ManualClock } from '../core/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { agentGrants, completeJob, connect, JOB_MIGRATIONS, migrateJobs, QUIET, STALE_ATTEMPT } from '../log/pg-jobs.ts';
import { type Database, DatabaseFullError, openDatabase, PgEventLog } from '../log/pg-log.ts';
import { agentCommand } from '../commands/agent.ts';
import { configFile, landingSim, makeProject } from '../testing/project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { BIN } from '../testing/crash.ts';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { makeBareRemote } from '../testing/remote-server.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { startWorkers } from './job-queue.ts';
import { asksFor, noteJob, OUTPUT_NOTE_CHARS } from '../log/pg-job-control.ts';

// A cluster of this file's own, where the test is the superuser. The URL is given back
// after: a test process may run other files after this one (vitest.config.ts: isolate).
const given = process.env.TRON_TEST_DATABASE_URL;
delete process.env.TRON_TEST_DATABASE_URL;
afterAll(() => {
  if (given !== undefined) process.env.TRON_TEST_DATABASE_URL = given;
});
const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout('the agents’ database role', POSTGRES);

describe.skipIf(NO_DATABASE)('the agents’ database role', () => {
  let server: TestDatabase;
  let db: Database;
  let agentUrl: string;
  beforeAll(async () => {
    requireAll(POSTGRES);
    server = await testDatabase();
    db = await openDatabase(server.url);
    await migrateJobs(db);
    await db.client.query(`create role tron_agent login password 'agent'`);
    await db.client.query(agentGrants('tron_agent'));
    const url = new URL(server.url);
    url.username = 'tron_agent';
    url.password = 'agent';
    agentUrl = url.toString();
  }, 120_000);
  afterAll(async () => {
    await db?.end();
    await server?.stop();
  }, 60_000);

  it('claims and completes jobs, and reads or writes nothing of the log, the lease or the jobs’ table', async () => {
    const lease = await acquireLease(db, { repository: 'roles', periodMs: 30_000 });
    const log = (await PgEventLog.open(db, lease, '20260101-000000-001', Buffer.alloc(32, 5))).attach(new ManualClock(0));
    log.groupCommit = true;
    const e = log.append({ type: 'merge.queued', block: 'alpha' });
    log.enqueue(e.seq, { kind: 'test.requested', role: 'test', request: { n: 1 } });
    await log.sync();
    const key = { repository: 'roles', run: '20260101-000000-001', seq: e.seq };
    const pool = await startWorkers({
      url: agentUrl,
      roles: ['test'],
      slots: 1,
      agent: 'restricted',
      heartbeatMs: 500,
      run: async (claimed) => ({ ok: true, inputs: [{ type: 'seen', request: claimed.request }] }),
    });
    try {
      for (;;) {
        const { rows } = await db.client.query(`select state, outcome from tron_jobs where repository = 'roles' and seq = $1`, [e.seq]);
        if (rows[0].state === 'done') {
          expect(rows[0].outcome).toEqual({ ok: true, inputs: [{ type: 'seen', request: { n: 1 } }] });
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await pool.stop();
    }
    const agent = new pg.Client({ connectionString: agentUrl });
    await agent.connect();
    try {
      for (const sql of [
        'select line from tron_events',
        'select * from tron_lease',
        'select key from tron_keys',
        'select request from tron_jobs',
        `update tron_lease set generation = generation + 1`,
        `insert into tron_jobs (repository, run, seq, generation, kind, role, request) values ('roles', 'r', 1, 1, 'k', 'test', '{}')`,
        `update tron_jobs set state = 'done'`,
      ]) {
        await expect(agent.query(sql), sql).rejects.toMatchObject({ code: '42501' });
      }
      // Through the functions it may call, only as the attempt that holds the job.
      await expect(completeJob(agent, key, 1, { ok: true, inputs: [{ type: 'again' }] })).rejects.toMatchObject({ code: STALE_ATTEMPT });
      // The engine's asks and an attempt's notes (log/pg-job-control.ts): only through their functions, fenced alike.
      expect(await asksFor(agent, 'restricted')).toEqual([]);
      expect(await noteJob(agent, key, 1, { kind: 'started' })).toBe(false);
      for (const sql of [
        'select * from tron_job_asks',
        `insert into tron_job_notes (repository, run, seq, attempt, body) values ('roles', 'r', 1, 1, '{}')`,
      ]) {
        await expect(agent.query(sql), sql).rejects.toMatchObject({ code: '42501' });
      }
    } finally {
      await agent.end();
    }
    await log.close();
  }, 60_000);

  it('lets a role granted before version 3 of the queue’s schema ask which jobs to leave and the queue’s version, once the engine migrated it', async () => {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('create database tron_older').finally(() => admin.end());
    const url = new URL(server.url);
    url.pathname = '/tron_older';
    const older = await openDatabase(url.toString());
    try {
      // The queue's schema as version 2 left it, and the agents' role as it was granted then.
      const { runMigrations } = await import('graphile-worker');
      await runMigrations({ connectionString: url.toString(), logger: QUIET });
      await older.client.query(
        'create table tron_queue_schema (version integer primary key, applied_at timestamptz not null default now())',
      );
      for (const [i, sql] of JOB_MIGRATIONS.slice(0, 2).entries()) {
        await older.client.query(sql);
        await older.client.query('insert into tron_queue_schema (version) values ($1)', [i + 1]);
      }
      await older.client.query(`create role tron_older_agent login password 'older'`);
      const before = agentGrants('tron_older_agent').replace(/,\s*tron_near_elsewhere\(text, interval\), tron_queue_version\(\)/, '');
      expect(before).not.toContain('tron_near_elsewhere');
      expect(before).not.toContain('tron_queue_version');
      await older.client.query(before);
      await migrateJobs(older);
      const agentAt = new URL(url);
      agentAt.username = 'tron_older_agent';
      agentAt.password = 'older';
      const agent = new pg.Client({ connectionString: agentAt.toString() });
      await agent.connect();
      try {
        const { rows } = await agent.query(`select tron_near_elsewhere('someone', '1 second') as f`);
        expect(rows[0].f).toEqual([]);
        const version = await agent.query('select tron_queue_version() as v');
        expect(version.rows[0].v).toBe(JOB_MIGRATIONS.length);
      } finally {
        await agent.end();
      }
    } finally {
      await older.end();
    }
  }, 60_000);

  it('ends an agent that the database has no connection left for with TRON_DB_FULL, leaving no connection of its own open', async () => {
    const bare = await makeBareRemote();
    const repo = await makeProject({
      blocks: {},
      config: configFile({ extra: `\n[remote]\n\n[cluster]\njobs = "agents"\n` }),
    });
    // The superuser's own connection (the log's went with the first test's log).
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    const held = async () =>
      Number((await admin.query(`select count(*) as n from pg_stat_activity where usename = 'tron_agent'`)).rows[0].n);
    try {
      // By the way: the notes' kinds and an output note's size are checked in SQL (version 5 of the queue's schema).
      for (const body of [
        { kind: 'bogus' },
        { kind: 'output', offset: 0, text: 'x'.repeat(OUTPUT_NOTE_CHARS + 1) },
        { kind: 'output', text: 'no offset' },
        { text: 'no kind' },
      ]) {
        const insert = admin.query(`insert into tron_job_notes (repository, run, seq, attempt, body) values ('roles', 'r', 1, 1, $1)`, [
          JSON.stringify(body),
        ]);
        await expect(insert, JSON.stringify(body).slice(0, 60)).rejects.toMatchObject({ code: '23514' });
      }
      await repo.git('remote', 'add', 'origin', bare.dir);
      // Two connections: the agent's asks and its heartbeat; the queue's own listener finds none left.
      await admin.query('alter role tron_agent connection limit 2');
      const started = agentCommand({
        repo: repo.dir,
        database: agentUrl,
        roles: ['test'],
        clock: new ManualClock(0),
        env: { ...process.env, TRON_DATABASE_URL: '' },
        print: () => undefined,
      });
      await expect(started).rejects.toMatchObject({ code: 'TRON_DB_FULL', message: expect.stringContaining('CONNECTION LIMIT') });
      // Nothing it opened stays open (an open connection kept the agent's process alive after the error).
      for (let i = 0; i < 100 && (await held()) > 0; i += 1) await new Promise((r) => setTimeout(r, 50));
      expect(await held()).toBe(0);
      // A plain connect says the same.
      await admin.query('alter role tron_agent connection limit 0');
      await expect(connect(agentUrl)).rejects.toBeInstanceOf(DatabaseFullError);
    } finally {
      await admin.query('alter role tron_agent connection limit -1');
      await admin.end();
      await repo.cleanup();
      await bare.cleanup();
    }
  }, 60_000);
  it('stops a tron start that the database has no connection to spare for with TRON_DB_FULL, before any run directory is made', async () => {
    // A role that owns a database of its own, with one connection: the lease's is the last, the queue's migration finds none.
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query(`create role tron_one login password 'one' connection limit 1`);
    await admin.query('create database tron_one owner tron_one');
    const url = new URL(server.url);
    url.username = 'tron_one';
    url.password = 'one';
    url.pathname = '/tron_one';
    const repo = await makeProject({
      blocks: { alpha: {} },
      sim: landingSim(['alpha']),
      config: configFile({ extra: `\n[cluster]\nrepository = "one"\n` }),
    });
    try {
      const started = await execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], {
        reject: false,
        stdin: 'ignore',
        env: { ...GIT_IDENTITY_ENV, TRON_DATABASE_URL: url.toString() },
        timeout: 60_000,
      });
      expect(started.exitCode, `${started.stdout}\n${started.stderr}`).toBe(1);
      expect(started.stderr).toContain('TRON_DB_FULL');
      expect(started.stderr).not.toMatch(/\n\s+at /);
      expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
    } finally {
      await repo.cleanup();
      await admin.query('drop database tron_one with (force)');
      await admin.query('drop role tron_one');
      await admin.end();
    }
  }, 90_000);
});
