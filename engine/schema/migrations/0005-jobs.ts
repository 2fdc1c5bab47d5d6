/**
 * Version 5 (the queue's version 1 while it had a series of its own): **effects as jobs**
 * (engine/queue/pg-jobs.ts). A worker turn or a test run the engine decided is a row of
 * `tron_jobs`, fenced by the log's trigger; a trigger hands it to the queue library
 * (graphile-worker, whose schema is brought up before this series). `tron_claim` raises a
 * job's attempt; `tron_complete` takes a result only from the attempt that holds it
 * (SQLSTATE TRN02, pg-jobs.ts's STALE_ATTEMPT); `tron_heartbeat` and `tron_reap` keep the
 * agents' liveness. Versions 10 and 11 replace most of these functions.
 */
export default `
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
        p_attempt, p_repository, p_run, p_seq, coalesce(current::text, 'none') using errcode = 'TRN02';
    end if;
    perform pg_notify('tron_results', p_repository || '/' || p_run);
  end $$;

  -- Only roles given them may call these (docs/cluster.md, "Roles"): never every role of the database.
  revoke execute on function tron_heartbeat(text, text, text[], integer, text[]), tron_reap(interval),
    tron_claim(text, text, integer, text), tron_complete(text, text, integer, integer, jsonb) from public;
  `;
