/**
 * Version 7 (the queue's 3): **a block's jobs go near its work.** A block's gate test run,
 * its challenge, its review and its next builder turn are flagged `near:<role>:<agent>`,
 * the agent whose builder turn of the block ended last: that clone holds the block's sha
 * and its worktree, so it fetches nothing and checks out little. Every other agent leaves
 * such a job alone while that agent is alive, holds the job's role and has a free slot
 * (`tron_near_elsewhere`, graphile-worker's forbidden flags), and takes it otherwise — so
 * a preference, never a wait on a busy or dead agent. Which agent runs a job changes
 * nothing the engine decides. The grant at the end gives the new function to the agents'
 * roles made before it.
 */
export default `
  create index tron_jobs_running on tron_jobs (worker) where state = 'running';

  create or replace function tron_jobs_enqueue() returns trigger language plpgsql as $$
  declare
    near text;
    blk text := coalesce(new.request -> 'decision' ->> 'block',
                         case when new.request ->> 'session' = 'tests:gate' then new.request ->> 'block' end);
  begin
    if blk is not null then
      select t.worker into near from tron_jobs t
       where t.repository = new.repository and t.run = new.run and t.role = 'builder' and t.state = 'done'
         and t.request -> 'decision' ->> 'block' = blk
       order by t.seq desc limit 1;
    end if;
    perform graphile_worker.add_job('tron_' || new.role,
      json_build_object('repository', new.repository, 'run', new.run, 'seq', new.seq),
      max_attempts => 25, job_key => new.repository || '/' || new.run || '/' || new.seq, job_key_mode => 'unsafe_dedupe',
      flags => case when near is null then null else array['near:' || new.role || ':' || near] end);
    return new;
  end $$;

  -- The flags agent p_worker leaves alone: near:<role>:<agent> of each role of each other agent
  -- seen within p_lapse that has a free slot (an agent without the job's role is never waited for).
  create function tron_near_elsewhere(p_worker text, p_lapse interval) returns text[]
  language sql stable security definer set search_path = public, pg_temp as $$
    select coalesce(array_agg('near:' || r.role || ':' || a.worker), '{}') from tron_agents a, unnest(a.roles) as r(role)
     where a.worker <> p_worker and a.seen_at >= now() - p_lapse
       and (select count(*) from tron_jobs j where j.worker = a.worker and j.state = 'running') < a.slots;
  $$;
  revoke execute on function tron_near_elsewhere(text, interval) from public;
  -- The agents' roles granted before this version (agentGrants) may ask it too.
  do $$ declare r text; begin
    for r in select distinct grantee from information_schema.routine_privileges
              where routine_name = 'tron_claim' and privilege_type = 'EXECUTE' and grantee <> current_user loop
      execute format('grant execute on function tron_near_elsewhere(text, interval) to %I', r);
    end loop;
  end $$;
`;
