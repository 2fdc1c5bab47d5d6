/**
 * The schema read in one place: the database the one series of migrations makes
 * (engine/schema/series.ts, run by migrate.ts) is the dump committed beside them, whether
 * it starts empty or as an older tron left it. A new migration changes it; update the dump
 * with `TRON_TEST_DATABASE_URL=… npx vitest run engine/schema/schema.test.ts -u` and read
 * the diff.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dumpSchema, olderSchema, skipWithoutPostgres, testDatabase, useTestDatabase } from '../testing/postgres.ts';
import { openDatabase } from '../log/pg-log.ts';
import { migrateJobs } from '../queue/pg-jobs.ts';
import { MIGRATIONS, SCHEMA_VERSION } from './series.ts';

describe('the series of migrations', () => {
  it('is the files of engine/schema/migrations/, numbered from 1 without a gap, each listed once in its place', async () => {
    const files = readdirSync(new URL('./migrations/', import.meta.url)).sort();
    expect(files.map((f) => Number(f.slice(0, 4)))).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
    for (const [i, file] of files.entries()) {
      const { default: sql } = (await import(/* @vite-ignore */ new URL(`./migrations/${file}`, import.meta.url).href)) as {
        default: string;
      };
      expect(MIGRATIONS[i], file).toBe(sql);
    }
  });

  it('says in each file which version it is', () => {
    for (const file of readdirSync(new URL('./migrations/', import.meta.url))) {
      const text = readFileSync(new URL(`./migrations/${file}`, import.meta.url), 'utf8');
      expect(text, file).toMatch(new RegExp(`^/\\*\\*\\n \\* Version ${Number(file.slice(0, 4))}\\b`));
    }
  });
});

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

  it.each([
    { log: 4, queue: 7, as: 'the last tron with two series left it' },
    { log: 3, queue: 5, as: 'a tron whose log was at 3 and queue at 5 left it' },
    { log: 2, queue: 0, as: 'a tron that never ran jobs through the database left it' },
  ])('is what a database holds once brought up from the two series of before version 12, as $as', async (at) => {
    const fresh = await testDatabase();
    try {
      await olderSchema(fresh.url, at);
      const [a, b] = await Promise.all([openDatabase(fresh.url), openDatabase(fresh.url)]);
      try {
        const { rows } = await a.client.query<{ version: number }>('select version from tron_schema order by version');
        expect(rows.map((r) => r.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
        const version = await b.client.query('select tron_queue_version() as v');
        expect(version.rows[0].v).toBe(SCHEMA_VERSION);
      } finally {
        await Promise.all([a.end(), b.end()]);
      }
      expect(dumpSchema(fresh.url)).toBe(readFileSync(new URL('./schema.sql', import.meta.url), 'utf8'));
    } finally {
      await fresh.stop();
    }
  });
});
