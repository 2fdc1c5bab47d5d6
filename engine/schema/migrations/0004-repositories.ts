/**
 * Version 4: each repository's remote, normalized (engine/log/cluster.ts
 * `remoteIdentity`): one remote led under two names is refused.
 */
export default `
  create table tron_repositories (
    repository text primary key,
    remote text not null unique,
    written_at timestamptz not null default now()
  );
  `;
