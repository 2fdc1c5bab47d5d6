/**
 * Version 2: a run's fixed files (the spine that drove it, its manifest), so `replay` and
 * `view` read a run from any host (engine/log/pg-run-files.ts). Fenced and append-only as
 * the log is.
 */
export default `
  create table tron_run_files (
    repository text not null,
    run text not null,
    name text not null,
    generation bigint not null,
    body text not null,
    written_at timestamptz not null default now(),
    primary key (repository, run, name)
  );
  create trigger tron_run_files_fenced before insert on tron_run_files
    for each row execute function tron_events_fenced();
  create trigger tron_run_files_append_only before update or delete on tron_run_files
    for each row execute function tron_events_append_only();
  `;
