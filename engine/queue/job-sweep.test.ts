/**
 * A job the queue will never hand out again comes back to the engine as a failed effect,
 * with its reason, against a real PostgreSQL: a job whose attempts ran out (tron's count,
 * given up at the claim past its last), and a job deleted from the queue library's table.
 * The engine never waits on either forever, and an attempt still running such a job is
 * refused when it reports. The queue library's own count of deliveries decides nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { ManualClock } from '../os/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { claimJob, completeJob, migrateJobs, NOT_YOURS } from './pg-jobs.ts';
import { poolOf } from '../testing/pools.ts';
import { type Database, openDatabase, PgEventLog } from '../log/pg-log.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import type { EffectContext } from '../runtime/effects/context.ts';
import { TurnTable } from '../runtime/effects/turn-table.ts';
import { JobBroker } from './job-queue.ts';

const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout('jobs the queue gave up on', POSTGRES);
const SHA = 'a'.repeat(40);
const RUN = '20260101-000000-001';

describe.skipIf(NO_DATABASE)('jobs the queue gave up on', () => {
  let server: TestDatabase;
  const opened: Database[] = [];
  const clock = new ManualClock(Date.UTC(2026, 0, 1));

  beforeAll(async () => {
    requireAll(POSTGRES);
    server = await testDatabase();
    const d = await openDatabase(server.url);
    opened.push(d);
    await migrateJobs(d);
  }, 60_000);
  afterAll(async () => {
    for (const d of opened) await d.end();
    await server?.stop();
  }, 60_000);

  /** Waits for the sweeps the broker started: its queries run one after another. */
  const swept = (broker: JobBroker) => (broker as unknown as { serial: pg.ClientBase }).serial.query('select 1');

  /** An engine's broker with no pool of its own (the agents would run the jobs), and a test run decided and queued. */
  async function waiting(repository: string) {
    const d = await openDatabase(server.url);
    opened.push(d);
    const lease = await acquireLease(d, { repository, periodMs: 30_000 });
    const log = (await PgEventLog.open(d, lease, RUN, Buffer.alloc(32, 7))).attach(clock);
    log.groupCommit = true;
    const broker = new JobBroker({ url: server.url, log, at: log.at, localRoles: [], heartbeatMs: 200, slots: 1 });
    await broker.serve({ turns: new TurnTable(clock, () => undefined), clock } as unknown as EffectContext);
    const decision = log.append({ type: 'test.requested', block: 'alpha', sha: SHA } as never);
    const job = { decision, request: { check: 'trunk' } };
    log.enqueue!(decision.seq, { kind: 'test.requested', role: 'test', request: job.request });
    await log.sync();
    const key = { repository, run: RUN, seq: decision.seq };
    const gkey = `${repository}/${RUN}/${decision.seq}`;
    return { d, broker, job, key, gkey };
  }

  it('gives a job up at the claim past its last attempt, naming why, and refuses the attempt that held it', async () => {
    const { d, broker, job, key } = await waiting('exhausted');
    try {
      // One attempt allowed here (25 by default): an agent claimed it and died, silent past its lapse.
      await d.client.query('update tron_jobs set max_attempts = 1 where repository = $1 and run = $2 and seq = $3', [
        key.repository,
        key.run,
        key.seq,
      ]);
      const doomed = await poolOf(d.client, 'agent doomed', 'exhausted', { lapseMs: 500 });
      expect((await claimJob(d.client, doomed, key))?.attempt).toBe(1);
      await new Promise((r) => setTimeout(r, 600));
      // The next delivery's claim runs nothing: it gives the job up, and the engine hears it as the job's result.
      const next = await poolOf(d.client, 'agent next', 'exhausted');
      expect(await claimJob(d.client, next, key)).toBeUndefined();
      await expect(broker.outcome(job as never)).rejects.toThrow(
        /given up: all 1 of its attempts were claimed and none reported a result \(the last by agent doomed\)/,
      );
      // Woken, the dead agent's result is refused: its pool was reaped when the next registered.
      await expect(completeJob(d.client, doomed, key, 1, { ok: true, inputs: [] })).rejects.toMatchObject({ code: NOT_YOURS });
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('fails a job deleted from the queue’s table instead of waiting for it forever', async () => {
    const { d, broker, job, gkey } = await waiting('deleted');
    try {
      await d.client.query('delete from graphile_worker._private_jobs where key = $1', [gkey]);
      const outcome = broker.outcome(job as never);
      outcome.catch(() => undefined);
      // The broker's sweep runs every fourth look, a look every 250 ms on its clock (its least).
      await clock.pass(1_000, 250);
      await expect(outcome).rejects.toThrow(/no longer on the queue/);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('leaves a job alone that the queue library delivered as often as it once allowed: its attempts are tron’s to count', async () => {
    const { d, broker, job, key, gkey } = await waiting('trying');
    try {
      // 25 deliveries and unlocked: graphile-worker's own limit before the queue's version 7, when it gave jobs up.
      await d.client.query(`update graphile_worker._private_jobs set attempts = 25, locked_at = null where key = $1`, [gkey]);
      const outcome = broker.outcome(job as never);
      // Several of the broker's sweeps pass (one every 4 looks of 250 ms on its clock), none failing it.
      await clock.pass(3_000, 250);
      await swept(broker);
      // The library would still hand it out: it never gives a job up before tron does.
      const { rows } = await d.client.query<{ n: number }>(
        'select count(*)::int as n from graphile_worker.jobs where key = $1 and attempts < max_attempts and locked_at is null',
        [gkey],
      );
      expect(rows[0]?.n).toBe(1);
      // Then an attempt reports.
      const late = await poolOf(d.client, 'agent late', 'trying');
      const claimed = await claimJob(d.client, late, key);
      const tested = { type: 'trunk.tested', block: 'alpha', sha: SHA, ok: true };
      await completeJob(d.client, late, key, claimed!.attempt, { ok: true, inputs: [tested] });
      await expect(outcome).resolves.toEqual([tested]);
    } finally {
      await broker.close();
    }
  }, 60_000);
});
