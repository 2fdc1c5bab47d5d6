/**
 * tron's database schema: one series of numbered migrations (engine/schema/migrations/,
 * one file a version), run in order by engine/schema/migrate.ts. A migration is never
 * edited once released: a change is a new file at the end, and a line here. What they make
 * of an empty database is committed as engine/schema/schema.sql, the one place to read the
 * schema whole (a function a later version replaces is there as it is now).
 */
import v1 from './migrations/0001-events.ts';
import v2 from './migrations/0002-run-files.ts';
import v3 from './migrations/0003-keys.ts';
import v4 from './migrations/0004-repositories.ts';
import v5 from './migrations/0005-jobs.ts';
import v6 from './migrations/0006-job-control.ts';
import v7 from './migrations/0007-near.ts';
import v8 from './migrations/0008-queue-version.ts';
import v9 from './migrations/0009-output-notes.ts';
import v10 from './migrations/0010-scope.ts';
import v11 from './migrations/0011-attempts.ts';
import v12 from './migrations/0012-one-series.ts';

/** The SQL of version 1, 2, …, in order. */
export const MIGRATIONS: readonly string[] = [v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12];

/** The schema version this tron writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * The queue's own series (`tron_queue_schema`, before version 12) is versions 5–11 of this
 * one: its version n is this series' n + QUEUE_SERIES_BASE.
 */
export const QUEUE_SERIES_BASE = 4;

/** The version from which the queue's version (what `tron_queue_version()` answers) is this series'. */
export const ONE_SERIES_VERSION = 12;
