/**
 * `tron start` with a database (`[cluster] database` or `TRON_DATABASE_URL`): connect and
 * migrate, take the repository's lease (or, `--standby`, wait for it), and before
 * recovery bring the latest run of the table into its run directory, so that today's
 * recovery — which reads `.tron/runs/<run>/events.jsonl` — resumes what any host's engine
 * wrote. The lines are the table's, signed as ever: recovery checks their chain.
 */
import { POSTGRES_URL, POSTGRES_URL_FORM } from '../core/database-url.ts';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import type { ClusterConfig } from '../project/config.ts';
import { acquireLease, awaitLease, type Lease } from './lease.ts';
import { type Clock, sleep, systemClock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { isCoded } from '../core/problems.ts';
import type { TronEvent } from '../core/events.ts';
import { readRunFiles, saveRunFiles } from './pg-run-files.ts';
import { isConnectionLoss } from './db-lost.ts';
import {
  checkedRunKey,
  DatabaseLostError,
  DatabaseUnreachableError,
  LeaseLostError,
  type Database,
  latestPgRun,
  openDatabase,
  PgEventLog,
  readPgRun,
  redact,
  runLines,
} from './pg-log.ts';

/** The database a repository's engine uses: `TRON_DATABASE_URL` first, then `[cluster] database`; none: the file log. */
export function databaseUrl(cluster: ClusterConfig | undefined, env: Readonly<Record<string, string | undefined>>): string | undefined {
  const url = env.TRON_DATABASE_URL?.trim();
  if (url && !POSTGRES_URL.test(url))
    throw new InputError([
      { code: 'TRON_USAGE', path: 'TRON_DATABASE_URL', message: `${POSTGRES_URL_FORM} (or unset, for [cluster] database)` },
    ]);
  return url ? url : cluster?.database;
}

/**
 * The name the hosts of a repository share in the database: `[cluster] repository` when
 * given; else what every clone shares without configuration, the remote's URL normalized
 * (`remoteIdentity`: `git@host:team/app.git` and `https://host/team/app` are one); else,
 * in a repository without a remote, its folder's name. `remote`: the remote to read
 * (`[remote] name`), by default `origin` or the repository's only remote.
 */
export function repositoryName(repo: string, cluster: ClusterConfig | undefined, remote?: string): string {
  return cluster?.repository ?? remoteIdentity(repo, remote) ?? basename(repo);
}

/** The normalized URL of the repository's remote (`remote`, else `origin`, else its only one); undefined without one. */
export function remoteIdentity(repo: string, remote?: string): string | undefined {
  const url = remoteUrl(repo, remote);
  return url === undefined ? undefined : normalizeRemoteUrl(url, repo);
}

function remoteUrl(repo: string, remote?: string): string | undefined {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  for (const name of remote ? [remote] : ['origin']) {
    const url = git('config', '--get', `remote.${name}.url`);
    if (url) return url;
  }
  if (remote) return undefined;
  const names = git('remote').split('\n').filter(Boolean);
  return names.length === 1 ? git('config', '--get', `remote.${names[0]}.url`) || undefined : undefined;
}

/**
 * One spelling of a remote's URL for every clone: credentials and the user dropped, the
 * scheme dropped (ssh, https and git reach the same repository), the host lowercased and
 * its default port dropped, a trailing `.git` and `/` dropped; `git@host:path` and
 * `ssh://git@host/path` are equal. A local path (or `file://`) is made absolute.
 * `forge.internal/team/myapp`, `/srv/git/myapp`.
 */
export function normalizeRemoteUrl(url: string, repo = '.'): string {
  const trim = (path: string) =>
    path
      .replace(/\/+$/, '')
      .replace(/\.git$/, '')
      .replace(/\/+$/, '');
  const text = url.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text);
  if (scheme) {
    if (scheme[1]!.toLowerCase() === 'file')
      return trim(resolvePath(decodeURIComponent(text.slice(scheme[0].length).replace(/^[^/]*/, ''))));
    try {
      const u = new URL(text);
      const port = u.port && !DEFAULT_PORTS.has(u.port) ? `:${u.port}` : '';
      return `${u.hostname.toLowerCase()}${port}/${trim(decodeURIComponent(u.pathname).replace(/^\/+/, ''))}`;
    } catch {
      return trim(text);
    }
  }
  // scp-like: [user@]host:path (a colon before any slash).
  const scp = /^(?:[^@/]+@)?([^:/]+):(.*)$/.exec(text);
  if (scp) return `${scp[1]!.toLowerCase()}/${trim(scp[2]!.replace(/^\/+/, ''))}`;
  return trim(resolvePath(repo, text));
}

