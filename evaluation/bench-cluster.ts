/**
 * What the log in PostgreSQL costs (part of `npm run bench`; alone:
 * `npx tsx evaluation/bench-cluster.ts`): one event appended and made durable — the wait
 * before the effect it announces may start — on the file log (`events.jsonl`, fsync) and on
 * the database's table (one fenced insert, committed), p50 and p99; and the same for a step
 * of ten lines, which group commit makes one flush or one insert. The database is
 * TRON_TEST_DATABASE_URL, else a throwaway cluster on this machine (engine/testing/postgres.ts),
 * with the server's default durability (fsync on).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { systemClock } from '../engine/os/clock.ts';
import type { EventBody } from '../engine/core/events.ts';
import { EventLog } from '../engine/log/eventlog.ts';
import { acquireLease } from '../engine/log/lease.ts';
import { openDatabase, PgEventLog } from '../engine/log/pg-log.ts';
import type { RunLog } from '../engine/log/run-log.ts';
import { missing } from '../engine/testing/needs.ts';
import { needPostgres, testDatabase } from '../engine/testing/postgres.ts';

const BODY: EventBody = {
  type: 'block.parked',
  block: 'alpha',
  reason: 'a line of ordinary length for the bench, as a parked block writes',
};

/** p50 and p99 of `runs` timed steps of `lines` appends and one sync, after 20 warm-ups. */
async function steps(log: RunLog, runs: number, lines: number): Promise<{ p50: number; p99: number }> {
  const one = async () => {
    for (let i = 0; i < lines; i += 1) log.append(BODY);
    await log.sync();
  };
  for (let i = 0; i < 20; i += 1) await one();
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const start = performance.now();
    await one();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { p50: times[Math.floor(runs / 2)]!, p99: times[Math.floor(runs * 0.99)]! };
}

const say = (name: string, r: { p50: number; p99: number }, note = '') =>
  console.log(`${name.padEnd(44)} ${r.p50.toFixed(3).padStart(10)} ms p50, ${r.p99.toFixed(3)} ms p99${note}`);

export async function benchCluster(runs = Number(process.env.TRON_BENCH_APPENDS ?? 300)): Promise<void> {
  const lacking = missing(needPostgres());
  if (lacking.length > 0) {
    console.log(`${'log append, database'.padEnd(44)} skipped: ${lacking.join('; ')}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'tron-bench-cluster-'));
  const server = await testDatabase();
  const db = await openDatabase(server.url);
  try {
    const file = EventLog.open(join(dir, '20260101-000000-001'), { clock: systemClock, key: Buffer.alloc(32, 1) });
    file.groupCommit = true;
    const lease = await acquireLease(db, { repository: 'bench', periodMs: 60_000 });
    const table = (await PgEventLog.open(db, lease, '20260101-000000-001', Buffer.alloc(32, 1))).attach(systemClock);
    table.groupCommit = true;
    const fileOne = await steps(file, runs, 1);
    const tableOne = await steps(table, runs, 1);
    say('log append + durable, file (fsync)', fileOne);
    say('log append + durable, database', tableOne, ` (${(tableOne.p50 / fileOne.p50).toFixed(2)}× the file's p50)`);
    say('10 appends + durable, file', await steps(file, Math.ceil(runs / 3), 10));
    say('10 appends + durable, database', await steps(table, Math.ceil(runs / 3), 10));
    file.close();
    await table.close();
  } finally {
    await db.end();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchCluster();
