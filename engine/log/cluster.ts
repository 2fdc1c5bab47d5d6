/**
 * `tron start` with a database (`[cluster] database` or `TRON_DATABASE_URL`): connect and
 * migrate, take the repository's lease (or, `--standby`, wait for it), and before
 * recovery bring the latest run of the table into its run directory, so that today's
 * recovery — which reads `.tron/runs/<run>/events.jsonl` — resumes what any host's engine
 * wrote. The lines are the table's, signed as ever: recovery checks their chain.
 */
import { POSTGRES_URL, POSTGRES_URL_FORM } from '../core/database-url.ts';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { ClusterConfig } from '../project/config.ts';
import { acquireLease, awaitLease, type Lease } from './lease.ts';
import { InputError } from '../core/errors.ts';
import type { TronEvent } from '../core/events.ts';
import { readRunFiles, saveRunFiles } from './pg-run-files.ts';
import {
  checkedRunKey,
  DatabaseLostError,
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

/** The name the hosts of a repository share in the database. */
export function repositoryName(repo: string, cluster: ClusterConfig | undefined): string {
  return cluster?.repository ?? basename(repo);
}

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
 * was stopped while it waited.
 */
export async function takeSeat(o: {
  url: string;
  repository: string;
  leaseMs: number;
  standby?: boolean;
  stop?: AbortSignal;
  print: (line: string) => void;
}): Promise<Seat | undefined> {
  const db = await openDatabase(o.url);
  const listeners: Array<(err: Error) => void> = [];
  let left = false;
  let lost: Error | undefined;
  const lose = (err: Error) => {
    if (left || lost) return;
    lost = err;
    for (const l of listeners) l(err);
  };
  db.client.on('error', (err: Error) => lose(new DatabaseLostError(o.url, err.message)));
  db.client.on('end', () => lose(new DatabaseLostError(o.url, 'the connection ended')));
  try {
    const opts = {
      repository: o.repository,
      periodMs: o.leaseMs,
      onLost: () => lose(new LeaseLostError(o.repository, 'a renewal found it taken over or lapsed')),
    };
    const lease = o.standby
      ? await awaitLease(db, {
          ...opts,
          ...(o.stop ? { stop: o.stop } : {}),
          waiting: (holder) => o.print(`tron: standby — ${holder} leads ${o.repository}; taking over when its lease lapses`),
        })
      : await acquireLease(db, opts);
    if (!lease) {
      left = true;
      await db.end();
      return undefined;
    }
    return {
      db,
      lease,
      openLog: async (run, key, mirror) => {
        const log = await PgEventLog.open(db, lease, run, key, mirror === undefined ? {} : { mirror });
        // The run directory's fixed files (written before the log opens) go with it: replay and view read them from any host.
        if (mirror !== undefined) await saveRunFiles(db, lease, run, dirname(mirror));
        return log;
      },
      leave: async () => {
        if (left) return;
        left = true;
        await lease.release();
        await db.end();
      },
      onLost: (listener) => {
        if (lost) listener(lost);
        else listeners.push(listener);
      },
    };
  } catch (err) {
    left = true;
    await db.end();
    throw err;
  }
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
