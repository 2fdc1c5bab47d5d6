/**
 * The agents' database role of docs/cluster.md ("Roles"), made with exactly the grants
 * `agentGrants` prints, in a throwaway cluster of its own (making a role needs a superuser,
 * which a CI's given URL need not be): it claims and completes jobs through the queue, and
 * can read or write nothing of the log, the lease or the jobs' table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { ManualClock } from '../os/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { agentGrants, claimJob, completeJob, connect, migrateJobs, NOT_YOURS, STALE_ATTEMPT } from './pg-jobs.ts';
import { SCHEMA_VERSION } from '../schema/series.ts';
import { SchemaOlderError } from '../schema/migrate.ts';
import { poolOf } from '../testing/pools.ts';
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
import { needPostgres, olderSchema, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { startWorkers } from './job-queue.ts';
import { answerAsk, asksFor, lostAttempts, noteJob, OUTPUT_NOTE_CHARS } from './pg-job-control.ts';

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
      repository: 'roles',
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
      const caller = await poolOf(agent, 'restricted again', 'roles');
      await expect(completeJob(agent, caller, key, 1, { ok: true, inputs: [{ type: 'again' }] })).rejects.toMatchObject({
        code: STALE_ATTEMPT,
      });
      // The engine's asks and an attempt's notes (engine/queue/pg-job-control.ts): only through their functions, fenced alike.
      expect(await asksFor(agent, caller)).toEqual([]);
      expect(await noteJob(agent, caller, key, 1, { kind: 'started' })).toBe(false);
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

  it('refuses a reader an older schema it may not migrate with TRON_DB_SCHEMA_OLDER, changing nothing, and reads it once an engine did', async () => {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('create database tron_behind').finally(() => admin.end());
    const url = new URL(server.url);
    url.pathname = '/tron_behind';
    // As the last tron with two series left it, and a reader's role as docs/cluster.md grants it: select only.
    await olderSchema(url.toString(), { log: 4, queue: 7 });
    const raw = new pg.Client({ connectionString: url.toString() });
    await raw.connect();
    try {
      await raw.query(`create role tron_behind_reader login password 'reader'`);
      await raw.query('grant select on all tables in schema public to tron_behind_reader');
      const readerAt = new URL(url);
      readerAt.username = 'tron_behind_reader';
      readerAt.password = 'reader';
      const refused = await openDatabase(readerAt.toString()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(SchemaOlderError);
      expect((refused as SchemaOlderError).problems[0]).toMatchObject({
        code: 'TRON_DB_SCHEMA_OLDER',
        message: expect.stringContaining(`is version 11, this tron needs ${SCHEMA_VERSION}, and the role in the URL may not migrate it`),
      });
      expect((await raw.query('select max(version)::int as v from tron_schema')).rows[0].v).toBe(4);
      expect((await raw.query(`select to_regclass('tron_queue_schema')::text as t`)).rows[0].t).toBe('tron_queue_schema');
      // The engine's role migrates it; the reader then opens it and only reads.
      const engine = await openDatabase(url.toString());
      await engine.end();
      const reader = await openDatabase(readerAt.toString());
      await reader.end();
      expect((await raw.query('select max(version)::int as v from tron_schema')).rows[0].v).toBe(SCHEMA_VERSION);
    } finally {
      await raw.end();
    }
  }, 60_000);

  it('lets a role granted before version 3 of the queue’s schema ask which jobs to leave and the queue’s version, once the engine migrated it', async () => {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('create database tron_older').finally(() => admin.end());
    const url = new URL(server.url);
    url.pathname = '/tron_older';
    // The queue's schema as its version 2 left it (versions 5–6 of the one series now), and the agents' role as it was granted then.
    await olderSchema(url.toString(), { log: 4, queue: 2 });
    const raw = new pg.Client({ connectionString: url.toString() });
    await raw.connect();
    try {
      await raw.query(`create role tron_older_agent login password 'older'`);
      // The grants of version 2's docs, as they were (agentGrants then).
      await raw.query(`grant usage on schema graphile_worker to tron_older_agent;
        grant select, insert, update, delete on all tables in schema graphile_worker to tron_older_agent;
        grant usage, select on all sequences in schema graphile_worker to tron_older_agent;
        grant execute on all functions in schema graphile_worker to tron_older_agent;
        grant execute on function tron_heartbeat(text, text, text[], integer, text[]), tron_reap(interval),
          tron_claim(text, text, integer, text), tron_complete(text, text, integer, integer, jsonb) to tron_older_agent;
        grant execute on function tron_asks(text), tron_answer(text, text, integer, integer, bigint, jsonb),
          tron_note(text, text, integer, integer, jsonb), tron_lost(text[], text[], integer[], integer[]) to tron_older_agent;`);
    } finally {
      await raw.end();
    }
    const older = await openDatabase(url.toString());
    try {
      await migrateJobs(older);
      const agentAt = new URL(url);
      agentAt.username = 'tron_older_agent';
      agentAt.password = 'older';
      const agent = new pg.Client({ connectionString: agentAt.toString() });
      await agent.connect();
      try {
        const version = await agent.query('select tron_queue_version() as v');
        expect(version.rows[0].v).toBe(SCHEMA_VERSION);
        // Version 6 grants it the scoped functions, and lets it serve any repository and role as before (narrowed in tron_agent_access).
        const caller = await poolOf(agent, 'older', 'any', { roles: ['builder', 'test'] });
        const { rows } = await agent.query(`select tron_near_elsewhere($1::text, $2::text) as f`, [caller.worker, caller.token]);
        expect(rows[0].f).toEqual([]);
        // Its old calls are refused, saying why: this tron is older than the queue.
        await expect(agent.query(`select tron_near_elsewhere('someone', '1 second'::interval)`)).rejects.toMatchObject({
          code: NOT_YOURS,
          message: expect.stringContaining('older than the queue'),
        });
      } finally {
        await agent.end();
      }
    } finally {
      await older.end();
    }
  }, 60_000);

  it('refuses the agents’ role every claim, heartbeat, reap, note, answer and result that is not its registered pool’s to make', async () => {
    // The first test's log closed its database: this one opens its own.
    const db = await openDatabase(server.url);
    // A role that may serve builder jobs of repository "one" only, granted as the docs say.
    await db.client.query(`create role tron_builder_one login password 'one'`);
    await db.client.query(agentGrants('tron_builder_one', { repository: 'one', roles: ['builder'] }));
    const url = new URL(server.url);
    url.username = 'tron_builder_one';
    url.password = 'one';
    const psql = new pg.Client({ connectionString: url.toString() });
    await psql.connect();
    const run = '20260101-000000-002';
    const engines: PgEventLog[] = [];
    try {
      // Two repositories' engines, each deciding a builder turn, a test run and a job of its own pool.
      const jobsOf = async (repository: string) => {
        const own = await openDatabase(server.url);
        const lease = await acquireLease(own, { repository, periodMs: 30_000 });
        const log = (await PgEventLog.open(own, lease, run, Buffer.alloc(32, 6))).attach(new ManualClock(0));
        log.groupCommit = true;
        engines.push(log);
        const decide = (role: string, pool?: string) => {
          const e = log.append({ type: 'merge.queued', block: 'alpha' });
          log.enqueue(e.seq, { kind: 'block.dispatched', role, request: { brief: `${repository}'s secret` }, ...(pool ? { pool } : {}) });
          return { repository, run, seq: e.seq };
        };
        const jobs = {
          builder: decide('builder'),
          test: decide('test'),
          pooled: decide('builder', `engine of ${repository}`),
          held: decide('builder'),
        };
        await log.sync();
        return jobs;
      };
      const one = await jobsOf('one');
      const two = await jobsOf('two');
      const refused = (p: Promise<unknown>, text: string) =>
        expect(p).rejects.toMatchObject({ code: NOT_YOURS, message: expect.stringContaining(text) });
      // A live agent (the engine's role here) holds one of "one"'s builder jobs, and the engine's own pool is registered.
      const live = await poolOf(db.client, 'live agent', 'one', { roles: ['builder'] });
      expect((await claimJob(db.client, live, one.held))?.attempt).toBe(1);
      await poolOf(db.client, 'engine of one', 'one', { roles: ['builder', 'test'], own: true });

      // It may register only for what it may serve.
      await refused(poolOf(psql, 'intruder', 'two', { roles: ['builder'] }), 'may not serve builder jobs of repository two');
      await refused(poolOf(psql, 'intruder', 'one', { roles: ['builder', 'test'] }), 'may not serve test jobs of repository one');
      await refused(poolOf(psql, 'live agent', 'one', { roles: ['builder'] }), 'a live pool is registered under that name');
      const me = await poolOf(psql, 'builder of one', 'one', { roles: ['builder'] });
      // Another repository's job, another role's, the engine's own pool's, one a live agent holds: none is claimed.
      await refused(claimJob(psql, me, two.builder), 'worker builder of one serves builder of one');
      await refused(claimJob(psql, me, one.test), 'it is a test job');
      await refused(claimJob(psql, me, one.pooled), 'for the pool engine of one');
      await refused(claimJob(psql, me, one.held), 'the live worker live agent holds it');
      // Nor as another worker, nor with a guessed token, nor through the functions older trons called.
      await refused(claimJob(psql, { worker: 'live agent', token: 'guessed' }, one.builder), 'the token is not the one');
      await refused(claimJob(psql, { worker: 'a dead agent', token: 'x' }, one.builder), 'is not registered');
      await refused(psql.query(`select tron_heartbeat('live agent', 'guessed', '{}')`), 'the token is not the one');
      // Granted the functions of older versions too, as roles made before version 6 were, it gets nothing through them.
      await db.client.query(`grant execute on function tron_heartbeat(text, text, text[], integer, text[]), tron_reap(interval),
        tron_claim(text, text, integer, text), tron_complete(text, text, integer, integer, jsonb), tron_asks(text),
        tron_note(text, text, integer, integer, jsonb) to tron_builder_one`);
      for (const old of [
        `select * from tron_claim('two', '${run}', ${two.builder.seq}, 'intruder')`,
        `select tron_complete('one', '${run}', ${one.held.seq}, 1, '{"ok":true,"inputs":[]}')`,
        `select tron_heartbeat('live agent', 'h', '{builder}', 1, '{}')`,
        `select tron_reap('0 seconds')`,
        `select * from tron_asks('live agent')`,
        `select tron_note('one', '${run}', ${one.held.seq}, 1, '{"kind":"started"}')`,
      ])
        await refused(psql.query(old), 'older than the queue');
      // Reaping goes by each pool's own lapse, never the caller's: the live agent keeps its job.
      await psql.query('select tron_reap($1, $2)', [me.worker, me.token]);
      await refused(claimJob(psql, me, one.held), 'the live worker live agent holds it');
      // It speaks for no attempt it does not hold: no result, note or answer; its asks are its own.
      await refused(completeJob(psql, me, one.held, 1, { ok: true, inputs: [{ type: 'operator.answered' }] }), 'does not hold it');
      expect(await noteJob(psql, me, one.held, 1, { kind: 'started' })).toBe(false);
      const ask = await db.client.query<{ id: string }>(
        `insert into tron_job_asks (repository, run, seq, kind) values ('one', $1, $2, 'stop') returning id`,
        [run, one.held.seq],
      );
      expect(await asksFor(psql, me)).toEqual([]);
      await expect(answerAsk(psql, me, one.held, 1, Number(ask.rows[0]!.id), { stopped: true })).rejects.toMatchObject({
        code: STALE_ATTEMPT,
      });
      expect(await lostAttempts(psql, me, [{ ...one.held, attempt: 1 }])).toHaveLength(1);
      // What is its own, it claims and reports.
      const mine = await claimJob(psql, me, one.builder);
      expect(mine).toMatchObject({ attempt: 1, role: 'builder', request: { brief: "one's secret" } });
      await completeJob(psql, me, one.builder, 1, { ok: true, inputs: [] });
      const { rows } = await db.client.query(
        `select repository, seq, state, worker from tron_jobs where run = $1 and state <> 'queued' order by repository, seq`,
        [run],
      );
      expect(rows).toEqual([
        { repository: 'one', seq: one.builder.seq, state: 'done', worker: 'builder of one' },
        { repository: 'one', seq: one.held.seq, state: 'running', worker: 'live agent' },
      ]);
    } finally {
      await psql.end();
      for (const log of engines) await log.close();
      await db.end().catch(() => undefined);
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
