import { describe, expect, it } from 'vitest';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';

describe.skipIf(skipWithoutPostgres("tron's connection to PostgreSQL"))("tron's connection to PostgreSQL", () => {
  const database = useTestDatabase();

  it('takes queries sent at once (an append, a lease renewal, a read) one after another, in order, with no warning on stderr', async () => {
    const db = await database.open();
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
    }
  });
});
