/**
 * The cluster's rules as the simulated world states them (cluster.ts RULES) are the rules a
 * real PostgreSQL keeps: each case is put to the database through tron's own functions and
 * to the rule, and both must say the same. A change of the SQL that the world does not
 * follow — or of the world that the SQL does not — fails here, not in a simulated run that
 * proves something of a database that does not exist.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../engine/os/clock.ts';
import { acquireLease } from '../../engine/log/lease.ts';
import { type Database, PgEventLog } from '../../engine/log/pg-log.ts';
import { claimJob, completeJob, dropEarlierJobs, migrateJobs } from '../../engine/queue/pg-jobs.ts';
import type { JobKey } from '../../engine/queue/pg-job-types.ts';
import { poolOf } from '../../engine/testing/pools.ts';
import { skipWithoutPostgres, useTestDatabase } from '../../engine/testing/postgres.ts';
import { type Job, type Pool, RULES } from './cluster.ts';

const NO_DATABASE = skipWithoutPostgres('the cluster rules against PostgreSQL');

/** Whether the database took the call: true, or false when it refused it with an error. */
const took = (p: Promise<unknown>): Promise<boolean> =>
  p.then(
    () => true,
    () => false,
  );

/** A job of `repository` decided by an engine holding its lease, queued with its line: its key. */
async function queued(db: Database, repository: string, role: string, run = '20260101-000000-001'): Promise<JobKey> {
  // (The log's own connection: closing the log ends it.)
  const lease = await acquireLease(db, { repository, periodMs: 60_000 });
  const log = (await PgEventLog.open(db, lease, run, Buffer.alloc(32, 7))).attach(new ManualClock(0));
  log.groupCommit = true;
  const e = log.append({ type: 'merge.queued', block: 'alpha' });
  log.enqueue(e.seq, { kind: role === 'test' ? 'test.requested' : 'block.dispatched', role, request: { n: 1 } });
  await log.sync();
  await log.close();
  await lease.release();
  return { repository, run, seq: e.seq };
}

/** The world's view of a job row: what the rules read of it. */
const jobAs = (key: JobKey, role: string, attempt: number, state: Job['state']): Job =>
  ({ id: key.seq, repository: key.repository, role, generation: 1, run: 1, seq: key.seq, attempt, state, dead: [] }) as unknown as Job;

describe.skipIf(NO_DATABASE)("the simulated cluster's rules, held against PostgreSQL", () => {
  const database = useTestDatabase((d) => migrateJobs(d));

  it('fences the log as the trigger does: only the live generation writes', async () => {
    const db = await database.open();
    const first = await acquireLease(db, { repository: 'fence', periodMs: 60_000 });
    await first.release();
    const second = await acquireLease(db, { repository: 'fence', periodMs: 60_000 });
    const insert = (generation: number, seq: number) =>
      db.client.query(`insert into tron_events (repository, run, seq, generation, line) values ('fence', 'run-a', $1, $2, '{}')`, [
        seq,
        generation,
      ]);
    for (const [generation, seq] of [
      [first.generation, 1],
      [second.generation, 2],
    ] as const)
      expect(await took(insert(generation, seq)), `a line of generation ${generation}`).toBe(RULES.fenced(generation, second.generation));
    await second.release();
  });

  it('claims as tron_claim does: only a job of the pool’s repository and of a role it holds', async () => {
    const db = await database.open();
    const key = await queued(await database.open(), 'claims', 'test');
    const pools: Pool[] = [
      { name: 'elsewhere', repository: 'claims-other', roles: ['test'] },
      { name: 'builder-only', repository: 'claims', roles: ['builder'] },
      { name: 'tester', repository: 'claims', roles: ['test'] },
    ];
    for (const pool of pools) {
      const caller = await poolOf(db.client, pool.name, pool.repository, { roles: pool.roles });
      const claimed = await claimJob(db.client, caller, key).then(
        (c) => c !== undefined,
        () => false,
      );
      expect(claimed, pool.name).toBe(RULES.mayClaim(pool, jobAs(key, 'test', 0, 'queued')));
    }
  });

  it('fences a result by attempt as tron_complete does: the holding attempt, once', async () => {
    const db = await database.open();
    const key = await queued(await database.open(), 'attempts', 'test');
    const first = await poolOf(db.client, 'first', 'attempts', { lapseMs: 500 });
    expect((await claimJob(db.client, first, key))?.attempt).toBe(1);
    // The first pool goes silent past its lapse (the database's clock): the second claims attempt 2.
    await new Promise((r) => setTimeout(r, 900));
    const second = await poolOf(db.client, 'second', 'attempts');
    expect((await claimJob(db.client, second, key))?.attempt).toBe(2);
    const result = { ok: true as const, inputs: [] };
    expect(await took(completeJob(db.client, first, key, 1, result)), 'the dead attempt').toBe(
      RULES.completes(jobAs(key, 'test', 2, 'running'), 1),
    );
    expect(await took(completeJob(db.client, second, key, 2, result)), 'the holding attempt').toBe(
      RULES.completes(jobAs(key, 'test', 2, 'running'), 2),
    );
    expect(await took(completeJob(db.client, second, key, 2, result)), 'the holding attempt again').toBe(
      RULES.completes(jobAs(key, 'test', 2, 'done'), 2),
    );
  });

  it("drops the earlier generations' jobs as the next leader does: a claim of one runs nothing", async () => {
    const db = await database.open();
    const key = await queued(await database.open(), 'dropped', 'test');
    const next = await acquireLease(db, { repository: 'dropped', periodMs: 60_000 });
    expect(await dropEarlierJobs(db.client, 'dropped', next.generation)).toBe(RULES.dropsOlderJobs ? 1 : 0);
    const pool = await poolOf(db.client, 'late', 'dropped');
    expect(await claimJob(db.client, pool, key)).toBeUndefined();
    await next.release();
  });
});
