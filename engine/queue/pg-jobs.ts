/**
 * Effects as jobs in PostgreSQL (`[cluster] database`, docs/cluster.md): a worker turn or
 * a test run the engine decided is a row of `tron_jobs`, inserted in the same statement as
 * the decision's line in `tron_events` — no job without its intent, no intent without its
 * job — and fenced by the same trigger: a row of a generation that does not hold the lease
 * is refused. A trigger on `tron_jobs` hands the job to graphile-worker (the queue library:
 * it wakes a waiting worker at once through LISTEN/NOTIFY, and claims with SKIP LOCKED).
 *
 * What the queue library does not know, these tables and functions do, in SQL:
 * - **attempts**: `tron_claim` raises a job's attempt and marks it running, and gives the
 *   job up past its last (schema version 11: tron counts attempts, the queue library only
 *   carries the job); `tron_complete` records a result only from the attempt that holds it
 *   (SQLSTATE TRN02 otherwise), so a late result from an attempt that was given up — its
 *   agent cut off, killed, slow — is refused by the database, whatever that agent believes;
 * - **agents' heartbeats**: `tron_heartbeat` every period; `tron_reap` unlocks the jobs of
 *   agents not seen for the lapse (graphile-worker's own expiry is four hours), so another
 *   agent claims them as a new attempt;
 * - **generations**: a job of an engine that lost its lease is never run.
 *
 * The functions are SECURITY DEFINER, so an agent's role needs only EXECUTE on them and the
 * queue's own tables (docs/cluster.md, "Roles"), never the log or the lease.
 */
import pg from 'pg';
import type { Database } from '../log/pg-log.ts';
import type { Claimed, JobKey, JobResult } from './pg-job-types.ts';
import { type Caller, NOT_YOURS, SCOPED_FUNCTIONS } from './pg-job-scope.ts';
import { connectFailure, isDatabaseFull } from '../log/pg-log.ts';
import { migrate, SchemaNewerError } from '../schema/migrate.ts';
import { SCHEMA_VERSION } from '../schema/series.ts';

/** The SQLSTATE of a refused result: the attempt that reports is not the job's current one. */
export const STALE_ATTEMPT = 'TRN02';

/** The notification channel a completed job is announced on (payload: repository/run). */
export const RESULTS_CHANNEL = 'tron_results';

export { type Caller, NOT_YOURS } from './pg-job-scope.ts';

/** The queue's version from which an agent serves it: one series, every job scoped (engine/schema/series.ts). */
export { ONE_SERIES_VERSION as AGENT_SCHEMA_VERSION } from '../schema/series.ts';

/**
 * An agent's check at start: the queue's schema (read through tron_queue_version, which a
 * database from before the queue's version 4 lacks — it is then older than this tron) is
 * not newer than this tron knows. Refused with SchemaNewerError otherwise; else its version
 * — before version 12, the queue's own series' number, always below AGENT_SCHEMA_VERSION.
 */
export async function checkQueueVersion(client: pg.ClientBase, url: string): Promise<number> {
  const version = await client.query<{ v: number | null }>('select tron_queue_version() as v').then(
    (r) => r.rows[0]?.v ?? 0,
    (err: unknown) => {
      if ((err as { code?: unknown }).code === '42883') return 0;
      throw err;
    },
  );
  if (version > SCHEMA_VERSION) throw new SchemaNewerError(url, version);
  return version;
}

/**
 * What the agents' role is granted (docs/cluster.md, "Roles"): graphile-worker's own tables
 * and functions — to claim, finish and retry jobs; a policy on each of its tables that keep
 * row-level security — tron's queue functions, and which repositories and roles its members
 * may serve (`tron_agent_access`; `*` for any). Nothing of the log, the lease or tron_jobs
 * itself: an agent reads a job's request and writes its result only through tron_claim and
 * tron_complete, as the registered pool holding the job's attempt.
 */
export function agentGrants(
  role: string,
  serves: { repository: string; roles: readonly string[] } = { repository: '*', roles: ['*'] },
): string {
  const quoted = (v: string) => `'${v.replaceAll("'", "''")}'`;
  return `grant usage on schema graphile_worker to ${role};
grant select, insert, update, delete on all tables in schema graphile_worker to ${role};
grant usage, select on all sequences in schema graphile_worker to ${role};
grant execute on all functions in schema graphile_worker to ${role};
-- graphile-worker keeps row-level security on its private tables: a policy lets this role through.
do $$ declare t text; begin
  for t in select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = 'graphile_worker' and c.relrowsecurity loop
    execute format('create policy %I on graphile_worker.%I for all to %I using (true) with check (true)', 'tron_agent_' || '${role}', t, '${role}');
  end loop;
end $$;
grant execute on function tron_queue_version(),
  ${SCOPED_FUNCTIONS.join(',\n  ')} to ${role};
insert into tron_agent_access (db_role, repository, roles) values (${quoted(role)}, ${quoted(serves.repository)}, ${quoted(`{${serves.roles.join(',')}}`)});`;
}

