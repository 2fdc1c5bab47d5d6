/**
 * Version 10 (the queue's 6): **a job runs only where it belongs, and only its holder
 * speaks for it** (docs/cluster.md, "Roles"). Before it, any role that could call the
 * queue's functions could claim any job of any repository and role, heartbeat or reap for
 * any pool, and speak for an attempt it did not run. Now, in SQL:
 *
 * - **a pool registers** (`tron_register`: its name, repository, roles, slots and its own
 *   lapse, at least half a second and at most an hour) and gets back a secret token
 *   (random in the database; only its hash is kept). Every other call names the worker
 *   and carries the token: a caller that is not the registered worker is refused
 *   (SQLSTATE TRN03, engine/queue/pg-job-scope.ts's NOT_YOURS).
 * - **a job says who may claim it**: `tron_jobs.pool` is the engine's own pool for a job it
 *   runs itself (`[cluster] jobs = "here"`), or null for agents — then any pool registered
 *   for the job's repository and holding its role. The queue library's task name says the
 *   same (`tron_task`), so a pool is not even woken for a job that is not its own; and
 *   `tron_claim` checks it again, whatever the task name.
 * - **per database role**: `tron_agent_access (db_role, repository, roles)` says which
 *   repositories and roles the members of a database role may serve (`*` for any). The
 *   queue's owner (the engine's role) and superusers may serve any.
 * - **a live holder keeps its job**: a claim of a job a live pool (seen within its own
 *   registered lapse) holds is refused; only the holder notes, answers or completes it.
 * - **reaping by each pool's own lapse**: `tron_reap` unlocks only pools silent past the
 *   lapse they registered, never a caller's.
 *
 * The functions of versions 5–9 whose callers named no token now refuse every call with a
 * message saying the caller's tron is older than the queue (its words say "version 6", the
 * queue's own number then). The new functions are granted to every role the old ones were,
 * and those roles may serve any repository and role, as before: narrow them in
 * `tron_agent_access`.
 */
