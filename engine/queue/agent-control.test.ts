/**
 * The channel between the engine and a turn on an agent (engine/queue/pg-job-control.ts,
 * engine/queue/agent-control.ts), against a real PostgreSQL: a stop asked of a running job
 * aborts the agent's turn (one registered after the stop too) and is answered; a stop of a
 * queued job finishes it at once and no claim runs it; a probe is answered with what the
 * agent's probe saw; notes and answers count only from the attempt that holds the job, and
 * an attempt that no longer holds it has its turn stopped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { answerOf, askProbe, askStop, jobProgress } from './pg-job-control.ts';
import { claimJob, migrateJobs } from './pg-jobs.ts';
import type { JobKey } from './pg-job-types.ts';
import { type Database, openDatabase, PgEventLog } from '../log/pg-log.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { poolOf } from '../testing/pools.ts';
import { AgentControl } from './agent-control.ts';
import type { OneLook } from '../os/one-look.ts';

const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout('the channel to turns on agents', POSTGRES);
const RUN = '20260101-000000-001';
const clock = new ManualClock(0);

describe.skipIf(NO_DATABASE)('the channel to turns on agents', () => {
  let server: TestDatabase;
  const opened: Database[] = [];
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

  /** A turn job decided and committed under `repository`'s lease. */
  async function decided(repository: string): Promise<{ d: Database; key: JobKey }> {
    const d = await openDatabase(server.url);
    opened.push(d);
    const lease = await acquireLease(d, { repository, periodMs: 30_000 });
    const log = (await PgEventLog.open(d, lease, RUN, Buffer.alloc(32, 3))).attach(clock);
    log.groupCommit = true;
    const e = log.append({ type: 'merge.queued', block: 'alpha' });
    log.enqueue!(e.seq, { kind: 'block.dispatched', role: 'builder', request: { n: 1 } });
    await log.sync();
    return { d, key: { repository, run: RUN, seq: e.seq } };
  }

  /** A pool of `repository` that may serve builder turns, registered with the engine's role; a short lapse: it can be "cut off". */
  const builderPool = (d: Database, worker: string, repository: string, lapseMs = 60_000) =>
    poolOf(d.client, worker, repository, { roles: ['builder'], lapseMs });
  /** Past a short lapse: the pool counts as dead, and its job may be given to another. */
  const lapsed = () => new Promise((r) => setTimeout(r, 600));

  /** The control's next look, every 100 ms on the test's clock: the clock passes it, and the look is waited for. */
  const look = async (control: AgentControl) => {
    await clock.pass(100);
    await (control as unknown as { asks: OneLook }).asks.current;
  };

  const until = async (ok: () => boolean | Promise<boolean>) => {
    while (!(await ok())) await new Promise((r) => setTimeout(r, 20));
  };

  it('aborts the turn a running job holds when the engine asks it to stop, and one registered after the stop too', async () => {
    const { d, key } = await decided('stop');
    const one = await builderPool(d, 'agent one', 'stop');
    const control = await AgentControl.open(
      server.url,
      'agent one',
      10_000,
      clock,
      () => undefined,
      () => one,
    );
    try {
      const claimed = await claimJob(d.client, one, key);
      const held = control.hold(key, claimed!.attempt);
      const first = held.turns.start('alpha', 'alpha.1.builder', 1);
      expect(await askStop(d.client, key, 'stopped by the engine', { ok: true, inputs: [] })).toBe('asked');
      // NOTIFY wakes the agent at once (its own look is 10 s away).
      await until(() => first.aborted);
      expect(held.stopped).toBe('stopped by the engine');
      expect(held.turns.start('alpha', 'alpha.1.builder', 2).aborted).toBe(true);
      await until(async () => (await d.client.query(`select 1 from tron_job_asks where answered_at is not null`)).rows.length === 1);
      held.release();
    } finally {
      await control.close();
    }
  });

  it('finishes a queued job the engine stops, and no claim runs it after', async () => {
    const { d, key } = await decided('queued');
    const outcome = { ok: true as const, inputs: [{ type: 'stopped' }] };
    expect(await askStop(d.client, key, 'stopped by the engine', outcome)).toBe('finished');
    expect(await claimJob(d.client, await builderPool(d, 'agent late', 'queued'), key)).toBeUndefined();
    const { rows } = await d.client.query(`select state, outcome from tron_jobs where repository = 'queued'`);
    expect(rows).toEqual([{ state: 'done', outcome }]);
    expect(await askStop(d.client, key, 'again', outcome)).toBe('done');
  });

  it('answers a probe with what the agent’s probe saw, and takes notes only from the attempt that holds the job', async () => {
    const { d, key } = await decided('probe');
    const two = await builderPool(d, 'agent two', 'probe', 500);
    const control = await AgentControl.open(
      server.url,
      'agent two',
      10_000,
      clock,
      () => undefined,
      () => two,
    );
    try {
      const claimed = await claimJob(d.client, two, key);
      const held = control.hold(key, claimed!.attempt);
      held.turns.start('alpha', 'alpha.1.builder', 1);
      const probed = { type: 'worker.probed', block: 'alpha', session: 'alpha.1.builder', turn: 1, alive: true, signs: ['cpu'] };
      held.probeWith(async () => probed as never);
      held.note({ kind: 'started' });
      held.note({ kind: 'spawned', pid: 42, start_time: '7' });
      const id = await askProbe(d.client, key, { decision: { session: 'alpha.1.builder', turn: 1 }, probeWaitMs: 1 });
      await until(async () => (await answerOf(d.client, id!)) !== undefined);
      expect(await answerOf(d.client, id!)).toEqual({ probed, ended: false });
      await until(async () => (await jobProgress(d.client, key, [key.seq], 0)).notes.length === 2);
      const { notes, jobs } = await jobProgress(d.client, key, [key.seq], 0);
      expect(notes.map((n) => n.body)).toEqual([{ kind: 'started' }, { kind: 'spawned', pid: 42, start_time: '7', agent: 'agent two' }]);
      expect(jobs).toEqual([{ seq: key.seq, state: 'running', attempt: 1, worker: 'agent two' }]);
      // The job is given to another attempt (agent two fell silent past its lapse): the first one's notes are no longer taken.
      await lapsed();
      await claimJob(d.client, await builderPool(d, 'agent three', 'probe'), key);
      held.note({ kind: 'exited', pid: 42, code: 0, signal: null });
      held.note({ kind: 'started' });
      await new Promise((r) => setTimeout(r, 300));
      expect((await jobProgress(d.client, key, [key.seq], 0)).notes).toHaveLength(2);
      held.release();
    } finally {
      await control.close();
    }
  });

  it('stops the turn of an attempt that no longer holds its job, as an agent cut off and back finds it', async () => {
    const { d, key } = await decided('lost');
    const printed: string[] = [];
    let paused = await builderPool(d, 'agent paused', 'lost', 500);
    const control = await AgentControl.open(
      server.url,
      'agent paused',
      100,
      clock,
      (line) => printed.push(line),
      () => paused,
    );
    try {
      const claimed = await claimJob(d.client, paused, key);
      const held = control.hold(key, claimed!.attempt);
      const turn = held.turns.start('alpha', 'alpha.1.builder', 1);
      // Its looks, every 100 ms on its clock, find the attempt still holding the job.
      for (let i = 0; i < 3; i += 1) await look(control);
      expect(turn.aborted).toBe(false);
      // Meanwhile (it fell silent past its lapse) the job was given to another agent as attempt 2.
      await lapsed();
      await claimJob(d.client, await builderPool(d, 'agent other', 'lost'), key);
      // Back, its pool registers again (its registration was reaped): the control's next look is as that registration.
      paused = await builderPool(d, 'agent paused', 'lost');
      await until(async () => {
        await look(control);
        return turn.aborted;
      });
      expect(held.stopped).toBe('the job was given to another attempt, or finished');
      expect(printed).toEqual([`tron agent: job ${key.seq} attempt 1 no longer holds its job; its turn is stopped`]);
      held.release();
    } finally {
      await control.close();
    }
  });
});
