/**
 * Version 6 (the queue's 2): the engine's asks of a running job (stop, probe), their
 * answers, and an attempt's notes (engine/queue/pg-job-control.ts says what each is for).
 */
export default `
  create table tron_job_asks (
    id bigserial primary key,
    repository text not null,
    run text not null,
    seq integer not null,
    attempt integer,
    kind text not null check (kind in ('stop', 'probe')),
    body jsonb not null default '{}',
    answer jsonb,
    asked_at timestamptz not null default now(),
    answered_at timestamptz
  );
  create index tron_job_asks_job on tron_job_asks (repository, run, seq);

  create table tron_job_notes (
    id bigserial primary key,
    repository text not null,
    run text not null,
    seq integer not null,
    attempt integer not null,
    body jsonb not null,
    noted_at timestamptz not null default now()
  );
  create index tron_job_notes_job on tron_job_notes (repository, run, seq);

  create function tron_asks(p_worker text)
    returns table (repository text, run text, seq integer, attempt integer, id bigint, kind text, body jsonb)
  language sql security definer set search_path = public, pg_temp as $$
    select a.repository, a.run, a.seq, j.attempt, a.id, a.kind, a.body
      from tron_job_asks a join tron_jobs j on j.repository = a.repository and j.run = a.run and j.seq = a.seq
     where j.worker = p_worker and j.state = 'running' and a.answered_at is null
       and (a.attempt is null or a.attempt = j.attempt)
     order by a.id;
  $$;

  create function tron_answer(p_repository text, p_run text, p_seq integer, p_attempt integer, p_id bigint, p_answer jsonb)
    returns void
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    update tron_job_asks a set answer = p_answer, answered_at = now()
      where a.id = p_id and a.repository = p_repository and a.run = p_run and a.seq = p_seq and a.answered_at is null
        and exists (select 1 from tron_jobs j where j.repository = p_repository and j.run = p_run and j.seq = p_seq
                      and j.attempt = p_attempt and j.state = 'running')
        and (a.attempt is null or a.attempt = p_attempt);
    if not found then
      raise exception 'answer of attempt % to ask % refused: the attempt does not hold job %/%/%, or it was answered',
        p_attempt, p_id, p_repository, p_run, p_seq using errcode = 'TRN02';
    end if;
    perform pg_notify('tron_notes', p_repository || '/' || p_run);
  end $$;

  create function tron_note(p_repository text, p_run text, p_seq integer, p_attempt integer, p_body jsonb) returns boolean
  language plpgsql security definer set search_path = public, pg_temp as $$
  begin
    insert into tron_job_notes (repository, run, seq, attempt, body)
      select p_repository, p_run, p_seq, p_attempt, p_body from tron_jobs j
       where j.repository = p_repository and j.run = p_run and j.seq = p_seq and j.attempt = p_attempt and j.state = 'running';
    if not found then return false; end if;
    perform pg_notify('tron_notes', p_repository || '/' || p_run);
    return true;
  end $$;

  -- Of the attempts an agent runs, those that no longer hold their job (given to another, or finished for it).
  create function tron_lost(p_repository text[], p_run text[], p_seq integer[], p_attempt integer[])
    returns table (repository text, run text, seq integer, attempt integer)
  language sql security definer set search_path = public, pg_temp as $$
    select u.r, u.n, u.s, u.a from unnest(p_repository, p_run, p_seq, p_attempt) as u(r, n, s, a)
     where not exists (select 1 from tron_jobs j where j.repository = u.r and j.run = u.n and j.seq = u.s
                         and j.attempt = u.a and j.state = 'running');
  $$;

  revoke execute on function tron_asks(text), tron_answer(text, text, integer, integer, bigint, jsonb),
    tron_note(text, text, integer, integer, jsonb), tron_lost(text[], text[], integer[], integer[]) from public;
`;
