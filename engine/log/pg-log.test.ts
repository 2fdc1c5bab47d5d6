import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { InputError } from '../core/errors.ts';
import { ManualClock } from '../os/clock.ts';
import type { EventBody } from '../core/events.ts';
import { skipWithoutPostgres, testDatabase, useTestDatabase } from '../testing/postgres.ts';
import { readLog } from './eventlog.ts';
import { migrateJobs } from '../queue/pg-jobs.ts';
import { MIGRATIONS, SCHEMA_VERSION } from '../schema/series.ts';
import { acquireLease, awaitLease, LeaseHeldError } from './lease.ts';
import { DatabaseUnreachableError, FENCED, LeaseLostError, latestPgRun, openDatabase, PgEventLog, readPgRun, runLines } from './pg-log.ts';
import { SchemaNewerError } from '../schema/migrate.ts';
import { saveRunFiles } from './pg-run-files.ts';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const NO_DATABASE = skipWithoutPostgres('the event log in PostgreSQL');

const BODIES: EventBody[] = [
  { type: 'merge.queued', block: 'alpha' },
  { type: 'block.parked', block: 'alpha', reason: 'naïve “quotes” ✓ 日本' },
  { type: 'block.abandoned', block: 'beta', reason: 'gave up' },
];

describe.skipIf(NO_DATABASE)('the event log in PostgreSQL', () => {
  const server = useTestDatabase();
  const db = server.open;
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const key = Buffer.alloc(32, 7);

  it('writes the same signed lines the file log writes, read back with their chain checked', async () => {
    const d = await db();
    const lease = await acquireLease(d, { repository: 'same-lines', periodMs: 30_000 });
    const log = (await PgEventLog.open(d, lease, '20260101-000000-001', key)).attach(clock);
    log.groupCommit = true;
    for (const b of BODIES) log.append(b);
    await log.sync();
    const read = await readPgRun(d, { repository: 'same-lines', run: '20260101-000000-001' }, key);
    expect(read.signed).toBe(true);
    expect(read.foreign).toEqual([]);
    expect(read.events).toEqual(log.events);
    // The lines are a file log's: written to events.jsonl of a run directory of that id, the file reader accepts them.
    const dir = mkdtempSync(join(tmpdir(), 'tron-pglines-'));
    try {
      const runDir = join(dir, '20260101-000000-001');
      const lines = await runLines(d, { repository: 'same-lines', run: '20260101-000000-001' });
      mkdirSync(runDir);
      writeFileSync(join(runDir, 'events.jsonl'), `${lines.join('\n')}\n`);
      const file = readLog(join(runDir, 'events.jsonl'), { key });
      expect(file.events).toEqual(log.events);
      expect(file.foreign).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await latestPgRun(d, 'same-lines')).toEqual({ repository: 'same-lines', run: '20260101-000000-001' });
    await log.close();
  });

  it("says TRON_LEASE_LOST when a start's run files reach the database after a standby took the lease", async () => {
    const d = await db();
    const first = await acquireLease(d, { repository: 'fenced-files', periodMs: 30_000 });
    await first.release();
    const second = await acquireLease(await db(), { repository: 'fenced-files', periodMs: 30_000 });
    expect(second.generation).toBe(first.generation + 1);
    const runDir = mkdtempSync(join(tmpdir(), 'tron-pgfiles-'));
    try {
      writeFileSync(join(runDir, 'manifest.json'), '{}');
      await expect(saveRunFiles(d, first, 'run-a', runDir)).rejects.toThrow(/^TRON_LEASE_LOST: /);
      await expect(saveRunFiles(d, first, 'run-a', runDir)).rejects.toBeInstanceOf(LeaseLostError);
    } finally {
      rmSync(runDir, { recursive: true, force: true });
    }
  });

  it('refuses, in the database, an append from a generation that no longer holds the lease', async () => {
    const d = await db();
    const first = await acquireLease(d, { repository: 'fenced', periodMs: 30_000 });
    const old = (await PgEventLog.open(d, first, 'run-a', key)).attach(clock);
    old.append(BODIES[0]!);
    await old.sync();
    // The lease is let go (as a lapse would), and a second engine takes it: generation + 1.
    await first.release();
    const d2 = await db();
    const second = await acquireLease(d2, { repository: 'fenced', periodMs: 30_000 });
    expect(second.generation).toBe(first.generation + 1);
    // The old engine's next line is refused by the trigger, whatever its client believes.
    old.append(BODIES[1]!);
    await expect(old.sync()).rejects.toBeInstanceOf(LeaseLostError);
    expect(() => old.append(BODIES[2]!)).toThrow(LeaseLostError);
    // Not by convention: a raw insert of generation 1 by any client is refused too.
    const raw = new pg.Client({ connectionString: server.url });
    await raw.connect();
    try {
      const refused = await raw
        .query(`insert into tron_events (repository, run, seq, generation, line) values ('fenced', 'run-a', 2, $1, '{}')`, [
          first.generation,
        ])
        .then(
          () => undefined,
          (err: { code?: string }) => err.code,
        );
      expect(refused).toBe(FENCED);
      // And a written line cannot be changed or removed.
      const changed = await raw.query(`delete from tron_events where repository = 'fenced'`).then(
        () => undefined,
        (err: { code?: string }) => err.code,
      );
      expect(changed).toBe(FENCED);
    } finally {
      await raw.end();
    }
    expect((await runLines(d2, { repository: 'fenced', run: 'run-a' })).length).toBe(1);
    await second.release();
  });

  it('lets one of two engines started at once lead, and refuses the other while the lease is live', async () => {
    const [a, b] = await Promise.all([db(), db()]);
    const results = await Promise.allSettled([
      acquireLease(a, { repository: 'two-at-once', periodMs: 30_000, holder: 'host-a pid 1' }),
      acquireLease(b, { repository: 'two-at-once', periodMs: 30_000, holder: 'host-b pid 2' }),
    ]);
    const led = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected');
    expect(led.length).toBe(1);
    expect(refused.length).toBe(1);
    const err = (refused[0] as PromiseRejectedResult).reason as LeaseHeldError;
    expect(err).toBeInstanceOf(LeaseHeldError);
    expect(err.problems[0]!.code).toBe('TRON_LEASE_HELD');
    expect(err.problems[0]!.message).toMatch(/host-[ab] pid [12].*--standby/);
    await (led[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireLease>>>).value.release();
  });

  it("renews a lease every third of its period on the lease's clock, and says once that it is lost when a renewal finds it taken", async () => {
    const d = await db();
    const renewing = new ManualClock(0);
    let lostTimes = 0;
    const lease = await acquireLease(d, { repository: 'renewed', periodMs: 30_000, clock: renewing, onLost: () => (lostTimes += 1) });
    const expires = async () =>
      (
        await d.client.query<{ at: Date }>('select expires_at as at from tron_lease where repository = $1', ['renewed'])
      ).rows[0]!.at.getTime();
    const first = await expires();
    await renewing.pass(9_999);
    expect(await expires()).toBe(first);
    await renewing.pass(1);
    await vi.waitFor(async () => expect(await expires()).toBeGreaterThan(first));
    // Another engine took it over: the next renewal finds it gone, and the renewals stop.
    await d.client.query('update tron_lease set generation = generation + 1 where repository = $1', ['renewed']);
    await renewing.pass(10_000);
    await vi.waitFor(() => expect(lease.lost).toBe(true));
    await renewing.pass(30_000, 10_000);
    expect(lostTimes).toBe(1);
    expect(renewing.pending).toBe(0);
    await lease.release();
  });

  it('gives a standby the lease once the leader stops renewing it, with the next generation', async () => {
    const [a, b] = await Promise.all([db(), db()]);
    const leader = await acquireLease(a, { repository: 'standby', periodMs: 400 });
    let waitedOn: string | undefined;
    const standby = awaitLease(b, { repository: 'standby', periodMs: 400, waiting: (h) => (waitedOn = h) });
    // While the leader renews, the standby waits; its renewals stop as a killed engine's would.
    expect(await leader.renew()).toBe(true);
    await a.end();
    const taken = await standby;
    expect(waitedOn).toBe(leader.holder);
    expect(taken!.generation).toBe(leader.generation + 1);
    await taken!.release();
  });

  it('refuses a database whose schema is newer than this tron, and leaves it as it was', async () => {
    const d = await db();
    await d.client.query('insert into tron_schema (version) values ($1)', [SCHEMA_VERSION + 1]);
    try {
      const err = await server.open().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaNewerError);
      expect((err as SchemaNewerError).problems[0]!.code).toBe('TRON_DB_SCHEMA_NEWER');
      expect((err as SchemaNewerError).problems[0]!.message).toContain(`version ${SCHEMA_VERSION + 1}`);
    } finally {
      await d.client.query('delete from tron_schema where version = $1', [SCHEMA_VERSION + 1]);
    }
    const { rows } = await d.client.query('select max(version) as v from tron_schema');
    expect(rows[0].v).toBe(SCHEMA_VERSION);
  });

  it('refuses, at the start of an engine that runs jobs, a schema newer than this tron, naming it and the version it knows', async () => {
    const d = await db();
    await migrateJobs(d);
    const newer = SCHEMA_VERSION + 1;
    await d.client.query('insert into tron_schema (version) values ($1)', [newer]);
    try {
      const err = await migrateJobs(d).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SchemaNewerError);
      expect((err as SchemaNewerError).problems[0]).toMatchObject({
        code: 'TRON_DB_SCHEMA_NEWER',
        path: expect.stringContaining('(tron_schema)'),
        message: expect.stringContaining(`(tron_schema) is version ${newer}, and this tron knows up to ${SCHEMA_VERSION}`),
      });
    } finally {
      await d.client.query('delete from tron_schema where version = $1', [newer]);
    }
  });

  it('brings a schema of an older tron up to this version at open, one migration a version, keeping its rows — and two opens at once migrate once', async () => {
    const fresh = await testDatabase();
    try {
      // As the first tron with a database left it: version 1 only, a run in it.
      const raw = new pg.Client({ connectionString: fresh.url });
      await raw.connect();
      try {
        await raw.query('create table tron_schema (version integer primary key, applied_at timestamptz not null default now())');
        await raw.query(MIGRATIONS[0]!);
        await raw.query('insert into tron_schema (version) values (1)');
        await raw.query(`insert into tron_lease values ('old', 1, 'old-host pid 1', now() + interval '1 hour')`);
        await raw.query(`insert into tron_events (repository, run, seq, generation, line) values ('old', 'run-1', 1, 1, '{"seq":1}')`);
        const before = await raw.query(`select to_regclass('tron_run_files') as t`);
        expect(before.rows[0].t).toBeNull();
      } finally {
        await raw.end();
      }
      const [a, b] = await Promise.all([openDatabase(fresh.url), openDatabase(fresh.url)]);
      try {
        const { rows } = await a.client.query<{ version: number }>('select version from tron_schema order by version');
        expect(rows.map((r) => r.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
        expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(2);
        expect((await a.client.query(`select to_regclass('tron_run_files') as t`)).rows[0].t).toBe('tron_run_files');
        expect(await runLines(b, { repository: 'old', run: 'run-1' })).toEqual(['{"seq":1}']);
        // The new table is fenced as the log is: a write from a generation that does not hold the lease is refused in SQL.
        const refused = await a.client
          .query(`insert into tron_run_files (repository, run, name, generation, body) values ('old', 'run-1', 'manifest.json', 7, '{}')`)
          .then(
            () => undefined,
            (err: { code?: string }) => err.code,
          );
        expect(refused).toBe(FENCED);
        await a.client.query(
          `insert into tron_run_files (repository, run, name, generation, body) values ('old', 'run-1', 'manifest.json', 1, '{}')`,
        );
        const changed = await a.client.query(`update tron_run_files set body = 'x'`).then(
          () => undefined,
          (err: { code?: string }) => err.code,
        );
        expect(changed).toBe(FENCED);
      } finally {
        await a.end();
        await b.end();
      }
    } finally {
      await fresh.stop();
    }
  });

  it('says a database it cannot reach in one coded line, without the password', async () => {
    const err = await openDatabase('postgres://tron:hunter2@127.0.0.1:1/tron').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseUnreachableError);
    expect((err as Error).message).toMatch(
      /^TRON_DB_UNREACHABLE: cannot reach the database at postgres:\/\/tron:\*\*\*@127\.0\.0\.1:1\/tron: /,
    );
    expect((err as Error).message).not.toContain('hunter2');
  });

  it('takes a server that refuses the URL — no such database, no such user — for a mistake in the URL, exit 2, without the password', async () => {
    const noDatabase = new URL(server.url);
    noDatabase.pathname = '/tron_no_such_database';
    const missing = await openDatabase(noDatabase.toString()).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(InputError);
    expect((missing as InputError).problems[0]).toMatchObject({
      code: 'TRON_DB_REFUSED',
      message: expect.stringMatching(/database "tron_no_such_database" does not exist; name a database it has, or create it/),
    });
    const noUser = new URL(server.url);
    noUser.username = 'tron_no_such_user';
    noUser.password = 'hunter2';
    const refused = await openDatabase(noUser.toString()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InputError);
    expect((refused as InputError).problems[0]).toMatchObject({
      code: 'TRON_DB_REFUSED',
      message: expect.stringContaining('correct the user or password in the URL'),
    });
    expect(JSON.stringify((refused as InputError).problems)).not.toContain('hunter2');
  });
});
