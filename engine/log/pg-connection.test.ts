import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { openDatabase } from './pg-log.ts';

const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout("tron's connection to PostgreSQL", POSTGRES);

describe.skipIf(NO_DATABASE)("tron's connection to PostgreSQL", () => {
  let server: TestDatabase;
  beforeAll(async () => {
    requireAll(POSTGRES);
    server = await testDatabase();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  }, 60_000);

  it('takes queries sent at once (an append, a lease renewal, a read) one after another, in order, with no warning on stderr', async () => {
    const db = await openDatabase(server.url);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => db.client.query<{ n: number }>('select $1::int as n, pg_sleep(0.005)', [i])),
      );
      expect(answers.map((a) => a.rows[0]!.n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      // A failing query does not stop the ones after it.
      const [bad, good] = await Promise.allSettled([db.client.query('select * from no_such_table'), db.client.query('select 1 as one')]);
      expect(bad.status).toBe('rejected');
      expect(good.status === 'fulfilled' && good.value.rows[0].one).toBe(1);
      await new Promise((r) => setImmediate(r));
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await db.end();
    }
  });
});
