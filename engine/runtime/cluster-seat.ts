/**
 * A start's seat in the database (`[cluster] database`, docs/cluster.md): the repository's
 * name every clone derives alike, and its lease — at once, or with --standby once the
 * leader's lapses. None without a database (--standby then is a usage error).
 */
import { basename } from 'node:path';
import { InputError } from '../core/errors.ts';
import { databaseUrl, remoteIdentity, repositoryName, type Seat, takeSeat } from '../log/cluster.ts';
import type { Clock } from '../os/clock.ts';
import type { Config } from '../project/config.ts';
import { checkJobsConfig } from '../queue/job-queue.ts';

/** Takes the database's lease when there is a database; null when a standby was stopped while it waited. */
export async function clusterSeat(
  repo: string,
  config: Config,
  o: { env: Record<string, string | undefined>; standby?: boolean; stop?: AbortSignal; print: (line: string) => void; clock: Clock },
): Promise<Seat | undefined | null> {
  const url = databaseUrl(config.cluster, o.env);
  if (url) checkJobsConfig(config);
  if (!url) {
    if (o.standby)
      throw new InputError([
        {
          code: 'TRON_USAGE',
          path: '--standby',
          message: 'a standby waits on the lease in a database: set [cluster] database in .tron/config.toml or TRON_DATABASE_URL',
        },
      ]);
    return undefined;
  }
  // The name every clone derives alike (the remote's URL), unless [cluster] repository names it (engine/log/cluster.ts).
  const remote = remoteIdentity(repo, config.remote?.name);
  const seat = await takeSeat({
    url,
    repository: repositoryName(repo, config.cluster, config.remote?.name),
    ...(remote !== undefined ? { remote } : {}),
    ...(config.cluster?.repository === undefined ? { folder: basename(repo) } : {}),
    leaseMs: config.cluster?.leaseMs ?? 10_000,
    standby: Boolean(o.standby),
    ...(o.stop ? { stop: o.stop } : {}),
    print: o.print,
    clock: o.clock,
  });
  return seat ?? null;
}