const DEFAULT_PORTS = new Set(['22', '80', '443', '9418']);

/** A started engine's hold on the database: the connection and the lease. */
export interface Seat {
  db: Database;
  lease: Lease;
  /** Opens the run's log in the table (the engine attaches its clock); copied to `mirror` when it closes. */
  openLog(run: string, key: Buffer, mirror?: string): Promise<PgEventLog>;
  /** Gives the lease up and disconnects (idempotent; the log's close does the same). */
  leave(): Promise<void>;
  /**
   * Told once when the engine can no longer write: its connection broke (TRON_DB_LOST) or
   * a renewal found its lease gone (TRON_LEASE_LOST). The engine stops then, rather than
   * wait for results that can no longer be recorded.
   */
  onLost(listener: (err: Error) => void): void;
}

/**
 * Connects, migrates and takes the lease: at once (TRON_LEASE_HELD when another engine
 * holds it), or with `standby` once the leader's lease lapses. Undefined when the standby
 * was stopped while it waited. A waiting standby rides the database's restarts and dropped
 * connections: it says so once, reconnects with backoff, and waits on.
 *
 * Before the lease, the repository's name is checked against the remote it stands for
 * (`tron_repositories`): one remote is led under one name (TRON_REPOSITORY_CONFLICT), and
 * a name derived from the remote does not silently leave behind the runs an older tron
 * wrote under the folder's name (TRON_REPOSITORY_RENAMED).
 */
export async function takeSeat(o: {
  url: string;
  repository: string;
  /** The remote's normalized URL (remoteIdentity), when the repository has a remote. */
  remote?: string;
  /** The folder's name, when `repository` was derived (no `[cluster] repository`): the name an older tron used. */
  folder?: string;
  leaseMs: number;
  standby?: boolean;
  stop?: AbortSignal;
  print: (line: string) => void;
  /** Times the lease's renewals, a standby's tries and the reconnections' backoff. */
  clock?: Clock;
}): Promise<Seat | undefined> {
  let db = await openDatabase(o.url);
  const listeners: Array<(err: Error) => void> = [];
  let left = false;
  let lost: Error | undefined;
  const lose = (err: Error) => {
    if (left || lost) return;
    lost = err;
    for (const l of listeners) l(err);
  };
  try {
    const opts = {
      repository: o.repository,
      periodMs: o.leaseMs,
      onLost: () => lose(new LeaseLostError(o.repository, 'a renewal found it taken over or lapsed')),
      ...(o.clock ? { clock: o.clock } : {}),
    };
    let waited = false;
    let lease: Lease | undefined;
    for (;;) {
      try {
        await checkName(db, o);
        lease = o.standby
          ? await awaitLease(db, {
              ...opts,
              ...(o.stop ? { stop: o.stop } : {}),
              waiting: (holder) => {
                if (!waited) o.print(`tron: standby — ${holder} leads ${o.repository}; taking over when its lease lapses`);
                waited = true;
              },
            })
          : await acquireLease(db, opts);
        break;
      } catch (err) {
        if (!o.standby || !isConnectionLost(err) || err instanceof InputError) throw err;
        await db.end();
        const again = await reconnect(o.url, (err as Error).message, o.print, o.stop, o.clock);
        if (!again) break;
        db = again;
      }
    }
    if (!lease) {
      left = true;
      await db.end();
      return undefined;
    }
    const seated = db;
    // Once it leads, a broken connection ends the run (docs/cluster.md: the leader stops on TRON_DB_LOST).
    seated.client.on('error', (err: Error) => lose(new DatabaseLostError(o.url, err.message)));
    seated.client.on('end', () => lose(new DatabaseLostError(o.url, 'the connection ended')));
    return {
      db: seated,
      lease,
      openLog: async (run, key, mirror) => {
        const log = await PgEventLog.open(seated, lease, run, key, mirror === undefined ? {} : { mirror });
        // The run directory's fixed files (written before the log opens) go with it: replay and view read them from any host.
        if (mirror !== undefined) await saveRunFiles(seated, lease, run, dirname(mirror));
        return log;
      },
      leave: async () => {
        if (left) return;
        left = true;
        await lease.release();
        await seated.end();
      },
      onLost: (listener) => {
        if (lost) listener(lost);
        else listeners.push(listener);
      },
    };
  } catch (err) {
    left = true;
    await db.end();
    // The database went while this start looked for its seat (a restart under it): said as the database out of reach, never as tron's failure.
    if (isConnectionLoss(err) && !isCoded(String((err as Error).message)))
      throw new DatabaseUnreachableError(o.url, (err as Error).message);
    throw err;
  }
}

