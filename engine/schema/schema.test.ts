/**
 * The schema read in one place: the database both series of migrations make (the log's
 * and the queue's, engine/schema/migrate.ts) is the dump committed beside them. A new
 * migration changes it; update the dump with
 * `TRON_TEST_DATABASE_URL=… npx vitest run engine/schema/schema.test.ts -u` and read the diff.
 */
import { describe, expect, it } from 'vitest';
import { dumpSchema, skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { migrateJobs } from '../queue/pg-jobs.ts';

describe.skipIf(skipWithoutPostgres('the committed schema'))('the committed schema', () => {
  const db = useTestDatabase(migrateJobs);

  it('is what the migrations make of an empty database', async () => {
    await expect(dumpSchema(db.url)).toMatchFileSnapshot('./schema.sql');
  });

  it('is what a database migrated twice holds: a second run changes nothing', async () => {
    const before = dumpSchema(db.url);
    await migrateJobs(await db.open());
    expect(dumpSchema(db.url)).toBe(before);
  });
});
