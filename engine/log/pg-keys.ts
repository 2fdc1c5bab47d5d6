/**
 * The repository's key in the database (`tron_keys`, the log's schema version 3). Every
 * line of a run is signed with the key of the repository (keys.ts), and recovery believes
 * only the lines that follow its chain. An engine that leads from a clone of its own — a
 * standby on another host — held a key of its own until now, so it found every line its
 * predecessor wrote foreign, set the whole run aside and built every block again.
 *
 * Now the first engine that leads a repository from a database puts its key there, and an
 * engine of that repository in any other clone takes it from there before it reads a line:
 * each host keeps it where keys.ts keeps keys. The row is written by the lease's holder only
 * (the log's fencing trigger) and never changed (its append-only trigger); only the
 * engine's role reads it — the readers' and the agents' roles are granted no access
 * (docs/cluster.md, "Roles"), so no worker, agent or reader host learns it.
 *
 * A clone whose logs are signed with a key of its own is never made to forget it: its
 * start is refused (TRON_KEY_CONFLICT) rather than leave those logs unreadable. Runs an
 * older tron wrote to the database, signed with a key the database does not hold, are
 * refused the same way (TRON_KEY_UNKNOWN) until their host's engine has started once.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { InputError } from '../core/errors.ts';
import { readLog } from './eventlog.ts';
import { adoptKey, keyPath, type RepoKey, repoKey } from './keys.ts';
import type { Lease } from './lease.ts';
import { type Database, fencedWrite, latestPgRun, readPgRun } from './pg-log.ts';

/** The key the engine of `repo` signs and checks its lines with: the database's, which this clone takes when it may. */
export async function sharedKey(db: Database, lease: Lease, repo: string): Promise<RepoKey> {
  const local = repoKey(repo, { create: true });
  let held = await keyIn(db, lease.repository);
  if (held === undefined) {
    // The first start of this version: the runs already in the table must be this key's, or nobody can check them.
    const latest = await latestPgRun(db, lease.repository);
    const read = latest ? await readPgRun(db, latest, local.key) : undefined;
    if (latest && read?.signed && read.events.length === 0)
      throw new InputError([
        {
          code: 'TRON_KEY_UNKNOWN',
          path: `[cluster] repository "${lease.repository}"`,
          message: `the database's runs of this repository (the latest: ${latest.run}) were signed with a key this host does not hold, and the database holds none: start the engine once, with this version of tron, on the host whose clone wrote them; it puts its key in the database`,
        },
      ]);
    await fencedWrite(
      lease.repository,
      lease.generation,
      db.client.query('insert into tron_keys (repository, generation, key) values ($1, $2, $3) on conflict (repository) do nothing', [
        lease.repository,
        lease.generation,
        local.key.toString('hex'),
      ]),
    );
    held = (await keyIn(db, lease.repository))!;
  }
  if (held.equals(local.key)) return local;
  const own = ownRuns(repo, local.key);
  if (own.length > 0)
    throw new InputError([
      {
        code: 'TRON_KEY_CONFLICT',
        path: keyPath(repo),
        message: `this clone's runs (${own.slice(0, 3).join(', ')}${own.length > 3 ? ', …' : ''}) are signed with its own key, and the database's runs of "${lease.repository}" with another: start this engine in a clone that has no run of its own yet (it takes the database's key)`,
      },
    ]);
  adoptKey(repo, held);
  return { key: held, created: false };
}

/** The repository's key in the table, if it has one. */
async function keyIn(db: Database, repository: string): Promise<Buffer | undefined> {
  const { rows } = await db.client.query<{ key: string }>('select key from tron_keys where repository = $1', [repository]);
  return rows[0] ? Buffer.from(rows[0].key, 'hex') : undefined;
}

/** The runs of this clone whose log is signed with `key`: what taking another key would leave unreadable. */
function ownRuns(repo: string, key: Buffer): string[] {
  const runs = join(repo, '.tron', 'runs');
  if (!existsSync(runs)) return [];
  return readdirSync(runs)
    .sort()
    .filter((id) => {
      try {
        const read = readLog(join(runs, id, 'events.jsonl'), { key });
        return read.signed && read.events.length > 0;
      } catch {
        return false;
      }
    });
}
