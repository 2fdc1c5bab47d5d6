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
 *   job up past its last (pg-job-attempts.ts: tron counts attempts, the queue library only
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
import { OUTPUT_MIGRATION, CONTROL_MIGRATION } from './pg-job-control.ts';
import { type Caller, NOT_YOURS, SCOPE_MIGRATION, SCOPED_FUNCTIONS } from './pg-job-scope.ts';
import { ATTEMPTS_MIGRATION } from './pg-job-attempts.ts';
import { connectFailure, isDatabaseFull } from '../log/pg-log.ts';
import { migrateSeries, SCHEMA_LOCK, SchemaNewerError } from '../schema/migrate.ts';

/** The SQLSTATE of a refused result: the attempt that reports is not the job's current one. */
export const STALE_ATTEMPT = 'TRN02';

/** The notification channel a completed job is announced on (payload: repository/run). */
export const RESULTS_CHANNEL = 'tron_results';

export { type Caller, NOT_YOURS } from './pg-job-scope.ts';

/**
 * A migration's grant of a new function to the agents' roles made before it (those
 * `agentGrants` gave tron_claim): their hosts call it with no grant run again.
 */
const grantedToAgentRoles = (fn: string): string => `  do $$ declare r text; begin
    for r in select distinct grantee from information_schema.routine_privileges
              where routine_name = 'tron_claim' and privilege_type = 'EXECUTE' and grantee <> current_user loop
      execute format('grant execute on function ${fn} to %I', r);
    end loop;
  end $$;
`;

/**
 * Version 3: **a block's jobs go near its work.** A block's gate test run, its challenge, its
 * review and its next builder turn are flagged `near:<role>:<agent>`, the agent whose builder
 * turn of the block ended last: that clone holds the block's sha and its worktree, so it
 * fetches nothing and checks out little. Every other agent leaves such a job alone while that
 * agent is alive, holds the job's role and has a free slot (`tron_near_elsewhere`,
 * graphile-worker's forbidden flags), and takes it otherwise — so a preference, never a wait
 * on a busy or dead agent: a job is at most one poll late (the pool's poll interval) when
 * that agent filled its slots meanwhile.
 * Which agent runs a job changes nothing the engine decides.
 */
const NEAR_MIGRATION = `
  create index tron_jobs_running on tron_jobs (worker) where state = 'running';

  create or replace function tron_jobs_enqueue() returns trigger language plpgsql as $$
  declare
    near text;
    blk text := coalesce(new.request -> 'decision' ->> 'block',
                         case when new.request ->> 'session' = 'tests:gate' then new.request ->> 'block' end);
  begin
    if blk is not null then
      select t.worker into near from tron_jobs t
       where t.repository = new.repository and t.run = new.run and t.role = 'builder' and t.state = 'done'
         and t.request -> 'decision' ->> 'block' = blk
       order by t.seq desc limit 1;
    end if;
    perform graphile_worker.add_job('tron_' || new.role,
      json_build_object('repository', new.repository, 'run', new.run, 'seq', new.seq),
      max_attempts => 25, job_key => new.repository || '/' || new.run || '/' || new.seq, job_key_mode => 'unsafe_dedupe',
      flags => case when near is null then null else array['near:' || new.role || ':' || near] end);
    return new;
  end $$;

  -- The flags agent p_worker leaves alone: near:<role>:<agent> of each role of each other agent
  -- seen within p_lapse that has a free slot (an agent without the job's role is never waited for).
  create function tron_near_elsewhere(p_worker text, p_lapse interval) returns text[]
  language sql stable security definer set search_path = public, pg_temp as $$
    select coalesce(array_agg('near:' || r.role || ':' || a.worker), '{}') from tron_agents a, unnest(a.roles) as r(role)
     where a.worker <> p_worker and a.seen_at >= now() - p_lapse
       and (select count(*) from tron_jobs j where j.worker = a.worker and j.state = 'running') < a.slots;
  $$;
  revoke execute on function tron_near_elsewhere(text, interval) from public;
  -- The agents' roles granted before this version (agentGrants) may ask it too.
${grantedToAgentRoles('tron_near_elsewhere(text, interval)')}`;

/**
 * Version 4: the queue's schema version, for an agent to read at start (its role reads no
 * table of tron's): an agent of an older tron refuses a newer queue, as an engine does.
 */
const VERSION_MIGRATION = `
  create function tron_queue_version() returns integer
  language sql stable security definer set search_path = public, pg_temp as $$
    select max(version) from tron_queue_schema;
  $$;
  revoke execute on function tron_queue_version() from public;
${grantedToAgentRoles('tron_queue_version()')}`;

/** The queue's schema, one migration a version (`tron_queue_schema`); never edited once released. */
export const JOB_MIGRATIONS: readonly string[] = [
  `
  create table tron_jobs (
    repository text not null,
    run text not null,
    seq integer not null,
    generation bigint not null,
    kind text not null,
    role text not null,
    request jsonb not null,
    attempt integer not null default 0,
    worker text,
    claimed_at timestamptz,
    state text not null default 'queued' check (state in ('queued', 'running', 'done', 'dropped')),
    outcome jsonb,
    done_at timestamptz,
    created_at timestamptz not null default now(),
    primary key (repository, run, seq)
  );
  create trigger tron_jobs_fenced before insert on tron_jobs
    for each row execute function tron_events_fenced();
  create function tron_jobs_enqueue() returns trigger language plpgsql as $$
  begin
    perform graphile_worker.add_job('tron_' || new.role,
      json_build_object('repository', new.repository, 'run', new.run, 'seq', new.seq),
      max_attempts => 25, job_key => new.repository || '/' || new.run || '/' || new.seq, job_key_mode => 'unsafe_dedupe');
    return new;
  end $$;
  create trigger tron_jobs_enqueue after insert on tron_jobs
    for each row execute function tron_jobs_enqueue();

  create table tron_agents (
    worker text primary key,
    host text not null,
    roles text[] not null,
    slots integer not null,
    locks text[] not null,
    seen_at timestamptz not null default now()
  );

  create function tron_heartbeat(p_worker text, p_host text, p_roles text[], p_slots integer, p_locks text[]) returns void
  language sql security definer set search_path = public, pg_temp as $$
    insert into tron_agents (worker, host, roles, slots, locks) values (p_worker, p_host, p_roles, p_slots, p_locks)
    on conflict (worker) do update
      set seen_at = now(), host = excluded.host, roles = excluded.roles, slots = excluded.slots, locks = excluded.locks;
  $$;

  create function tron_reap(p_lapse interval) returns text[]
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare dead text[];
  begin
    with gone as (delete from tron_agents where seen_at < now() - p_lapse returning locks)
      select coalesce(array_agg(l), '{}') into dead from gone, unnest(gone.locks) as l;
    if cardinality(dead) > 0 then
      perform graphile_worker.force_unlock_workers(dead);
    end if;
    return dead;
  end $$;

  create function tron_claim(p_repository text, p_run text, p_seq integer, p_worker text)
    returns table (attempt integer, kind text, role text, request jsonb)
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare j tron_jobs;
  declare live bigint;
  begin
    select * into j from tron_jobs t where t.repository = p_repository and t.run = p_run and t.seq = p_seq for update;
    if not found or j.state in ('done', 'dropped') then return; end if;
    select l.generation into live from tron_lease l where l.repository = p_repository;
    if live is distinct from j.generation then
      -- The engine that decided it is gone: its successor's recovery decides again.
      update tron_jobs t set state = 'dropped' where t.repository = p_repository and t.run = p_run and t.seq = p_seq;
      return;
    end if;
    return query update tron_jobs t set attempt = t.attempt + 1, worker = p_worker, claimed_at = now(), state = 'running'
      where t.repository = p_repository and t.run = p_run and t.seq = p_seq
      returning t.attempt, t.kind, t.role, t.request;
  end $$;

  create function tron_complete(p_repository text, p_run text, p_seq integer, p_attempt integer, p_outcome jsonb) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare current integer;
  begin
    update tron_jobs t set state = 'done', outcome = p_outcome, done_at = now()
      where t.repository = p_repository and t.run = p_run and t.seq = p_seq and t.attempt = p_attempt and t.state = 'running';
    if not found then
      select t.attempt into current from tron_jobs t where t.repository = p_repository and t.run = p_run and t.seq = p_seq;
      raise exception 'result of attempt % of job %/%/% refused: the job is at attempt %, or already done',
        p_attempt, p_repository, p_run, p_seq, coalesce(current::text, 'none') using errcode = '${STALE_ATTEMPT}';
    end if;
    perform pg_notify('${RESULTS_CHANNEL}', p_repository || '/' || p_run);
  end $$;

  -- Only roles given them may call these (docs/cluster.md, "Roles"): never every role of the database.
  revoke execute on function tron_heartbeat(text, text, text[], integer, text[]), tron_reap(interval),
    tron_claim(text, text, integer, text), tron_complete(text, text, integer, integer, jsonb) from public;
  `,
  // 2: the engine's asks of a running job (stop, probe) and its attempt's notes (engine/queue/pg-job-control.ts).
  CONTROL_MIGRATION,
  // 3: a block's jobs go near its work (NEAR_MIGRATION).
  NEAR_MIGRATION,
  // 4: the version, readable by an agent (VERSION_MIGRATION).
  VERSION_MIGRATION,
  // 5: a turn's output as it comes, and the notes' kinds checked (engine/queue/pg-job-control.ts).
  OUTPUT_MIGRATION,
  // 6: every job scoped to its repository, role and pool; every call of a pool carries its token (engine/queue/pg-job-scope.ts).
  SCOPE_MIGRATION,
  // 7: tron_jobs alone counts a job's attempts and gives it up; the queue library only carries it (engine/queue/pg-job-attempts.ts).
  ATTEMPTS_MIGRATION,
];

/** The queue's version from which pools register and every job is scoped (pg-job-scope.ts). */
export const SCOPED_VERSION = 6;

/** The queue's version from which an agent sends its turns' output as it comes: the engine migrating to it reads them. */
export const OUTPUT_NOTES_VERSION = 5;

/**
 * An agent's check at start: the queue's schema (read through tron_queue_version, which a
 * queue older than version 4 lacks — it is then older than this tron, and fine) is not
 * newer than this tron knows. Refused with SchemaNewerError otherwise; else its version.
 */
export async function checkQueueVersion(client: pg.ClientBase, url: string): Promise<number> {
  const version = await client.query<{ v: number | null }>('select tron_queue_version() as v').then(
    (r) => r.rows[0]?.v ?? 0,
    (err: unknown) => {
      if ((err as { code?: unknown }).code === '42883') return 0;
      throw err;
    },
  );
  if (version > JOB_MIGRATIONS.length) throw new SchemaNewerError(url, version, 'tron_queue_schema', JOB_MIGRATIONS.length);
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
 * Brings graphile-worker's schema and the queue's up to date (the engine's role: it owns
 * the database). Both under the advisory lock of the log's migrations, so any number of
 * starts at once, on an empty or an older database, migrate once.
 */
export async function migrateJobs(db: Database): Promise<void> {
  // Loaded here, not at the top: a start without [cluster] database never needs it (~170 ms).
  const { runMigrations } = await import('graphile-worker');
  const client = db.client;
  // Every schema change under one lock, the queue library's too: it migrates on a connection of its own
  // (its `create schema` is not safe to run twice at once), while this session holds the lock the log's migrations take.
  await client.query(`select pg_advisory_lock(${SCHEMA_LOCK})`);
  try {
    // graphile-worker connects on its own: a database with no connection left says so as tron's connects do.
    await runMigrations({ connectionString: db.url, logger: QUIET }).catch((err: unknown) => {
      throw isDatabaseFull(err) ? connectFailure(db.url, err) : err;
    });
    await migrateSeries(client, db.url, { table: 'tron_queue_schema', migrations: JOB_MIGRATIONS });
  } finally {
    await client.query(`select pg_advisory_unlock(${SCHEMA_LOCK})`).catch(() => undefined);
  }
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
// biome-ignore lint/suspicious/noExplicitAny: graphile-worker's Logger is a class we stand in for.
export const QUIET: any = {
  scope: () => QUIET,
  // TRON_DEBUG=1: the library's own complaints (a missing grant, a lost connection) on stderr.
  error: (m: string) => process.env.TRON_DEBUG === '1' && process.stderr.write(`graphile-worker: ${m}\n`),
  warn: (m: string) => process.env.TRON_DEBUG === '1' && process.stderr.write(`graphile-worker: ${m}\n`),
  info: () => undefined,
  debug: () => undefined,
};

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