/**
 * Brings the database up to this tron's schema, the queue library's own included even when
 * tron's is current (the engine's role: it owns the database). A start after an upgrade of
 * the queue library runs its new migrations. engine/schema/migrate.ts: under one lock.
 */
export async function migrateJobs(db: Database): Promise<void> {
  await migrate(db.client, db.url, 'always').catch((err: unknown) => {
    throw isDatabaseFull(err) ? connectFailure(db.url, err) : err;
  });
}

/** What a pool says of itself when it registers (pg-job-scope.ts `tron_register`). */
export interface PoolRegistration {
  worker: string;
  host: string;
  repository: string;
  roles: readonly string[];
  slots: number;
  /** How long it may stay silent before it counts as dead: its jobs are then given to others. */
  lapseMs: number;
  /** The engine's own pool: it claims only the jobs that name it (`QueuedJob.pool`). */
  own: boolean;
}

/** Registers a pool: its token (for every later call) and the queue library's task names it serves. Refused with NOT_YOURS. */
export async function registerPool(client: pg.ClientBase, p: PoolRegistration): Promise<{ token: string; tasks: string[] }> {
  const { rows } = await client.query<{ token: string; tasks: string[] }>(
    'select * from tron_register($1, $2, $3, $4::text[], $5, $6::interval, $7)',
    [p.worker, p.host, p.repository, p.roles, p.slots, `${p.lapseMs} milliseconds`, p.own],
  );
  return rows[0]!;
}

/** Claims a delivered job as `caller`: a new attempt; undefined when it is done, dropped (old generation) or unknown. */
export async function claimJob(client: pg.ClientBase, caller: Caller, key: JobKey): Promise<Claimed | undefined> {
  const { rows } = await client.query<Claimed>('select * from tron_claim($1, $2, $3, $4, $5)', [
    caller.worker,
    caller.token,
    key.repository,
    key.run,
    key.seq,
  ]);
  return rows[0];
}

/** Whether an error is the queue refusing a caller: not the registered worker, or the job is not its to serve. */
export function isNotYours(err: unknown): boolean {
  return (err as { code?: unknown } | undefined)?.code === NOT_YOURS;
}

/** The flags of jobs `caller` leaves to the agents near their work (NEAR_MIGRATION); none when it may not ask. */
export async function nearElsewhere(client: pg.ClientBase, caller: Caller): Promise<string[]> {
  try {
    const { rows } = await client.query<{ f: string[] }>('select tron_near_elsewhere($1::text, $2::text) as f', [
      caller.worker,
      caller.token,
    ]);
    return rows[0]?.f ?? [];
  } catch {
    return [];
  }
}

/**
 * The jobs an earlier leader of the repository left queued or running (a generation before
 * `generation`, this engine's): dropped, as a claim of one would be. Their results would
 * never be read; an agent running one finds at its next look that its attempt no longer
 * holds the job (`tron_lost`) and ends its turn or test run, rather than let it run on to
 * its timeout beside the new leader's. How many were dropped.
 */
export async function dropEarlierJobs(client: pg.ClientBase, repository: string, generation: number): Promise<number> {
  const { rowCount } = await client.query(
    `update tron_jobs set state = 'dropped' where repository = $1 and generation < $2 and state in ('queued', 'running')`,
    [repository, generation],
  );
  return rowCount ?? 0;
}

/**
 * Records the result of `attempt`; the database refuses it — STALE_ATTEMPT unless that
 * attempt holds the job, NOT_YOURS unless `caller` is the registered pool that claimed it.
 */
export async function completeJob(client: pg.ClientBase, caller: Caller, key: JobKey, attempt: number, result: JobResult): Promise<void> {
  await client.query('select tron_complete($1, $2, $3, $4, $5, $6, $7)', [
    caller.worker,
    caller.token,
    key.repository,
    key.run,
    key.seq,
    attempt,
    JSON.stringify(result),
  ]);
}

/** Whether an error is the database refusing a stale attempt's result. */
export function isStaleAttempt(err: unknown): boolean {
  return (err as { code?: unknown } | undefined)?.code === STALE_ATTEMPT;
}

/** graphile-worker's logger, silenced: tron says what matters in its own words. */
export { QUIET_LIBRARY as QUIET } from '../schema/migrate.ts';

/** Connects a client of its own (for LISTEN or a worker's calls), errors reported by its next query. */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw connectFailure(url, err);
  }
  return client;
}