export default `
  -- Who may claim a job: the engine's own pool (its registered name), or null: the agents of its repository with its role.
  alter table tron_jobs add column pool text;

  -- The queue library's task of a job: one per repository and role for agents, one per engine pool.
  create function tron_task(p_repository text, p_role text, p_pool text) returns text
  language sql immutable set search_path = public, pg_temp as $$
    select case when p_pool is null then 'tron/' || p_role || '/' || md5(p_repository) else 'tron/pool/' || md5(p_pool) end;
  $$;

  -- Registrations made before this version have no token: every pool registers again.
  delete from tron_agents;
  alter table tron_agents
    add column repository text not null,
    add column own boolean not null,
    add column lapse interval not null,
    add column token text not null,
    add column db_role text not null;

  create table tron_agent_access (
    db_role text not null,
    repository text not null,
    roles text[] not null,
    primary key (db_role, repository)
  );

  -- Whether the session's database role may serve p_role jobs of p_repository: the queue's owner (and a superuser)
  -- any; another role as tron_agent_access says for a role it is a member of.
  create function tron_may(p_repository text, p_role text) returns boolean
  language sql stable security definer set search_path = public, pg_temp as $$
    select pg_has_role(session_user, current_user, 'member')
        or exists (select 1 from tron_agent_access a join pg_roles r on r.rolname = a.db_role
                    where pg_has_role(session_user, r.oid, 'member') and a.repository in (p_repository, '*')
                      and (p_role = any(a.roles) or '*' = any(a.roles)));
  $$;

  -- The registered worker that calls, or TRN03.
  create function tron_caller(p_worker text, p_token text) returns tron_agents
  language plpgsql stable security definer set search_path = public, pg_temp as $$
  declare a tron_agents;
  begin
    select * into a from tron_agents t where t.worker = p_worker;
    if not found then
      raise exception 'worker % is not registered: it was never, or it was silent past its lapse and reaped', p_worker
        using errcode = 'TRN03', hint = 'register again (tron_register)';
    end if;
    if p_token is null or a.token <> encode(sha256(convert_to(p_token, 'UTF8')), 'hex') then
      raise exception 'worker % refused: the token is not the one its registration was given', p_worker using errcode = 'TRN03';
    end if;
    return a;
  end $$;

  -- The locks (graphile-worker ids) of the pools silent past their own lapse, unlocked; their registrations removed.
  create function tron_reap_lapsed() returns text[]
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare dead text[];
  begin
    with gone as (delete from tron_agents where seen_at < now() - lapse returning locks)
      select coalesce(array_agg(l), '{}') into dead from gone, unnest(gone.locks) as l;
    if cardinality(dead) > 0 then
      perform graphile_worker.force_unlock_workers(dead);
    end if;
    return dead;
  end $$;

  -- A pool says who it is: its name (unique among live pools), repository, roles, slots and lapse; p_own: the engine's
  -- own pool, which claims only the jobs that name it. Returns its token (kept here only as a hash) and its task names.
  create function tron_register(p_worker text, p_host text, p_repository text, p_roles text[], p_slots integer,
                                p_lapse interval, p_own boolean)
    returns table (token text, tasks text[])
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare
    secret text := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
    r text;
  begin
    if coalesce(p_worker, '') = '' or coalesce(p_repository, '') = '' or cardinality(p_roles) is distinct from array_length(p_roles, 1)
       or cardinality(p_roles) = 0 or not (p_roles <@ array['builder', 'reviewer', 'architect', 'test']) or p_slots < 1 then
      raise exception 'registration of % refused: a name, a repository, roles of builder, reviewer, architect, test and a slot are needed',
        coalesce(p_worker, 'a worker') using errcode = 'TRN03';
    end if;
    foreach r in array p_roles loop
      if not tron_may(p_repository, r) then
        raise exception 'database role % may not serve % jobs of repository %', session_user, r, p_repository
          using errcode = 'TRN03',
                hint = format('as the engine''s role: insert into tron_agent_access (db_role, repository, roles) values (%L, %L, %L)',
                              session_user, p_repository, '{' || r || '}');
      end if;
    end loop;
    perform tron_reap_lapsed();
    if exists (select 1 from tron_agents t where t.worker = p_worker) then
      raise exception 'registration of % refused: a live pool is registered under that name', p_worker using errcode = 'TRN03';
    end if;
    insert into tron_agents (worker, host, repository, roles, slots, locks, own, lapse, token, db_role)
      values (p_worker, coalesce(p_host, ''), p_repository, p_roles, p_slots, '{}', p_own,
              least(greatest(p_lapse, interval '500 milliseconds'), interval '1 hour'), encode(sha256(convert_to(secret, 'UTF8')), 'hex'), session_user);
    return query select secret,
      case when p_own then array[tron_task(p_repository, null, p_worker)]
           else array(select tron_task(p_repository, x, null) from unnest(p_roles) as x) end;
  end $$;

  create function tron_heartbeat(p_worker text, p_token text, p_locks text[]) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    update tron_agents set seen_at = now(), locks = coalesce(p_locks, '{}') where worker = p_worker;
  end $$;

  create function tron_reap(p_worker text, p_token text) returns text[]
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    return tron_reap_lapsed();
  end $$;

  create function tron_claim(p_worker text, p_token text, p_repository text, p_run text, p_seq integer)
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
    return query update tron_jobs t set attempt = t.attempt + 1, worker = p_worker, claimed_at = now(), state = 'running'
      where t.repository = p_repository and t.run = p_run and t.seq = p_seq
      returning t.attempt, t.kind, t.role, t.request;
  end $$;

  create function tron_complete(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer,
                                p_outcome jsonb) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  declare
    a tron_agents := tron_caller(p_worker, p_token);
    j tron_jobs;
  begin
    select * into j from tron_jobs t where t.repository = p_repository and t.run = p_run and t.seq = p_seq for update;
    if not found or j.attempt <> p_attempt or j.state <> 'running' then
      raise exception 'result of attempt % of job %/%/% refused: the job is at attempt %, or already done',
        p_attempt, p_repository, p_run, p_seq, coalesce(j.attempt::text, 'none') using errcode = 'TRN02';
    end if;
    if j.worker <> p_worker or j.repository <> a.repository or not tron_may(j.repository, j.role) then
      raise exception 'result of attempt % of job %/%/% refused: worker % does not hold it (%)', p_attempt, p_repository, p_run, p_seq,
        p_worker, j.worker using errcode = 'TRN03';
    end if;
    update tron_jobs t set state = 'done', outcome = p_outcome, done_at = now()
      where t.repository = p_repository and t.run = p_run and t.seq = p_seq;
    perform pg_notify('tron_results', p_repository || '/' || p_run);
  end $$;

  -- The flags p_worker leaves alone: near:<role>:<agent> of each role of each other live agent (by its own lapse) with a free slot.
  create function tron_near_elsewhere(p_worker text, p_token text) returns text[]
  language plpgsql stable security definer set search_path = public, pg_temp as $$
  declare me tron_agents := tron_caller(p_worker, p_token);
  begin
    return (select coalesce(array_agg('near:' || r.role || ':' || a.worker), '{}') from tron_agents a, unnest(a.roles) as r(role)
     where a.worker <> p_worker and a.repository = me.repository and not a.own and a.seen_at >= now() - a.lapse
       and (select count(*) from tron_jobs j where j.worker = a.worker and j.state = 'running') < a.slots);
  end $$;

  create function tron_asks(p_worker text, p_token text)
    returns table (repository text, run text, seq integer, attempt integer, id bigint, kind text, body jsonb)
  language plpgsql stable security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    return query select a.repository, a.run, a.seq, j.attempt, a.id, a.kind, a.body
      from tron_job_asks a join tron_jobs j on j.repository = a.repository and j.run = a.run and j.seq = a.seq
     where j.worker = p_worker and j.state = 'running' and a.answered_at is null
       and (a.attempt is null or a.attempt = j.attempt)
     order by a.id;
  end $$;

  create function tron_answer(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer,
                              p_id bigint, p_answer jsonb) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    update tron_job_asks a set answer = p_answer, answered_at = now()
      where a.id = p_id and a.repository = p_repository and a.run = p_run and a.seq = p_seq and a.answered_at is null
        and exists (select 1 from tron_jobs j where j.repository = p_repository and j.run = p_run and j.seq = p_seq
                      and j.attempt = p_attempt and j.state = 'running' and j.worker = p_worker)
        and (a.attempt is null or a.attempt = p_attempt);
    if not found then
      raise exception 'answer of attempt % to ask % refused: the attempt does not hold job %/%/%, or it was answered',
        p_attempt, p_id, p_repository, p_run, p_seq using errcode = 'TRN02';
    end if;
    perform pg_notify('tron_notes', p_repository || '/' || p_run);
  end $$;

  create function tron_note(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer,
                            p_body jsonb) returns boolean
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    insert into tron_job_notes (repository, run, seq, attempt, body)
      select p_repository, p_run, p_seq, p_attempt, p_body from tron_jobs j
       where j.repository = p_repository and j.run = p_run and j.seq = p_seq and j.attempt = p_attempt and j.state = 'running'
         and j.worker = p_worker;
    if not found then return false; end if;
    perform pg_notify('tron_notes', p_repository || '/' || p_run);
    return true;
  end $$;

  -- Of the attempts p_worker runs, those that no longer hold their job (given to another, or finished for it).
  create function tron_lost(p_worker text, p_token text, p_repository text[], p_run text[], p_seq integer[], p_attempt integer[])
    returns table (repository text, run text, seq integer, attempt integer)
  language plpgsql stable security definer set search_path = public, pg_temp as $$
  begin
    perform tron_caller(p_worker, p_token);
    return query select u.r, u.n, u.s, u.a from unnest(p_repository, p_run, p_seq, p_attempt) as u(r, n, s, a)
     where not exists (select 1 from tron_jobs j where j.repository = u.r and j.run = u.n and j.seq = u.s
                         and j.attempt = u.a and j.state = 'running' and j.worker = p_worker);
  end $$;

  -- The queue library's task of each job: scoped by repository and role, or to the engine's own pool.
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
      max_attempts => 25, job_key => new.repository || '/' || new.run || '/' || new.seq, job_key_mode => 'unsafe_dedupe',
      flags => case when near is null then null else array['near:' || new.role || ':' || near] end);
    return new;
  end $$;

  create or replace function tron_heartbeat(p_worker text, p_host text, p_roles text[], p_slots integer, p_locks text[]) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_heartbeat without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_reap(p_lapse interval) returns text[]
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_reap without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_claim(p_repository text, p_run text, p_seq integer, p_worker text) returns table (attempt integer, kind text, role text, request jsonb)
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_claim without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_complete(p_repository text, p_run text, p_seq integer, p_attempt integer, p_outcome jsonb) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_complete without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_near_elsewhere(p_worker text, p_lapse interval) returns text[]
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_near_elsewhere without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_asks(p_worker text) returns table (repository text, run text, seq integer, attempt integer, id bigint, kind text, body jsonb)
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_asks without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_answer(p_repository text, p_run text, p_seq integer, p_attempt integer, p_id bigint, p_answer jsonb) returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_answer without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_note(p_repository text, p_run text, p_seq integer, p_attempt integer, p_body jsonb) returns boolean
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_note without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  create or replace function tron_lost(p_repository text[], p_run text[], p_seq integer[], p_attempt integer[]) returns table (repository text, run text, seq integer, attempt integer)
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    raise exception 'tron_lost without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;

  revoke execute on function tron_task(text, text, text), tron_may(text, text), tron_caller(text, text), tron_reap_lapsed(),
    tron_register(text, text, text, text[], integer, interval, boolean), tron_heartbeat(text, text, text[]), tron_reap(text, text), tron_claim(text, text, text, text, integer), tron_complete(text, text, text, text, integer, integer, jsonb), tron_near_elsewhere(text, text), tron_asks(text, text), tron_answer(text, text, text, text, integer, integer, bigint, jsonb), tron_note(text, text, text, text, integer, integer, jsonb), tron_lost(text, text, text[], text[], integer[], integer[]) from public;

  do $$ declare r text; begin
    for r in select distinct grantee from information_schema.routine_privileges
              where routine_name = 'tron_claim' and privilege_type = 'EXECUTE' and grantee <> current_user and grantee <> 'PUBLIC' loop
      execute format('grant execute on function tron_register(text, text, text, text[], integer, interval, boolean), tron_heartbeat(text, text, text[]), tron_reap(text, text), tron_claim(text, text, text, text, integer), tron_complete(text, text, text, text, integer, integer, jsonb), tron_near_elsewhere(text, text), tron_asks(text, text), tron_answer(text, text, text, text, integer, integer, bigint, jsonb), tron_note(text, text, text, text, integer, integer, jsonb), tron_lost(text, text, text[], text[], integer[], integer[]) to %I', r);
      insert into tron_agent_access (db_role, repository, roles) values (r, '*', '{*}') on conflict do nothing;
    end loop;
  end $$;
`;
