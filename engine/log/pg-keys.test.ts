import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { EventLog, readLines, readLog } from './eventlog.ts';
import { keyPath, repoKey } from './keys.ts';
import { acquireLease } from './lease.ts';
import { PgEventLog } from './pg-log.ts';
import { sharedKey } from './pg-keys.ts';

const clock = new ManualClock(Date.UTC(2026, 0, 1));
const clones: string[] = [];
afterEach(() => {
  for (const d of clones.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder standing for a clone on some host: its key is its own (keys.ts keys by path). */
function clone(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-clone-'));
  clones.push(dir);
  return dir;
}

/** The code of the InputError `p` rejects with. */
async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  return p.then(
    () => undefined,
    (err: unknown) => (err instanceof InputError ? err.problems[0]?.code : String(err)),
  );
}

describe.skipIf(skipWithoutPostgres("the repository's key in the database"))("the repository's key in the database", () => {
  const server = useTestDatabase();

  it('is the first engine’s: an engine in a clone of its own takes it, and checks the lines the first one signed', async () => {
    const db = await server.open();
    const lease = await acquireLease(db, { repository: 'shared', periodMs: 30_000 });
    const leader = clone();
    const first = await sharedKey(db, lease, leader);
    expect(first.key).toEqual(repoKey(leader)!.key);
    const log = (await PgEventLog.open(db, lease, '20260101-000000-001', first.key)).attach(clock);
    log.append({ type: 'merge.queued', block: 'alpha' });
    await log.sync();

    const standby = clone();
    const own = repoKey(standby, { create: true }).key;
    const taken = await sharedKey(db, lease, standby);
    expect(taken.key).toEqual(first.key);
    expect(taken.key).not.toEqual(own);
    // Kept where this host keeps keys: every later reader here checks with it.
    expect(readFileSync(keyPath(standby), 'utf8').trim()).toBe(first.key.toString('hex'));
    const lines = (await db.client.query<{ line: string }>(`select line from tron_events where repository = 'shared'`)).rows;
    const read = readLines(
      lines.map((r) => r.line),
      'postgres:shared',
      '20260101-000000-001',
      repoKey(standby)!.key,
    );
    expect(read.foreign).toEqual([]);
    expect(read.events.map((e) => e.type)).toEqual(['merge.queued']);
  });

  it('refuses a clone whose own runs are signed with its own key, and leaves that key as it was', async () => {
    const db = await server.open();
    const lease = await acquireLease(db, { repository: 'two-keys', periodMs: 30_000 });
    await sharedKey(db, lease, clone());
    const elsewhere = clone();
    const own = repoKey(elsewhere, { create: true }).key;
    const log = EventLog.open(join(elsewhere, '.tron', 'runs', '20251201-000000-001'), { clock });
    log.append({ type: 'merge.queued', block: 'alpha' });
    log.close();
    expect(readLog(join(elsewhere, '.tron', 'runs', '20251201-000000-001', 'events.jsonl')).signed).toBe(true);

    expect(await codeOf(sharedKey(db, lease, elsewhere))).toBe('TRON_KEY_CONFLICT');
    expect(repoKey(elsewhere)!.key).toEqual(own);
  });

  it('refuses when the database’s runs were signed with a key it does not hold and it holds none, and stores nothing', async () => {
    const db = await server.open();
    const lease = await acquireLease(db, { repository: 'older', periodMs: 30_000 });
    // Written as an older tron wrote: signed with its host's key, which it never put in the table.
    const log = (await PgEventLog.open(db, lease, '20260101-000000-001', Buffer.alloc(32, 9))).attach(clock);
    log.append({ type: 'merge.queued', block: 'alpha' });
    await log.sync();

    expect(await codeOf(sharedKey(db, lease, clone()))).toBe('TRON_KEY_UNKNOWN');
    expect((await db.client.query(`select 1 from tron_keys where repository = 'older'`)).rows).toEqual([]);
  });

  it('is written only by the holder of the lease, and never changed', async () => {
    const db = await server.open();
    const lease = await acquireLease(db, { repository: 'fenced', periodMs: 30_000 });
    await sharedKey(db, lease, clone());
    const refused = async (sql: string) =>
      db.client.query(sql).then(
        () => undefined,
        (err: { code?: string }) => err.code,
      );
    expect(await refused(`insert into tron_keys (repository, generation, key) values ('other', 99, '00')`)).toBe('TRN01');
    expect(await refused(`update tron_keys set key = '00' where repository = 'fenced'`)).toBe('TRN01');
    expect(await refused(`delete from tron_keys where repository = 'fenced'`)).toBe('TRN01');
  });
});
