/**
 * Version 8 (the queue's 4): the queue's version, for an agent to read at start (its
 * role reads no table of tron's): an agent of an older tron refuses a newer queue, as an
 * engine does. Version 12 makes it read the one series.
 */
export default `
  create function tron_queue_version() returns integer
  language sql stable security definer set search_path = public, pg_temp as $$
    select max(version) from tron_queue_schema;
  $$;
  revoke execute on function tron_queue_version() from public;
  do $$ declare r text; begin
    for r in select distinct grantee from information_schema.routine_privileges
              where routine_name = 'tron_claim' and privilege_type = 'EXECUTE' and grantee <> current_user loop
      execute format('grant execute on function tron_queue_version() to %I', r);
    end loop;
  end $$;
`;
