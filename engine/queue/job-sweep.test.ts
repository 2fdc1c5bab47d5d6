/**
 * A job the queue will never hand out again comes back to the engine as a failed effect,
 * with its reason, against a real PostgreSQL: graphile-worker's give-up after its last
 * attempt, and a job deleted from its table. The engine never waits on either forever,
 * and an attempt still running such a job is refused when it reports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { claimJob, completeJob, migrateJobs, STALE_ATTEMPT } from './pg-jobs.ts';
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

  /** An engine's broker with no pool of its own (the agents would run the jobs), and a test run decided and queued. */
  async function waiting(repository: string) {
    const d = await openDatabase(server.url);
    opened.push(d);
    const lease = await acquireLease(d, { repository, periodMs: 30_000 });
    const log = (await PgEventLog.open(d, lease, RUN, Buffer.alloc(32, 7))).attach(clock);
    log.groupCommit = true;
    const broker = new JobBroker({ url: server.url, log, at: log.at, localRoles: [], heartbeatMs: 200, slots: 1 });
    await broker.serve({ turns: new TurnTable(clock, () => undefined) } as unknown as EffectContext);
    const decision = log.append({ type: 'test.requested', block: 'alpha', sha: SHA } as never);
    const job = { decision, request: { check: 'trunk' } };
    log.enqueue!(decision.seq, { kind: 'test.requested', role: 'test', request: job.request });
    await log.sync();
    const key = { repository, run: RUN, seq: decision.seq };
    const gkey = `${repository}/${RUN}/${decision.seq}`;
    return { d, broker, job, key, gkey };
  }

  it('fails a job graphile-worker gave up on after its last attempt, naming why, and refuses the attempt that held it', async () => {
    const { d, broker, job, key, gkey } = await waiting('exhausted');
    try {
      // An agent claimed it (attempt 1) and the queue's tries ran out, as after 25 deaths.
      const doomed = await poolOf(d.client, 'agent doomed', 'exhausted', { lapseMs: 500 });
      expect((await claimJob(d.client, doomed, key))?.attempt).toBe(1);
      // Dead: silent past its lapse (a job a live attempt holds is never failed by the sweep).
      await new Promise((r) => setTimeout(r, 600));
      await d.client.query(
        `update graphile_worker._private_jobs set attempts = max_attempts, last_error = 'agent died', locked_at = null where key = $1`,
        [gkey],
      );
      await expect(broker.outcome(job as never)).rejects.toThrow(
        /given up: the queue gave it up after 25 failed attempts \(of 25\); the last: agent died/,
      );
      await expect(completeJob(d.client, doomed, key, 1, { ok: true, inputs: [] })).rejects.toMatchObject({ code: STALE_ATTEMPT });
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('fails a job deleted from the queue’s table instead of waiting for it forever', async () => {
    const { d, broker, job, gkey } = await waiting('deleted');
    try {
      await d.client.query('delete from graphile_worker._private_jobs where key = $1', [gkey]);
      await expect(broker.outcome(job as never)).rejects.toThrow(/no longer on the queue/);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('leaves a job alone while the queue still has tries for it', async () => {
    const { d, broker, job, key, gkey } = await waiting('trying');
    try {
      await d.client.query(`update graphile_worker._private_jobs set attempts = 3 where key = $1`, [gkey]);
      const outcome = broker.outcome(job as never);
      // Several of the broker's looks pass (it looks every 4 ticks of 100 ms here); then an attempt reports.
      await new Promise((r) => setTimeout(r, 1500));
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