/**
 * What a start holding the lease that fails is told as: the database's connection lost
 * (a restart just after a standby took over, before its run opened) is TRON_DB_LOST, and a
 * lease lost meanwhile TRON_LEASE_LOST — the documented stops of a leader (docs/cluster.md)
 * — never TRON_ENGINE_FAILED; an error with a code of its own stays as it is.
 */
export function seatFailure(seat: Seat, url: string, err: unknown): unknown {
  if (isCoded(String((err as Error | undefined)?.message ?? ''))) return err;
  let lost: Error | undefined;
  seat.onLost((e) => {
    lost = e;
  });
  if (lost) return lost;
  return isConnectionLoss(err) ? new DatabaseLostError(url, String((err as Error).message ?? err)) : err;
}

/**
 * Whether `err` is the connection going (the server restarted or shut down, the network
 * dropped, a backend terminated), not a refusal of what was asked: an error without a
 * SQLSTATE, or of class 08 (connection exception) or 57P (operator intervention).
 */
export function isConnectionLost(err: unknown): boolean {
  if (err instanceof DatabaseUnreachableError) return true;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return err instanceof Error;
  return /^(08|57P0)/.test(code) || /^E[A-Z]+$/.test(code);
}

/**
 * Connects again after `reason` broke the connection: said once, then tried with backoff
 * (a quarter second, doubling to five) until the database answers or `stop` is aborted
 * (undefined). A database that answers and refuses (its URL, its schema) is thrown.
 */
export async function reconnect(
  url: string,
  reason: string,
  print: (line: string) => void,
  stop?: AbortSignal,
  clock: Clock = systemClock,
): Promise<Database | undefined> {
  print(`tron: the database at ${redact(url)} went away (${reason}); reconnecting`);
  for (let waitMs = 250; ; waitMs = Math.min(5000, waitMs * 2)) {
    // The waiting standby's process has nothing else to wait on: the backoff keeps it alive.
    await sleep(clock, waitMs, { keepAlive: true, ...(stop ? { signal: stop } : {}) });
    if (stop?.aborted) return undefined;
    try {
      const db = await openDatabase(url);
      print(`tron: the database at ${redact(url)} is back`);
      return db;
    } catch (err) {
      if (!isConnectionLost(err)) throw err;
    }
  }
}

