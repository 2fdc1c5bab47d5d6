/**
 * Version 3: the repository's key, so an engine in a clone of its own (a standby on
 * another host) signs and checks the same lines (engine/log/pg-keys.ts).
 */
export default `
  create table tron_keys (
    repository text primary key,
    generation bigint not null,
    key text not null,
    written_at timestamptz not null default now()
  );
  create trigger tron_keys_fenced before insert on tron_keys
    for each row execute function tron_events_fenced();
  create trigger tron_keys_append_only before update or delete on tron_keys
    for each row execute function tron_events_append_only();
  `;
