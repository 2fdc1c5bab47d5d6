CREATE SCHEMA public;
COMMENT ON SCHEMA public IS 'standard public schema';
CREATE FUNCTION public.tron_answer(p_repository text, p_run text, p_seq integer, p_attempt integer, p_id bigint, p_answer jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_answer without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_answer(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer, p_id bigint, p_answer jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_asks(p_worker text) RETURNS TABLE(repository text, run text, seq integer, attempt integer, id bigint, kind text, body jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_asks without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_asks(p_worker text, p_token text) RETURNS TABLE(repository text, run text, seq integer, attempt integer, id bigint, kind text, body jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    perform tron_caller(p_worker, p_token);
    return query select a.repository, a.run, a.seq, j.attempt, a.id, a.kind, a.body
      from tron_job_asks a join tron_jobs j on j.repository = a.repository and j.run = a.run and j.seq = a.seq
     where j.worker = p_worker and j.state = 'running' and a.answered_at is null
       and (a.attempt is null or a.attempt = j.attempt)
     order by a.id;
  end $$;
CREATE TABLE public.tron_agents (
    worker text NOT NULL,
    host text NOT NULL,
    roles text[] NOT NULL,
    slots integer NOT NULL,
    locks text[] NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    repository text NOT NULL,
    own boolean NOT NULL,
    lapse interval NOT NULL,
    token text NOT NULL,
    db_role text NOT NULL
);
CREATE FUNCTION public.tron_caller(p_worker text, p_token text) RETURNS public.tron_agents
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_claim(p_repository text, p_run text, p_seq integer, p_worker text) RETURNS TABLE(attempt integer, kind text, role text, request jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_claim without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_claim(p_worker text, p_token text, p_repository text, p_run text, p_seq integer) RETURNS TABLE(attempt integer, kind text, role text, request jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_complete(p_repository text, p_run text, p_seq integer, p_attempt integer, p_outcome jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_complete without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_complete(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer, p_outcome jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_events_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
  begin
    raise exception 'tron_events is append-only' using errcode = 'TRN01';
  end $$;
CREATE FUNCTION public.tron_events_fenced() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
  declare held bigint;
  begin
    -- FOR SHARE: a takeover's update of the lease waits for this append's commit, and an append after it sees the new generation.
    select generation into held from tron_lease
      where repository = new.repository and expires_at > now() for share;
    if held is null or held <> new.generation then
      raise exception 'append to % refused: generation % does not hold the lease (held by %)',
        new.repository, new.generation, coalesce(held::text, 'nobody: it lapsed')
        using errcode = 'TRN01';
    end if;
    return new;
  end $$;
CREATE FUNCTION public.tron_heartbeat(p_worker text, p_token text, p_locks text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    perform tron_caller(p_worker, p_token);
    update tron_agents set seen_at = now(), locks = coalesce(p_locks, '{}') where worker = p_worker;
  end $$;
CREATE FUNCTION public.tron_heartbeat(p_worker text, p_host text, p_roles text[], p_slots integer, p_locks text[]) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_heartbeat without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_jobs_enqueue() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
CREATE FUNCTION public.tron_lost(p_repository text[], p_run text[], p_seq integer[], p_attempt integer[]) RETURNS TABLE(repository text, run text, seq integer, attempt integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_lost without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_lost(p_worker text, p_token text, p_repository text[], p_run text[], p_seq integer[], p_attempt integer[]) RETURNS TABLE(repository text, run text, seq integer, attempt integer)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    perform tron_caller(p_worker, p_token);
    return query select u.r, u.n, u.s, u.a from unnest(p_repository, p_run, p_seq, p_attempt) as u(r, n, s, a)
     where not exists (select 1 from tron_jobs j where j.repository = u.r and j.run = u.n and j.seq = u.s
                         and j.attempt = u.a and j.state = 'running' and j.worker = p_worker);
  end $$;
CREATE FUNCTION public.tron_may(p_repository text, p_role text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    select pg_has_role(session_user, current_user, 'member')
        or exists (select 1 from tron_agent_access a join pg_roles r on r.rolname = a.db_role
                    where pg_has_role(session_user, r.oid, 'member') and a.repository in (p_repository, '*')
                      and (p_role = any(a.roles) or '*' = any(a.roles)));
  $$;
CREATE FUNCTION public.tron_near_elsewhere(p_worker text, p_lapse interval) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_near_elsewhere without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_near_elsewhere(p_worker text, p_token text) RETURNS text[]
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  declare me tron_agents := tron_caller(p_worker, p_token);
  begin
    return (select coalesce(array_agg('near:' || r.role || ':' || a.worker), '{}') from tron_agents a, unnest(a.roles) as r(role)
     where a.worker <> p_worker and a.repository = me.repository and not a.own and a.seen_at >= now() - a.lapse
       and (select count(*) from tron_jobs j where j.worker = a.worker and j.state = 'running') < a.slots);
  end $$;
CREATE FUNCTION public.tron_note(p_repository text, p_run text, p_seq integer, p_attempt integer, p_body jsonb) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_note without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_note(p_worker text, p_token text, p_repository text, p_run text, p_seq integer, p_attempt integer, p_body jsonb) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_queue_version() RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
    select max(version) from tron_schema;
  $$;
CREATE FUNCTION public.tron_reap(p_lapse interval) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    raise exception 'tron_reap without a worker''s token refused: this tron is older than the queue''s schema (version 6), which scopes every job to its repository, role and registered pool'
      using errcode = 'TRN03', hint = 'upgrade tron on this host to the version the engine runs';
  end $$;
CREATE FUNCTION public.tron_reap(p_worker text, p_token text) RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  begin
    perform tron_caller(p_worker, p_token);
    return tron_reap_lapsed();
  end $$;
CREATE FUNCTION public.tron_reap_lapsed() RETURNS text[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
  declare dead text[];
  begin
    with gone as (delete from tron_agents where seen_at < now() - lapse returning locks)
      select coalesce(array_agg(l), '{}') into dead from gone, unnest(gone.locks) as l;
    if cardinality(dead) > 0 then
      perform graphile_worker.force_unlock_workers(dead);
    end if;
    return dead;
  end $$;
CREATE FUNCTION public.tron_register(p_worker text, p_host text, p_repository text, p_roles text[], p_slots integer, p_lapse interval, p_own boolean) RETURNS TABLE(token text, tasks text[])
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'public', 'pg_temp'
    AS $$
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
CREATE FUNCTION public.tron_task(p_repository text, p_role text, p_pool text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'public', 'pg_temp'
    AS $$
    select case when p_pool is null then 'tron/' || p_role || '/' || md5(p_repository) else 'tron/pool/' || md5(p_pool) end;
  $$;
CREATE TABLE public.tron_agent_access (
    db_role text NOT NULL,
    repository text NOT NULL,
    roles text[] NOT NULL
);
CREATE TABLE public.tron_events (
    repository text NOT NULL,
    run text NOT NULL,
    seq integer NOT NULL,
    generation bigint NOT NULL,
    line text NOT NULL,
    written_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tron_events_seq_check CHECK ((seq > 0))
);
CREATE TABLE public.tron_job_asks (
    id bigint NOT NULL,
    repository text NOT NULL,
    run text NOT NULL,
    seq integer NOT NULL,
    attempt integer,
    kind text NOT NULL,
    body jsonb DEFAULT '{}'::jsonb NOT NULL,
    answer jsonb,
    asked_at timestamp with time zone DEFAULT now() NOT NULL,
    answered_at timestamp with time zone,
    CONSTRAINT tron_job_asks_kind_check CHECK ((kind = ANY (ARRAY['stop'::text, 'probe'::text])))
);
CREATE SEQUENCE public.tron_job_asks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.tron_job_asks_id_seq OWNED BY public.tron_job_asks.id;
CREATE TABLE public.tron_job_notes (
    id bigint NOT NULL,
    repository text NOT NULL,
    run text NOT NULL,
    seq integer NOT NULL,
    attempt integer NOT NULL,
    body jsonb NOT NULL,
    noted_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tron_job_notes_kind CHECK (COALESCE((((body ->> 'kind'::text) = ANY (ARRAY['started'::text, 'spawned'::text, 'exited'::text])) OR (((body ->> 'kind'::text) = 'output'::text) AND (jsonb_typeof((body -> 'offset'::text)) = 'number'::text) AND (jsonb_typeof((body -> 'text'::text)) = 'string'::text) AND (length((body ->> 'text'::text)) <= 32768))), false))
);
CREATE SEQUENCE public.tron_job_notes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE public.tron_job_notes_id_seq OWNED BY public.tron_job_notes.id;
CREATE TABLE public.tron_jobs (
    repository text NOT NULL,
    run text NOT NULL,
    seq integer NOT NULL,
    generation bigint NOT NULL,
    kind text NOT NULL,
    role text NOT NULL,
    request jsonb NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    worker text,
    claimed_at timestamp with time zone,
    state text DEFAULT 'queued'::text NOT NULL,
    outcome jsonb,
    done_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    pool text,
    max_attempts integer DEFAULT 25 NOT NULL,
    CONSTRAINT tron_jobs_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT tron_jobs_state_check CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'dropped'::text])))
);
CREATE TABLE public.tron_keys (
    repository text NOT NULL,
    generation bigint NOT NULL,
    key text NOT NULL,
    written_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.tron_lease (
    repository text NOT NULL,
    generation bigint NOT NULL,
    holder text NOT NULL,
    expires_at timestamp with time zone NOT NULL
);
CREATE TABLE public.tron_repositories (
    repository text NOT NULL,
    remote text NOT NULL,
    written_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.tron_run_files (
    repository text NOT NULL,
    run text NOT NULL,
    name text NOT NULL,
    generation bigint NOT NULL,
    body text NOT NULL,
    written_at timestamp with time zone DEFAULT now() NOT NULL
);
CREATE TABLE public.tron_schema (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);
ALTER TABLE ONLY public.tron_job_asks ALTER COLUMN id SET DEFAULT nextval('public.tron_job_asks_id_seq'::regclass);
ALTER TABLE ONLY public.tron_job_notes ALTER COLUMN id SET DEFAULT nextval('public.tron_job_notes_id_seq'::regclass);
ALTER TABLE ONLY public.tron_agent_access
    ADD CONSTRAINT tron_agent_access_pkey PRIMARY KEY (db_role, repository);
ALTER TABLE ONLY public.tron_agents
    ADD CONSTRAINT tron_agents_pkey PRIMARY KEY (worker);
ALTER TABLE ONLY public.tron_events
    ADD CONSTRAINT tron_events_pkey PRIMARY KEY (repository, run, seq);
ALTER TABLE ONLY public.tron_job_asks
    ADD CONSTRAINT tron_job_asks_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.tron_job_notes
    ADD CONSTRAINT tron_job_notes_pkey PRIMARY KEY (id);
ALTER TABLE ONLY public.tron_jobs
    ADD CONSTRAINT tron_jobs_pkey PRIMARY KEY (repository, run, seq);
ALTER TABLE ONLY public.tron_keys
    ADD CONSTRAINT tron_keys_pkey PRIMARY KEY (repository);
ALTER TABLE ONLY public.tron_lease
    ADD CONSTRAINT tron_lease_pkey PRIMARY KEY (repository);
ALTER TABLE ONLY public.tron_repositories
    ADD CONSTRAINT tron_repositories_pkey PRIMARY KEY (repository);
ALTER TABLE ONLY public.tron_repositories
    ADD CONSTRAINT tron_repositories_remote_key UNIQUE (remote);
ALTER TABLE ONLY public.tron_run_files
    ADD CONSTRAINT tron_run_files_pkey PRIMARY KEY (repository, run, name);
ALTER TABLE ONLY public.tron_schema
    ADD CONSTRAINT tron_schema_pkey PRIMARY KEY (version);
CREATE INDEX tron_job_asks_job ON public.tron_job_asks USING btree (repository, run, seq);
CREATE INDEX tron_job_notes_job ON public.tron_job_notes USING btree (repository, run, seq);
CREATE INDEX tron_jobs_running ON public.tron_jobs USING btree (worker) WHERE (state = 'running'::text);
CREATE TRIGGER tron_events_append_only BEFORE DELETE OR UPDATE ON public.tron_events FOR EACH ROW EXECUTE FUNCTION public.tron_events_append_only();
CREATE TRIGGER tron_events_fenced BEFORE INSERT ON public.tron_events FOR EACH ROW EXECUTE FUNCTION public.tron_events_fenced();
CREATE TRIGGER tron_jobs_enqueue AFTER INSERT ON public.tron_jobs FOR EACH ROW EXECUTE FUNCTION public.tron_jobs_enqueue();
CREATE TRIGGER tron_jobs_fenced BEFORE INSERT ON public.tron_jobs FOR EACH ROW EXECUTE FUNCTION public.tron_events_fenced();
CREATE TRIGGER tron_keys_append_only BEFORE DELETE OR UPDATE ON public.tron_keys FOR EACH ROW EXECUTE FUNCTION public.tron_events_append_only();
CREATE TRIGGER tron_keys_fenced BEFORE INSERT ON public.tron_keys FOR EACH ROW EXECUTE FUNCTION public.tron_events_fenced();
CREATE TRIGGER tron_run_files_append_only BEFORE DELETE OR UPDATE ON public.tron_run_files FOR EACH ROW EXECUTE FUNCTION public.tron_events_append_only();
CREATE TRIGGER tron_run_files_fenced BEFORE INSERT ON public.tron_run_files FOR EACH ROW EXECUTE FUNCTION public.tron_events_fenced();
