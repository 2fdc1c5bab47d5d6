/**
 * The channel between the engine and a turn running on a `tron agent` (docs/cluster.md,
 * "Stopping and liveness of turns on agents"): what the engine asks of a job while it runs,
 * and what the attempt running it says meanwhile — both rows in the database, since the
 * engine and the agent share nothing else.
 *
 * - **asks** (`tron_job_asks`), written by the engine: `stop` (the engine stops, the block
 *   was parked, the turn re-issued: the agent kills the turn's processes) and `probe` (the
 *   turn overran: the agent takes its signs of life as the engine would, and answers).
 *   A stop asks every attempt, present and future; a probe, the attempt running now. An
 *   agent reads the open asks of the jobs it holds (`tron_asks`), woken by NOTIFY on
 *   `tron_asks` and, should a notification be lost, at each heartbeat; it answers with
 *   `tron_answer`, fenced by attempt as a result is.
 * - **notes** (`tron_job_notes`), written by the attempt through `tron_note` and only while
 *   it holds the job: the turn started, a worker process spawned or exited. The engine
 *   records them in its log as its own turns' notes (`worker.spawned`/`worker.exited`, with
 *   the agent named), and a start re-arms the turn's overrun timer.
 *
 * A queued job the engine stops before any agent claims it is finished here at once, with
 * the outcome the engine gives it; the claim of a finished job runs nothing.
 *
 * The tables and functions are versions 6 and 9 of the schema (engine/schema/migrations/).
 *
 * And a job the queue library lost: its row deleted by a role that could. `exhaustedJobs`
 * finds the engine's waiting jobs in that state, so the engine fails them with a reason
 * instead of waiting forever. (A job's attempts running out is tron's own to say, at the
 * claim: engine/schema/migrations/0011-attempts.ts.)
 */
import type pg from 'pg';
import type { JobKey, JobResult } from './pg-job-types.ts';
import type { RunKey } from '../log/pg-log.ts';
import type { Caller } from './pg-job-scope.ts';
import { inTurn } from '../log/in-turn.ts';

/** The channel an agent listens on for asks (payload: the worker holding the job). */
export const ASKS_CHANNEL = 'tron_asks';
/** The channel the engine listens on for notes and answers (payload: repository/run). */
export const NOTES_CHANNEL = 'tron_notes';

/** What an attempt says of its turn. */
export type JobNote =
  | { kind: 'started' }
  | { kind: 'spawned'; pid: number; start_time: string; agent?: string }
  | { kind: 'exited'; pid: number; code: number | null; signal: string | null; agent?: string }
  /** The turn's output from byte `offset` of its file on the agent (schema version 9; turn-log.ts followOutput). */
  | { kind: 'output'; offset: number; text: string };

/** The largest `text` of an output note (characters); the database refuses a longer one (schema version 9). */
export const OUTPUT_NOTE_CHARS = 32 * 1024;

/** Removes the output notes of a job the engine has kept the output of (its turn's file holds them now). */
export async function dropOutputNotes(client: pg.ClientBase, key: JobKey): Promise<void> {
  await client.query(`delete from tron_job_notes where repository = $1 and run = $2 and seq = $3 and body ->> 'kind' = 'output'`, [
    key.repository,
    key.run,
    key.seq,
  ]);
}

/** An open ask of a job an agent holds. */
export interface Ask extends JobKey {
  attempt: number;
  id: number;
  kind: 'stop' | 'probe';
  body: unknown;
}

// ---- the engine's side (its role owns the tables) ----

/**
 * Stops a job: a queued one is finished at once with `outcome` (no agent will run it); a
 * running one gets a stop ask for every attempt, and its agent is woken. Returns which.
 */
export async function askStop(
  client: pg.ClientBase,
  key: JobKey,
  reason: string,
  outcome: JobResult,
): Promise<'finished' | 'asked' | 'done'> {
  const finished = await client.query(
    `with f as (update tron_jobs set state = 'done', outcome = $4, done_at = now()
                 where repository = $1 and run = $2 and seq = $3 and state = 'queued' returning 1)
     select pg_notify('tron_results', $1 || '/' || $2) from f`,
    [key.repository, key.run, key.seq, JSON.stringify(outcome)],
  );
  if (finished.rowCount) return 'finished';
  const asked = await client.query(
    `with j as (select worker from tron_jobs where repository = $1 and run = $2 and seq = $3 and state = 'running'),
          a as (insert into tron_job_asks (repository, run, seq, kind, body)
                select $1, $2, $3, 'stop', jsonb_build_object('reason', $4::text) from j returning 1)
     select pg_notify('${ASKS_CHANNEL}', j.worker) from j`,
    [key.repository, key.run, key.seq, reason],
  );
  return asked.rowCount ? 'asked' : 'done';
}

/** Asks the attempt running a job to probe its turn; the ask's id, or undefined when no attempt runs it. */
export async function askProbe(client: pg.ClientBase, key: JobKey, body: unknown): Promise<number | undefined> {
  const { rows } = await client.query<{ id: string; worker: string }>(
    `with j as (select attempt, worker from tron_jobs where repository = $1 and run = $2 and seq = $3 and state = 'running'),
          a as (insert into tron_job_asks (repository, run, seq, attempt, kind, body)
                select $1, $2, $3, j.attempt, 'probe', $4 from j returning id)
     select a.id, j.worker, pg_notify('${ASKS_CHANNEL}', j.worker) from a, j`,
    [key.repository, key.run, key.seq, JSON.stringify(body)],
  );
  return rows[0] ? Number(rows[0].id) : undefined;
}

