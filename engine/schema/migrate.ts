/**
 * The one runner of tron's schema migrations. A series is a table of the versions applied
 * and the SQL of each version, in order; a migration is never edited once released — a
 * change is a new one at the end. tron keeps two series: the log's (`tron_schema`: the
 * log, the lease, the keys), which every host that opens the database brings up, and the
 * queue's (`tron_queue_schema`, engine/queue/pg-jobs.ts), on top of graphile-worker's own
 * schema, which only an engine that runs jobs through the database creates. Both run here,
 * under the one advisory lock every schema change takes (`tron_schema`), so any number of
 * hosts starting at once migrate once. The schema they make is committed in
 * engine/schema/schema.sql, which a test compares with a freshly migrated database.
 */
import type pg from 'pg';
import { InputError } from '../core/errors.ts';
import { redactUrlSecrets } from '../core/database-url.ts';
import type { InputCode } from '../core/problems.ts';

/** The advisory lock every schema change takes: tron's series and graphile-worker's migrations. */
export const SCHEMA_LOCK = `hashtext('tron_schema')`;

/** A series of migrations: its versions table and the SQL of version 1, 2, … */
export interface MigrationSeries {
  readonly table: 'tron_schema' | 'tron_queue_schema';
  readonly migrations: readonly string[];
}

/** The database holds a newer version of a series than this tron knows: refused, nothing changed. */
export class SchemaNewerError extends InputError {
  readonly code = 'TRON_DB_SCHEMA_NEWER' satisfies InputCode;
  constructor(url: string, found: number, table: MigrationSeries['table'], known: number) {
    super([
      {
        code: 'TRON_DB_SCHEMA_NEWER',
        path: `${redactUrlSecrets(url)} (${table})`,
        message: `the database's schema (${table}) is version ${found}, and this tron knows up to ${known}; upgrade tron on this host to the version the other hosts run`,
      },
    ]);
    this.name = 'SchemaNewerError';
  }
}

/**
 * Brings a series up to its last version in one transaction, under the schema's lock. A
 * series already at its last version is only read (a reader's role, select only, opens the
 * database too); a newer one is refused with SchemaNewerError.
 */
export async function migrateSeries(client: pg.ClientBase, url: string, series: MigrationSeries): Promise<void> {
  const { table, migrations } = series;
  const last = migrations.length;
  const current = async () => {
    const { rows } = await client.query<{ v: number | null }>(`select max(version) as v from ${table}`);
    const at = rows[0]?.v ?? 0;
    if (at > last) throw new SchemaNewerError(url, at, table, last);
    return at;
  };
  const { rows: exists } = await client.query<{ t: string | null }>('select to_regclass($1)::text as t', [table]);
  if (exists[0]?.t && (await current()) === last) return;
  await client.query('begin');
  try {
    await client.query(`select pg_advisory_xact_lock(${SCHEMA_LOCK})`);
    await client.query(`create table if not exists ${table} (version integer primary key, applied_at timestamptz not null default now())`);
    for (let v = (await current()) + 1; v <= last; v += 1) {
      await client.query(migrations[v - 1]!);
      await client.query(`insert into ${table} (version) values ($1)`, [v]);
    }
    await client.query('commit');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  }
}
