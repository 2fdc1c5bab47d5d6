/**
 * The queue's promises against a real PostgreSQL: a decision's job is committed with its
 * line or not at all; a job is claimed as a numbered attempt and only the attempt that
 * holds it may report; a pool that dies mid-job has its job re-run by another as a new
 * attempt; a job of an engine that lost its lease is never run.
 */
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../os/clock.ts';
import { acquireLease } from '../log/lease.ts';
import { claimJob, completeJob, migrateJobs, STALE_ATTEMPT } from './pg-jobs.ts';
import type { JobKey } from './pg-job-types.ts';
import { type Database, LeaseLostError, PgEventLog } from '../log/pg-log.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { poolOf } from '../testing/pools.ts';
import { JobBroker, startWorkers } from './job-queue.ts';
import { failExhausted } from './job-sweep.ts';
import type { EffectContext } from '../runtime/effects/context.ts';
import type { TronEvent } from '../core/events.ts';
import { TurnTable } from '../runtime/effects/turn-table.ts';

const NO_DATABASE = skipWithoutPostgres('effects as jobs on the database queue');
const RUN = '20260101-000000-001';

describe.skipIf(NO_DATABASE)('effects as jobs on the database queue', () => {
  const server = useTestDatabase(migrateJobs);
  const db = server.open;
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const key = Buffer.alloc(32, 9);

  /** A run's log holding the lease of `repository`, and a helper that appends a decision with a job. */
  async function leading(repository: string, periodMs = 30_000) {
    const d = await db();
    const lease = await acquireLease(d, { repository, periodMs });
    const log = (await PgEventLog.open(d, lease, RUN, key)).attach(clock);
    log.groupCommit = true;
    const decide = (request: unknown, pool?: string): JobKey => {
      const e = log.append({ type: 'merge.queued', block: 'alpha' });
      log.enqueue(e.seq, { kind: 'test.requested', role: 'test', request, ...(pool ? { pool } : {}) });
      return { repository, run: RUN, seq: e.seq };
    };
    return { d, lease, log, decide };
  }

  async function job(d: Database, k: JobKey) {
    const { rows } = await d.client.query<{ state: string; attempt: number; outcome: unknown; n: string }>(
      `select state, attempt, outcome, (select count(*) from graphile_worker.jobs g where g.key = $4) as n
       from tron_jobs where repository = $1 and run = $2 and seq = $3`,
      [k.repository, k.run, k.seq, `${k.repository}/${k.run}/${k.seq}`],
    );
    return rows[0];
  }

  it('commits a decision’s job with its line, and neither once the engine lost its lease', async () => {
    const { d, log, decide } = await leading('together');
    const k = decide({ check: 'trunk' });
    await log.sync();
    expect(await job(d, k)).toMatchObject({ state: 'queued', attempt: 0, n: '1' });
    // A standby takes the lease (it lapsed): the old engine's next decision and its job are both refused.
    await d.client.query(`update tron_lease set generation = generation + 1 where repository = 'together'`);
    const late = decide({ check: 'again' });
    await expect(log.sync()).rejects.toBeInstanceOf(LeaseLostError);
    expect(await job(d, late)).toBeUndefined();
    const { rows } = await d.client.query(`select seq from tron_events where repository = 'together' and run = $1`, [RUN]);
    expect(rows.map((r) => r.seq)).toEqual([k.seq]);
  });

  it('refuses a late result from an attempt given up when the job was delivered again, and runs a finished job no more', async () => {
    const { d, log, decide } = await leading('attempts');
    const k = decide({ n: 1 });
    await log.sync();
    // Agent one's registration lapses at once (it was paused): agent two may take its job over.
    const one = await poolOf(d.client, 'agent one', 'attempts', { lapseMs: 500 });
    const two = await poolOf(d.client, 'agent two', 'attempts');
    const first = await claimJob(d.client, one, k);
    await new Promise((r) => setTimeout(r, 600));
    const second = await claimJob(d.client, two, k);
    expect([first?.attempt, second?.attempt]).toEqual([1, 2]);
    expect(second).toMatchObject({ kind: 'test.requested', role: 'test', request: { n: 1 } });
    // The first attempt reports late (forged or slow): the database refuses it, in SQL.
    await expect(completeJob(d.client, one, k, 1, { ok: true, inputs: [{ type: 'forged' }] })).rejects.toMatchObject({
      code: STALE_ATTEMPT,
    });
    await completeJob(d.client, two, k, 2, { ok: true, inputs: [] });
    expect(await job(d, k)).toMatchObject({ state: 'done', attempt: 2, outcome: { ok: true, inputs: [] } });
    // Reported twice, or delivered once more after it was done: refused, and not run again.
    await expect(completeJob(d.client, two, k, 2, { ok: true, inputs: [{ type: 'again' }] })).rejects.toMatchObject({
      code: STALE_ATTEMPT,
    });
    expect(await claimJob(d.client, await poolOf(d.client, 'agent three', 'attempts'), k)).toBeUndefined();
    expect(await job(d, k)).toMatchObject({ state: 'done', attempt: 2, outcome: { ok: true, inputs: [] } });
  });

  it('never runs a job decided by an engine that has since lost its lease', async () => {
    const { d, log, decide } = await leading('stale');
    const k = decide({ n: 1 });
    await log.sync();
    await d.client.query(`update tron_lease set generation = generation + 1 where repository = 'stale'`);
    expect(await claimJob(d.client, await poolOf(d.client, 'agent', 'stale'), k)).toBeUndefined();
    expect(await job(d, k)).toMatchObject({ state: 'dropped', attempt: 0 });
  });

  it('re-runs the job of a worker pool killed mid-job as a new attempt, and refuses the dead attempt’s result', async () => {
    const { d, log, decide } = await leading('killed');
    const heartbeatMs = 400;
    const doomed: ResultPromise = execa('node', ['--import', 'tsx', join(import.meta.dirname, '..', 'testing', 'queue-worker.ts')], {
      // No tsx compile cache left in the temporary folder.
      env: {
        TRON_TEST_QUEUE_URL: server.url,
        TRON_TEST_REPOSITORY: 'killed',
        TRON_TEST_ROLE: 'test',
        TRON_TEST_HEARTBEAT_MS: String(heartbeatMs),
        TSX_DISABLE_CACHE: '1',
      },
      reject: false,
      buffer: false,
    });
    let out = '';
    const said = (text: string) =>
      new Promise<void>((resolve, reject) => {
        const look = () => (out.includes(text) ? resolve() : undefined);
        doomed.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
          look();
        });
        void doomed.then(() => reject(new Error(`the pool exited before saying "${text}": ${out}`)));
        look();
      });
    await said('ready');
    const k = decide({ n: 1 });
    await log.sync();
    await said(`claimed ${k.seq} 1`);
    doomed.kill('SIGKILL');
    await doomed;
    const ran: number[] = [];
    const pool = await startWorkers({
      url: server.url,
      repository: 'killed',
      roles: ['test'],
      slots: 1,
      agent: 'survivor',
      heartbeatMs,
      run: async (claimed) => {
        ran.push(claimed.attempt);
        return { ok: true, inputs: [{ type: 'done' }] };
      },
    });
    try {
      // The survivor's heartbeat finds the dead pool silent, unlocks its job, and claims it again.
      while ((await job(d, k))?.state !== 'done') await new Promise((r) => setTimeout(r, 50));
    } finally {
      await pool.stop();
    }
    expect(ran).toEqual([2]);
    expect(await job(d, k)).toMatchObject({ state: 'done', attempt: 2, outcome: { ok: true, inputs: [{ type: 'done' }] } });
    await expect(completeJob(d.client, await poolOf(d.client, 'forger', 'killed'), k, 1, { ok: true, inputs: [] })).rejects.toMatchObject({
      code: STALE_ATTEMPT,
    });
  }, 60_000);

  /** A worker pool in a process of its own (engine/testing/queue-worker.ts), and a wait for what it prints. */
  function poolProcess(repository: string, heartbeatMs: number, env: Record<string, string> = {}) {
    const child: ResultPromise = execa('node', ['--import', 'tsx', join(import.meta.dirname, '..', 'testing', 'queue-worker.ts')], {
      env: {
        TRON_TEST_QUEUE_URL: server.url,
        TRON_TEST_REPOSITORY: repository,
        TRON_TEST_ROLE: 'test',
        TRON_TEST_HEARTBEAT_MS: String(heartbeatMs),
        TSX_DISABLE_CACHE: '1',
        ...env,
      },
      reject: false,
      buffer: false,
    });
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const said = async (text: string) => {
      for (let i = 0; !out.includes(text); i += 1) {
        if (child.exitCode !== null || i > 600) throw new Error(`the pool did not say "${text}": ${out}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    return { child, said };
  }

  it('leaves the job to the attempt that holds it when a pool paused past its heartbeat wakes and ends its own stale attempt', async () => {
    const { d, log, decide, lease } = await leading('paused');
    const heartbeatMs = 400;
    const first = poolProcess('paused', heartbeatMs, { TRON_TEST_FINISH_ON: 'SIGUSR2' });
    let release: () => void = () => undefined;
    const ran: number[] = [];
    let survivor: { stop(): Promise<void> } | undefined;
    try {
      await first.said('ready');
      const k = decide({ n: 1 });
      await log.sync();
      await first.said(`claimed ${k.seq} 1`);
      // Paused (SIGSTOP), it says nothing past its lapse: the survivor's heartbeat reaps it and claims its job again.
      first.child.kill('SIGSTOP');
      survivor = await startWorkers({
        url: server.url,
        repository: 'paused',
        roles: ['test'],
        slots: 1,
        agent: 'survivor',
        heartbeatMs,
        run: (claimed) => {
          ran.push(claimed.attempt);
          return new Promise((resolve) => {
            release = () => resolve({ ok: true, inputs: [{ type: 'second' }] });
          });
        },
      });
      while (ran.length === 0) await new Promise((r) => setTimeout(r, 50));
      expect(ran).toEqual([2]);
      // Woken, the first pool ends its attempt: refused (another holds the job), and the queue's row stays the survivor's.
      first.child.kill('SIGCONT');
      first.child.kill('SIGUSR2');
      await first.said(`stale ${k.seq} 1`);
      await new Promise((r) => setTimeout(r, 1000));
      expect(await job(d, k)).toMatchObject({ state: 'running', attempt: 2, n: '1' });
      // The engine's sweep of jobs the queue lost fails none that a live attempt holds — not even when its row is deleted.
      const at = { repository: 'paused', run: RUN };
      expect(await failExhausted(d.client, at, [k.seq])).toBe(0);
      await d.client.query('delete from graphile_worker._private_jobs where key = $1', [`paused/${RUN}/${k.seq}`]);
      expect(await failExhausted(d.client, at, [k.seq])).toBe(0);
      release();
      while ((await job(d, k))?.state !== 'done') await new Promise((r) => setTimeout(r, 50));
      expect(await job(d, k)).toMatchObject({ state: 'done', attempt: 2, outcome: { ok: true, inputs: [{ type: 'second' }] } });
    } finally {
      release();
      first.child.kill('SIGCONT');
      first.child.kill('SIGKILL');
      await first.child;
      await survivor?.stop();
      await log.close();
      await lease.release().catch(() => undefined);
    }
  }, 60_000);

  /**
   * A busy host: a pool's registration lapses `times` times (another pool's reap, made here by
   * a trigger) right after it is registered (`insert`: its start) or after it beats
   * (`update`). How often it was reaped, and the attempts it then ran of one job.
   */
  async function reapedPool(repository: string, agent: string, on: 'insert' | 'update', times: number) {
    const { d, log, decide, lease } = await leading(repository);
    await d.client.query(`
      create table reaped (n integer not null); insert into reaped values (0);
      create function reap() returns trigger language plpgsql as $$
      begin
        if new.worker = '${agent}' and (select n from reaped) < ${times} then
          update reaped set n = n + 1;
          delete from tron_agents where worker = new.worker;
        end if;
        return null;
      end $$;
      create trigger reap after ${on} on tron_agents for each row execute function reap();`);
    const ran: number[] = [];
    let pool: { stop(): Promise<void> } | undefined;
    try {
      pool = await startWorkers({
        url: server.url,
        repository,
        roles: ['test'],
        slots: 1,
        agent,
        heartbeatMs: 400,
        run: async (claimed) => {
          ran.push(claimed.attempt);
          return { ok: true, inputs: [] };
        },
      });
      const { rows } = await d.client.query<{ n: number }>('select n from reaped');
      const k = decide({ n: 1 });
      await log.sync();
      while ((await job(d, k))?.state !== 'done') await new Promise((r) => setTimeout(r, 50));
      return { reaped: rows[0]!.n, ran };
    } finally {
      await pool?.stop();
      await d.client.query('drop trigger reap on tron_agents; drop function reap(); drop table reaped');
      await log.close();
      await lease.release().catch(() => undefined);
    }
  }

  it('starts a pool whose registration is reaped again and again before its first heartbeat: it registers anew each time, then serves', async () => {
    const { reaped, ran } = await reapedPool('reaped', 'reaped at start', 'insert', 2);
    expect(reaped).toBe(2);
    expect(ran).toEqual([1]);
  }, 30_000);

  it('starts a pool whose registration is reaped between its first beat and its reap of others, and serves after it registers again', async () => {
    const { reaped, ran } = await reapedPool('reaped-after-beat', 'reaped after its beat', 'update', 1);
    expect(reaped).toBe(1);
    expect(ran).toEqual([1]);
  }, 30_000);

  it('runs each engine’s jobs on that engine’s own pool only: two repositories on one database never run each other’s', async () => {
    const one = await leading('repo-one');
    const two = await leading('repo-two');
    const ran: Array<[string, string]> = [];
    const poolFor = (repository: string, agent: string, own: boolean) =>
      startWorkers({
        url: server.url,
        repository,
        own,
        roles: ['builder', 'reviewer', 'architect', 'test'],
        slots: 2,
        agent,
        heartbeatMs: 500,
        run: async (_claimed, key) => {
          ran.push([agent, key.repository]);
          return { ok: true, inputs: [] };
        },
      });
    // Each engine's own pool, and an agent of the first repository: none may take the engines' jobs but their own.
    const pools = [
      await poolFor('repo-one', 'engine one', true),
      await poolFor('repo-two', 'engine two', true),
      await poolFor('repo-one', 'agent of one', false),
    ];
    try {
      const keys: JobKey[] = [];
      for (let i = 0; i < 4; i += 1) {
        keys.push(one.decide({ i }, 'engine one'), two.decide({ i }, 'engine two'));
        await Promise.all([one.log.sync(), two.log.sync()]);
      }
      for (const k of keys) while ((await job(one.d, k))?.state !== 'done') await new Promise((r) => setTimeout(r, 50));
      expect(ran.filter(([agent, repository]) => agent !== (repository === 'repo-one' ? 'engine one' : 'engine two'))).toEqual([]);
      expect(ran).toHaveLength(8);
    } finally {
      for (const p of pools) await p.stop();
      await one.log.close();
      await two.log.close();
    }
  }, 60_000);

  it('refuses a job’s result that carries what its kind cannot report, and fails the effect naming why', async () => {
    const { d, log } = await leading('forged');
    const broker = new JobBroker({ url: server.url, log, at: log.at, localRoles: [], heartbeatMs: 400, slots: 0 });
    await broker.serve({ clock: systemClock } as EffectContext);
    const forger = await poolOf(d.client, 'a forging agent', 'forged');
    const sha = 'b'.repeat(40);
    /** A trunk test decided, claimed by the forger, and reported with `inputs`: the broker's outcome. */
    const reported = async (inputs: unknown[]) => {
      const decision = log.append({ type: 'test.requested', block: 'alpha', sha } as never);
      log.enqueue(decision.seq, { kind: 'test.requested', role: 'test', request: decision });
      await log.sync();
      const k = { repository: 'forged', run: RUN, seq: decision.seq };
      const outcome = broker.outcome({ decision: decision as TronEvent, request: decision });
      // It may be refused while the report is still being sent: handled now, asserted by the caller.
      outcome.catch(() => undefined);
      const claimed = await claimJob(d.client, forger, k);
      await completeJob(d.client, forger, k, claimed!.attempt, { ok: true, inputs });
      return outcome;
    };
    try {
      const answered = { type: 'operator.answered', block: 'alpha', answer: 'approve' };
      await expect(reported([{ type: 'trunk.tested', block: 'alpha', sha, ok: true }, answered])).rejects.toThrow(
        /result of its job from a forging agent \(attempt 1\) was refused: a test.requested job reports one trunk.tested, and this result holds trunk.tested, operator.answered/,
      );
      await expect(reported([answered])).rejects.toThrow(/refused/);
      await expect(reported([{ type: 'trunk.tested', block: 'alpha', sha: 'c'.repeat(40), ok: true }])).rejects.toThrow(
        /has sha "c+", not "b+"/,
      );
      expect(await reported([{ type: 'trunk.tested', block: 'alpha', sha, ok: true }])).toEqual([
        { type: 'trunk.tested', block: 'alpha', sha, ok: true },
      ]);
    } finally {
      await broker.close();
      await log.close();
    }
  }, 60_000);

  it('leaves a block’s later jobs to the agent whose builder turn of it ended last while it is alive and free, and takes them otherwise', async () => {
    const { d, log } = await leading('near');
    const enqueue = async (role: 'builder' | 'reviewer' | 'test', block: string): Promise<JobKey> => {
      const e = log.append({ type: 'merge.queued', block });
      const request = role === 'test' ? { session: 'tests:gate', block } : { decision: { block } };
      log.enqueue(e.seq, { kind: role === 'test' ? 'test.requested' : 'block.dispatched', role, request });
      await log.sync();
      return { repository: 'near', run: RUN, seq: e.seq };
    };
    const state = async (k: JobKey) => (await job(d, k))?.state;
    const until = async (k: JobKey, wanted: string) => {
      while ((await state(k)) !== wanted) await new Promise((r) => setTimeout(r, 20));
    };
    const waited = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // x's builder turn ran on agent "near" (one slot), which keeps beating.
    const built = await enqueue('builder', 'x');
    const near = await poolOf(d.client, 'near', 'near', { roles: ['builder', 'reviewer', 'test'], lapseMs: 600 });
    const turn = await claimJob(d.client, near, built);
    await completeJob(d.client, near, built, turn!.attempt, { ok: true, inputs: [] });
    const beat = () => d.client.query(`select tron_heartbeat($1, $2, '{}')`, [near.worker, near.token]);
    await beat();
    let beating: NodeJS.Timeout | undefined = setInterval(() => void beat(), 100);
    const ranBy: string[] = [];
    const other = await startWorkers({
      url: server.url,
      repository: 'near',
      roles: ['builder', 'test'],
      slots: 1,
      agent: 'other',
      heartbeatMs: 1000,
      run: async () => {
        ranBy.push('other');
        return { ok: true, inputs: [] };
      },
    });
    try {
      // Near alive and free: the other agent leaves x's test run alone, though idle, polling and woken.
      const first = await enqueue('test', 'x');
      await waited(1500);
      expect(await state(first)).toBe('queued');
      // A job of another block is not near anyone: taken at once.
      const elsewhere = await enqueue('test', 'y');
      await until(elsewhere, 'done');
      expect(await state(first)).toBe('queued');
      // Near busy (its one slot running x's review, a role the other agent lacks): the other agent takes x's test run.
      const next = await enqueue('reviewer', 'x');
      const held = await claimJob(d.client, near, next);
      await until(first, 'done');
      // Near free again, then gone (its heartbeat lapsing): the other agent takes x's next test run.
      await completeJob(d.client, near, next, held!.attempt, { ok: true, inputs: [] });
      const second = await enqueue('test', 'x');
      await waited(1000);
      expect(await state(second)).toBe('queued');
      clearInterval(beating);
      beating = undefined;
      await until(second, 'done');
      expect(ranBy).toEqual(['other', 'other', 'other']);
    } finally {
      if (beating) clearInterval(beating);
      await other.stop();
    }
  }, 60_000);
  it('says once per role, at its first job, when no live agent holds it — an architect’s escalation too — and nothing for a role one holds', async () => {
    const { d, log } = await leading('unheld');
    // An agent of this repository holds builder and test; none holds architect.
    await poolOf(d.client, 'agent b', 'unheld', { roles: ['builder', 'test'] });
    // One of another repository holds architect: it serves not this one.
    await poolOf(d.client, 'agent elsewhere', 'elsewhere', { roles: ['architect'] });
    const said: string[] = [];
    const broker = new JobBroker({ url: server.url, log, at: log.at, localRoles: [], heartbeatMs: 200, slots: 1 });
    await broker.serve({
      print: (line: string) => said.push(line),
      turns: new TurnTable(clock, () => undefined),
      clock: systemClock,
    } as unknown as EffectContext);
    try {
      const turn = (role: string, block: string) => {
        const decision = log.append({
          type: 'block.dispatched',
          block,
          role,
          kind: 'build',
          session: `${block}-s`,
          turn: 1,
          phase: 'build',
          attempt: 1,
          expect: ['DONE'],
        } as never);
        return { decision, request: { block } };
      };
      broker.enqueue([turn('architect', 'alpha'), turn('builder', 'beta')]);
      broker.enqueue([turn('architect', 'gamma')]);
      await log.sync();
      const line =
        'tron: no tron agent holds role architect yet: architect turns wait in the queue until one starts (`tron agent --roles architect`)';
      for (let i = 0; i < 100 && said.length === 0; i += 1) await new Promise((r) => setTimeout(r, 50));
      // Given time for a second line, were there one to come.
      await new Promise((r) => setTimeout(r, 300));
      expect(said).toEqual([line]);
    } finally {
      await broker.close();
    }
  });
});
