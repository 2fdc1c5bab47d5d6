/**
 * Version 12: **one series.** Until this version the queue kept a series of its own
 * (`tron_queue_schema`, versions 1–7), beside the log's (`tron_schema`, 1–4). The runner
 * (engine/schema/migrate.ts) takes those rows into `tron_schema` as versions 5–11, in the
 * same transaction, before this version runs; this one removes the old table and makes the
 * version an agent reads (`tron_queue_version`, granted to the agents' roles) the one
 * series' own. An agent of an older tron then finds a version newer than it knows, and
 * refuses the queue until its host is upgraded.
 */
export default `
  create or replace function tron_queue_version() returns integer
  language sql stable security definer set search_path = public, pg_temp as $$
    select max(version) from tron_schema;
  $$;
  drop table if exists tron_queue_schema;
`;
