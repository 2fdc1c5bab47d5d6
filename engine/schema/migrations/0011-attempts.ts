/**
 * Version 11 (the queue's 7): **one owner of a job's attempts**. Before it, two counters
 * said how often a job had been tried — `tron_jobs.attempt`, raised by each claim, and
 * graphile-worker's own `attempts`, raised by each delivery — and the queue library's
 * (`max_attempts` 25) decided when a job was given up, which the engine then found by
 * polling the library's table (engine/queue/job-sweep.ts).
 *
 * Now `tron_jobs` alone decides: a job carries how many attempts it may have
 * (`max_attempts`, 25 by default), and the claim past the last finishes it with a failure
 * naming why, in the same transaction, and announces the result as any other — the engine
 * reads it as a failed turn or test run, decided like one. The queue library only carries
 * the job to a pool: its own limit is set to the most it can hold (32767, a smallint), so
 * it never gives up first; a delivery it makes again after a failed task (a claim refused
 * while a live pool holds the job) counts nothing in tron.
 *
 * And one way an attempt ends without a result: its pool silent past its own lapse
 * (`tron_reap`). The queue library's own lock expiry (four hours) gives the job to nobody
 * while its holder lives — the claim of a job a live pool holds is refused (version 10).
 */
export default `
  alter table tron_jobs add column max_attempts integer not null default 25 check (max_attempts >= 1);

  create or replace function tron_claim(p_worker text, p_token text, p_repository text, p_run text, p_seq integer)
    returns table (attempt integer, kind text, role text, request jsonb)
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare
    a tron_agents := tron_caller(p_worker, p_token);
    j tron_jobs;
    live bigint;
  begin
    select * into j from tron_jobs t where t.repository = p_repository and t.run = p_run and t.seq = p_seq for update;
    if not found or j.state in ('done', 'dropped') then return; end if;
    if j.repository <> a.repository or not (j.role = any(a.roles)) or j.pool is distinct from (case when a.own then a.worker end)
       or not tron_may(j.repository, j.role) then
      raise exception 'claim of job %/%/% refused: it is a % job for %, and worker % serves % of % (%)',
        p_repository, p_run, p_seq, j.role, coalesce('the pool ' || j.pool, 'the agents'), p_worker, array_to_string(a.roles, ', '),
        a.repository, case when a.own then 'the engine''s own pool' else 'as an agent' end using errcode = 'TRN03';
    end if;
    if j.state = 'running' and j.worker <> p_worker
       and exists (select 1 from tron_agents h where h.worker = j.worker and h.seen_at >= now() - h.lapse) then
      raise exception 'claim of job %/%/% refused: the live worker % holds it (attempt %)', p_repository, p_run, p_seq, j.worker, j.attempt
        using errcode = 'TRN03';
    end if;
    select l.generation into live from tron_lease l where l.repository = p_repository;
    if live is distinct from j.generation then
      -- The engine that decided it is gone: its successor's recovery decides again.
      update tron_jobs t set state = 'dropped' where t.repository = p_repository and t.run = p_run and t.seq = p_seq;
      return;
    end if;
    if j.attempt >= j.max_attempts then
      -- Every attempt it may have was claimed and none reported: given up here, its failure the job's result.
      update tron_jobs t set state = 'done', done_at = now(),
        outcome = jsonb_build_object('ok', false, 'error', jsonb_build_object('message', format(
          'the job was given up: all %s of its attempts were claimed and none reported a result (the last by %s)',
          j.attempt, coalesce(j.worker, 'no worker'))))
        where t.repository = p_repository and t.run = p_run and t.seq = p_seq;
      perform pg_notify('tron_results', p_repository || '/' || p_run);
      return;
    end if;
    return query update tron_jobs t set attempt = t.attempt + 1, worker = p_worker, claimed_at = now(), state = 'running'
      where t.repository = p_repository and t.run = p_run and t.seq = p_seq
      returning t.attempt, t.kind, t.role, t.request;
  end $$;

  -- The queue library carries a job; tron counts its attempts. Its limit: the most it can hold.
  create or replace function tron_jobs_enqueue() returns trigger language plpgsql as $$
  declare
    near text;
    blk text := coalesce(new.request -> 'decision' ->> 'block',
                         case when new.request ->> 'session' = 'tests:gate' then new.request ->> 'block' end);
  begin
    if blk is not null and new.pool is null then
      select t.worker into near from tron_jobs t
       where t.repository = new.repository and t.run = new.run and t.role = 'builder' and t.state = 'done'
         and t.request -> 'decision' ->> 'block' = blk
       order by t.seq desc limit 1;
    end if;
    perform graphile_worker.add_job(tron_task(new.repository, new.role, new.pool),
      json_build_object('repository', new.repository, 'run', new.run, 'seq', new.seq),
      max_attempts => 32767, job_key => new.repository || '/' || new.run || '/' || new.seq, job_key_mode => 'unsafe_dedupe',
      flags => case when near is null then null else array['near:' || new.role || ':' || near] end);
    return new;
  end $$;

  -- The jobs queued before this version: the library's limit lifted, so tron's claim gives them up, not the library.
  update graphile_worker._private_jobs g set max_attempts = 32767
    from tron_jobs t where g.key = t.repository || '/' || t.run || '/' || t.seq;
`;