/** The name's check against the remote (see takeSeat); the remote recorded at its first start. */
async function checkName(db: Database, o: { url: string; repository: string; remote?: string; folder?: string }): Promise<void> {
  if (o.folder !== undefined && o.folder !== o.repository) {
    const { rows } = await db.client.query<{ repository: string }>(
      `select repository from tron_lease where repository = any($1::text[])
       union select repository from tron_events where repository = any($1::text[]) and seq = 1`,
      [[o.repository, o.folder]],
    );
    const names = new Set(rows.map((r) => r.repository));
    const known = await db.client.query('select 1 from tron_repositories where repository = $1', [o.folder]);
    if (names.has(o.folder) && !names.has(o.repository) && known.rows.length === 0)
      throw new InputError([
        {
          code: 'TRON_REPOSITORY_RENAMED',
          path: '[cluster] repository',
          message: `the database holds runs of "${o.folder}" (this clone's folder, the name an older tron gave a repository) and none of "${o.repository}" (the name derived from its remote): set [cluster] repository = "${o.folder}" in .tron/config.toml to go on with them — or, if they are another repository's, [cluster] repository = "${o.repository}"`,
        },
      ]);
  }
  if (o.remote === undefined) return;
  await db.client.query('insert into tron_repositories (repository, remote) values ($1, $2) on conflict do nothing', [
    o.repository,
    o.remote,
  ]);
  const { rows } = await db.client.query<{ repository: string; remote: string }>(
    'select repository, remote from tron_repositories where repository = $1 or remote = $2',
    [o.repository, o.remote],
  );
  const other = rows.find((r) => r.repository !== o.repository || r.remote !== o.remote);
  if (!other) return;
  throw new InputError([
    {
      code: 'TRON_REPOSITORY_CONFLICT',
      path: '[cluster] repository',
      message:
        other.remote === o.remote
          ? `this repository's remote ${o.remote} is led in this database as "${other.repository}", not "${o.repository}": set [cluster] repository = "${other.repository}" in .tron/config.toml (or remove the setting where it differs), so every host leads it under one name`
          : `the name "${o.repository}" stands in this database for the remote ${other.remote}, not this repository's ${o.remote}: give this repository a name of its own ([cluster] repository), or remove the setting to use the one derived from its remote`,
    },
  ]);
}

/**
 * Writes the latest run of the table into `runsDir/<run>/events.jsonl` (replaced whole,
 * atomically, when the table holds more than the file): recovery reads it there.
 * Returns the run id, if the table has one.
 */
export async function bringLatestRun(seat: Seat, runsDir: string): Promise<string | undefined> {
  const at = await latestPgRun(seat.db, seat.lease.repository);
  if (!at) return undefined;
  const lines = await runLines(seat.db, at);
  const text = lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  const dir = join(runsDir, at.run);
  const file = join(dir, 'events.jsonl');
  mkdirSync(dir, { recursive: true });
  // The run's spine and manifest too, where this host lacks them (a standby on another host): replay reads them there.
  for (const [name, body] of Object.entries(await readRunFiles(seat.db, at)))
    if (!existsSync(join(dir, name))) writeFileSync(join(dir, name), body);
  if (existsSync(file) && readFileSync(file, 'utf8') === text) return at.run;
  writeFileSync(`${file}.from-database`, text);
  renameSync(`${file}.from-database`, file);
  return at.run;
}

/**
 * A run read from the database alone (`--database` of status and report): the run with
 * id `run` (the one written last, should two repositories have one of that id), or the
 * run written last; its lines read as a file's, unchecked (this host may hold no key).
 * Throws TRON_NO_RUN / TRON_RUN_NOT_FOUND as the file commands do.
 */
export async function readDatabaseRun(
  url: string,
  run?: string,
): Promise<{ at: { repository: string; run: string }; events: TronEvent[] }> {
  const db = await openDatabase(url);
  try {
    const found =
      run === undefined
        ? await latestPgRun(db)
        : (
            await db.client.query<{ repository: string; run: string }>(
              'select repository, run from tron_events where run = $1 and seq = 1 order by written_at desc limit 1',
              [run],
            )
          ).rows[0];
    if (!found) {
      throw new InputError([
        run === undefined
          ? { code: 'TRON_NO_RUN', path: redact(url), message: 'the database holds no run yet; start one with `tron start`' }
          : {
              code: 'TRON_RUN_NOT_FOUND',
              path: `${redact(url)}: ${run}`,
              message: `the database holds no run ${run}; \`tron status --database\` names the latest`,
            },
      ]);
    }
    return { at: checkedRunKey(found, url), events: (await readPgRun(db, found, undefined)).events };
  } finally {
    await db.end();
  }
}