/** The answer to an ask, once given. */
export async function answerOf(client: pg.ClientBase, id: number): Promise<unknown | undefined> {
  const { rows } = await client.query<{ answer: unknown }>('select answer from tron_job_asks where id = $1 and answered_at is not null', [
    id,
  ]);
  return rows[0]?.answer;
}

/** What the engine follows of the jobs it waits on: each one's state and attempt, and the notes after `after`. */
export async function jobProgress(
  client: pg.ClientBase,
  at: RunKey,
  seqs: readonly number[],
  after: number,
): Promise<{
  jobs: Array<{ seq: number; state: string; attempt: number; worker: string | null }>;
  notes: Array<{ id: number; seq: number; attempt: number; body: JobNote; worker: string | null }>;
}> {
  const jobs = await client.query<{ seq: number; state: string; attempt: number; worker: string | null }>(
    'select seq, state, attempt, worker from tron_jobs where repository = $1 and run = $2 and seq = any($3::integer[])',
    [at.repository, at.run, seqs],
  );
  const notes = await client.query<{ id: string; seq: number; attempt: number; body: JobNote; worker: string | null }>(
    `select n.id, n.seq, n.attempt, n.body, j.worker from tron_job_notes n
       left join tron_jobs j on j.repository = n.repository and j.run = n.run and j.seq = n.seq
      where n.repository = $1 and n.run = $2 and n.seq = any($3::integer[]) and n.id > $4 order by n.id`,
    [at.repository, at.run, seqs, after],
  );
  return { jobs: jobs.rows, notes: notes.rows.map((n) => ({ ...n, id: Number(n.id) })) };
}

/**
 * The engine's waiting jobs the queue will never hand out again: their queue row is gone
 * (deleted by a role that could), each with the reason, for the failure the engine
 * reports. A job whose attempts ran out is not one of them: the claim past its last gives
 * it up with its own failure (schema version 11). Never a job a live attempt holds (its
 * pool seen within its own lapse): that attempt reports it, and a second delivery's end —
 * or a hostile role's delete — does not end the attempt that holds it.
 */
export async function exhaustedJobs(
  client: pg.ClientBase,
  at: RunKey,
  seqs: readonly number[],
): Promise<Array<{ seq: number; reason: string }>> {
  const { rows } = await client.query<{ seq: number }>(
    `select t.seq from tron_jobs t
      where t.repository = $1 and t.run = $2 and t.seq = any($3::integer[]) and t.state in ('queued', 'running')
        and not exists (select 1 from graphile_worker.jobs g where g.key = t.repository || '/' || t.run || '/' || t.seq)
        and not (t.state = 'running' and exists (select 1 from tron_agents a where a.worker = t.worker and a.seen_at >= now() - a.lapse))`,
    [at.repository, at.run, seqs],
  );
  return rows.map((r) => ({
    seq: r.seq,
    reason: 'its job is no longer on the queue (deleted from graphile_worker.jobs): no agent will run it',
  }));
}

/** Finishes a job the queue gave up on with its failure; false when a result got there first. */
export async function failJob(client: pg.ClientBase, key: JobKey, result: JobResult): Promise<boolean> {
  const { rowCount } = await client.query(
    `update tron_jobs set state = 'done', outcome = $4, done_at = now()
      where repository = $1 and run = $2 and seq = $3 and state in ('queued', 'running')`,
    [key.repository, key.run, key.seq, JSON.stringify(result)],
  );
  return (rowCount ?? 0) > 0;
}

// ---- the agent's side (its role may only call the functions) ----

/** The open asks of the jobs `caller` holds. */
export async function asksFor(client: pg.ClientBase, caller: Caller): Promise<Ask[]> {
  const { rows } = await client.query<Ask & { id: string }>('select * from tron_asks($1, $2)', [caller.worker, caller.token]);
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

/** Of the attempts given, those that no longer hold their job. */
export async function lostAttempts(
  client: pg.ClientBase,
  caller: Caller,
  held: ReadonlyArray<JobKey & { attempt: number }>,
): Promise<Array<JobKey & { attempt: number }>> {
  if (held.length === 0) return [];
  const { rows } = await client.query<JobKey & { attempt: number }>('select * from tron_lost($1, $2, $3, $4, $5, $6)', [
    caller.worker,
    caller.token,
    held.map((h) => h.repository),
    held.map((h) => h.run),
    held.map((h) => h.seq),
    held.map((h) => h.attempt),
  ]);
  return rows;
}

/** Answers an ask as `attempt`; refused (STALE_ATTEMPT) unless that attempt holds the job. */
export async function answerAsk(
  client: pg.ClientBase,
  caller: Caller,
  key: JobKey,
  attempt: number,
  id: number,
  answer: unknown,
): Promise<void> {
  await client.query('select tron_answer($1, $2, $3, $4, $5, $6, $7, $8)', [
    caller.worker,
    caller.token,
    key.repository,
    key.run,
    key.seq,
    attempt,
    id,
    JSON.stringify(answer),
  ]);
}

/** Records a note of `attempt`; false when that attempt no longer holds the job (it was given to another). */
export async function noteJob(client: pg.ClientBase, caller: Caller, key: JobKey, attempt: number, note: JobNote): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>('select tron_note($1, $2, $3, $4, $5, $6, $7) as ok', [
    caller.worker,
    caller.token,
    key.repository,
    key.run,
    key.seq,
    attempt,
    JSON.stringify(note),
  ]);
  return rows[0]?.ok === true;
}

/**
 * A client's queries, one at a time: the engine's and the agent's watchers share a
 * connection among timers and notifications, and pg warns of (and will refuse) a query
 * issued while another runs.
 */
export function serialized(client: pg.ClientBase): pg.ClientBase {
  return { query: inTurn(client.query.bind(client) as (...a: unknown[]) => Promise<unknown>) } as unknown as pg.ClientBase;
}
