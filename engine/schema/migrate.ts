/**
 * The one runner of tron's schema: brings a database up to the series of
 * engine/schema/series.ts, one transaction for all that is missing, under the one advisory
 * lock every schema change takes (`tron_schema`) — so any number of hosts starting at once,
 * on an empty or an older database, migrate once. The queue library's own schema
 * (graphile-worker's, which the job queue's versions build on) is brought up first, under
 * the same lock: its migrations create a schema, which is not safe to run twice at once.
 *
 * A database at this tron's version is only read (a reader's role, select only, opens the
 * database too); a newer one is refused with SchemaNewerError, and an older one a role may
 * not migrate with SchemaOlderError, unchanged. A database
 * written before version 12 kept the queue's versions in a table of their own
 * (`tron_queue_schema`): they are taken over here, once, as the versions they are now.
 */
import type pg from 'pg';
import { InputError } from '../core/errors.ts';
import { redactUrlSecrets } from '../core/database-url.ts';
import type { InputCode } from '../core/problems.ts';
import { MIGRATIONS, ONE_SERIES_VERSION, QUEUE_SERIES_BASE, SCHEMA_VERSION } from './series.ts';

/** A table of the versions applied. */
const VERSIONS_COLUMNS = 'version integer primary key, applied_at timestamptz not null default now()';

/** The advisory lock every schema change takes: tron's series and graphile-worker's migrations. */
export const SCHEMA_LOCK = `hashtext('tron_schema')`;

/** The database holds a newer schema than this tron knows: refused, nothing changed. */
export class SchemaNewerError extends InputError {
  readonly code = 'TRON_DB_SCHEMA_NEWER' satisfies InputCode;
  constructor(url: string, found: number, known: number = SCHEMA_VERSION) {
    super([
      {
        code: 'TRON_DB_SCHEMA_NEWER',
        path: `${redactUrlSecrets(url)} (tron_schema)`,
        message: `the database's schema (tron_schema) is version ${found}, and this tron knows up to ${known}; upgrade tron on this host to the version the other hosts run`,
      },
    ]);
    this.name = 'SchemaNewerError';
  }
}

/**
 * The database's schema is older than this tron, and the role in the URL may not bring it
 * up (a reader's or an agent's role: select or execute only): refused, nothing changed.
 */
export class SchemaOlderError extends InputError {
  readonly code = 'TRON_DB_SCHEMA_OLDER' satisfies InputCode;
  constructor(url: string, found: number) {
    super([
      {
        code: 'TRON_DB_SCHEMA_OLDER',
        path: `${redactUrlSecrets(url)} (tron_schema)`,
        message: `the database's schema (tron_schema) is version ${found}, this tron needs ${SCHEMA_VERSION}, and the role in the URL may not migrate it; start an engine of this tron's version once (its role owns the database and migrates it), or run this command with the tron the engine runs`,
      },
    ]);
    this.name = 'SchemaOlderError';
  }
}

/** PostgreSQL's SQLSTATE for a role that lacks a privilege. */
const INSUFFICIENT_PRIVILEGE = '42501';

/** Whether the queue library's schema is brought up only with a change of tron's, or at every call. */
export type LibraryMigrations = 'with-ours' | 'always';

/**
 * Brings the database at `url` (connected as `client`) up to this tron's schema. `library:
 * 'always'` brings the queue library's schema up even when tron's is current — an engine
 * that runs jobs does, so that a newer graphile-worker's migrations run at its first start.
 */
export async function migrate(client: pg.ClientBase, url: string, library: LibraryMigrations = 'with-ours'): Promise<void> {
  const at = await versionAt(client, url);
  if (at === SCHEMA_VERSION && library === 'with-ours') return;
  await bringUp(client, url).catch((err: unknown) => {
    throw (err as { code?: unknown }).code === INSUFFICIENT_PRIVILEGE && at < SCHEMA_VERSION ? new SchemaOlderError(url, at) : err;
  });
}

