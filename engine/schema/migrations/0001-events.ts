/**
 * Version 1: the lease and the log (engine/log/pg-log.ts). One engine a repository
 * holds the lease with a generation; every line of `tron_events` is appended by the
 * generation that holds it (the fencing trigger raises TRN01, pg-log.ts's FENCED,
 * otherwise), and no line is ever changed or removed.
 */
export default `
  create table tron_lease (
    repository text primary key,
    generation bigint not null,
    holder text not null,
    expires_at timestamptz not null
  );
  create table tron_events (
    repository text not null,
    run text not null,
    seq integer not null check (seq > 0),
    generation bigint not null,
    line text not null,
    written_at timestamptz not null default now(),
    primary key (repository, run, seq)
  );
  create function tron_events_fenced() returns trigger language plpgsql as $$
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
  create trigger tron_events_fenced before insert on tron_events
    for each row execute function tron_events_fenced();
  create function tron_events_append_only() returns trigger language plpgsql as $$
  begin
    raise exception 'tron_events is append-only' using errcode = 'TRN01';
  end $$;
  create trigger tron_events_append_only before update or delete on tron_events
    for each row execute function tron_events_append_only();
  `;