/** Under the schema's lock: the queue library's migrations, then every version of tron's the database lacks, in one transaction. */
async function bringUp(client: pg.ClientBase, url: string): Promise<void> {
  await client.query(`select pg_advisory_lock(${SCHEMA_LOCK})`);
  try {
    await migrateQueueLibrary(url);
    await client.query('begin');
    try {
      await client.query(`create table if not exists tron_schema (${VERSIONS_COLUMNS})`);
      await adoptQueueSeries(client);
      const applied = await appliedVersions(client, url);
      // Version 8 reads the queue's own table of before version 12, which 12 removes: an empty one for it meanwhile.
      if (!applied.has(ONE_SERIES_VERSION)) await client.query(`create table if not exists tron_queue_schema (${VERSIONS_COLUMNS})`);
      for (let v = 1; v <= SCHEMA_VERSION; v += 1) {
        if (applied.has(v)) continue;
        await client.query(MIGRATIONS[v - 1]!);
        await client.query('insert into tron_schema (version) values ($1)', [v]);
      }
      await client.query('commit');
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    }
  } finally {
    await client.query(`select pg_advisory_unlock(${SCHEMA_LOCK})`).catch(() => undefined);
  }
}

/**
 * The version the database is at: this tron's when every version is applied and no series
 * of the queue's own is left to take over; else the highest applied, as far as this tron
 * can tell (0 for an empty database), and below this tron's. Refuses a newer schema.
 */
async function versionAt(client: pg.ClientBase, url: string): Promise<number> {
  const { rows } = await client.query<{ ours: string | null; queue: string | null }>(
    `select to_regclass('tron_schema')::text as ours, to_regclass('tron_queue_schema')::text as queue`,
  );
  if (!rows[0]?.ours) return 0;
  const applied = await appliedVersions(client, url);
  if (!rows[0].queue && applied.size === SCHEMA_VERSION) return SCHEMA_VERSION;
  // The queue's own series of before version 12, its n this series' n + QUEUE_SERIES_BASE (a role that may not read it: unknown).
  const queue = rows[0].queue
    ? await client.query<{ v: number | null }>('select max(version) as v from tron_queue_schema').then(
        (r) => (r.rows[0]?.v ?? 0) + QUEUE_SERIES_BASE,
        () => 0,
      )
    : 0;
  return Math.min(SCHEMA_VERSION - 1, Math.max(0, queue, ...applied));
}

/** The versions the database has applied; SchemaNewerError past this tron's last. */
async function appliedVersions(client: pg.ClientBase, url: string): Promise<Set<number>> {
  const { rows } = await client.query<{ version: number }>('select version from tron_schema');
  const applied = new Set(rows.map((r) => r.version));
  const newest = Math.max(0, ...applied);
  if (newest > SCHEMA_VERSION) throw new SchemaNewerError(url, newest);
  return applied;
}

/** The queue's own series of before version 12 (its 1–7) taken into tron_schema as the versions they are now (5–11). */
async function adoptQueueSeries(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ t: string | null }>(`select to_regclass('tron_queue_schema')::text as t`);
  if (!rows[0]?.t) return;
  await client.query(
    `insert into tron_schema (version, applied_at) select version + ${QUEUE_SERIES_BASE}, applied_at from tron_queue_schema on conflict do nothing`,
  );
}

/**
 * graphile-worker's own migrations, on a connection of its own (it opens one). Loaded here,
 * not at the top: a start without a database never needs it (~170 ms).
 */
async function migrateQueueLibrary(url: string): Promise<void> {
  const { runMigrations } = await import('graphile-worker');
  await runMigrations({ connectionString: url, logger: QUIET_LIBRARY });
}

/**
 * The queue library's logger, quiet: tron says what matters in its own words.
 * TRON_DEBUG=1: the library's own complaints (a missing grant, a lost connection) on stderr.
 */
// biome-ignore lint/suspicious/noExplicitAny: graphile-worker's Logger class is not exported as a type we can build.
export const QUIET_LIBRARY: any = {
  scope: () => QUIET_LIBRARY,
  error: (m: string) => process.env.TRON_DEBUG === '1' && process.stderr.write(`graphile-worker: ${m}\n`),
  warn: (m: string) => process.env.TRON_DEBUG === '1' && process.stderr.write(`graphile-worker: ${m}\n`),
  info: () => undefined,
  debug: () => undefined,
};
