/**
 * A real PostgreSQL for the tests that need one. `TRON_TEST_DATABASE_URL` when set (CI's,
 * or yours); else a throwaway cluster this helper makes with the installed server
 * (`initdb` into a temp folder under /tmp, `pg_ctl start` on a free port of 127.0.0.1 —
 * as the `postgres` user when the tests run as root, which the server refuses to be) and
 * stops and removes after. Each test file gets its own fresh database in it, dropped after.
 *
 * Where neither is possible the tests skip with one line saying how to get one; with
 * `CI=true` nothing may skip (engine/testing/needs.ts): they run and fail by name.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { type Database, openDatabase } from '../log/pg-log.ts';
import { type Needed, requireAll, skipWithout } from './needs.ts';
import { QUIET_LIBRARY } from '../schema/migrate.ts';
import { MIGRATIONS, QUEUE_SERIES_BASE } from '../schema/series.ts';

/** The variable that names a running server for the tests (docs/contributing.md says how to start one). */
export const TEST_DATABASE_ENV = 'TRON_TEST_DATABASE_URL';

const INSTALL = `apt-get install -y postgresql (its initdb is used from /usr/lib/postgresql/*/bin), or set ${TEST_DATABASE_ENV}=postgres://user:pass@127.0.0.1:5432/db (docs/contributing.md, "The database tests need PostgreSQL")`;

/** The server's programs: /usr/lib/postgresql/<newest>/bin, where Debian puts them. */
function serverBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

/** PostgreSQL as the tests need it: a URL given, or a server here to start. For skipWithout/requireAll. */
export function needPostgres(): Needed {
  const url = process.env[TEST_DATABASE_ENV];
  if (url) return { name: 'PostgreSQL', path: url, install: INSTALL };
  const bin = serverBin();
  return bin ? { name: 'PostgreSQL', path: bin, install: INSTALL } : { name: 'PostgreSQL', install: INSTALL };
}

/** A fresh database for one test file; `stop` drops it (and stops the cluster this helper started). */
export interface TestDatabase {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Runs a server program, as `postgres` when this process is root. */
function runServerProgram(program: string, args: string[]): void {
  const asRoot = process.getuid?.() === 0;
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
  execFileSync(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A throwaway cluster this helper started: its URL names the `postgres` database of superuser `tron`. */
export interface Cluster {
  url: string;
  /** Stops the server (`-m mode`) and starts it again on the same port and data: the database restarted under a client. */
  restart(mode?: 'fast' | 'immediate'): void;
  stop(): void;
}

/** Starts a throwaway cluster with the server's programs in `bin`, in a folder under `under` (never the shared server of TRON_TEST_DATABASE_URL: tests may restart this one). */
export async function startCluster(bin: string | undefined = serverBin(), under = '/tmp'): Promise<Cluster> {
  if (!bin) throw new Error(`PostgreSQL is not installed here: ${INSTALL}`);
  const dir = mkdtempSync(join(under, 'tron-pg-'));
  const data = join(dir, 'data');
  const port = await freePort();
  const start = () =>
    runServerProgram(join(bin, 'pg_ctl'), [
      '-D',
      data,
      '-l',
      join(dir, 'server.log'),
      '-w',
      '-o',
      `-k ${dir} -p ${port} -c listen_addresses=127.0.0.1`,
      'start',
    ]);
  // A cluster that did not come up leaves nothing behind: its folder, and a server that started anyway.
  try {
    if (process.getuid?.() === 0) execFileSync('chown', ['postgres', dir]);
    runServerProgram(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'tron', '--no-sync', '-E', 'UTF8']);
    start();
  } catch (err) {
    try {
      runServerProgram(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']);
    } catch {
      // It never started.
    }
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: `postgres://tron@127.0.0.1:${port}/postgres`,
    restart: (mode = 'fast') => {
      runServerProgram(join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', 'stop']);
      start();
    },
    stop: () => {
      try {
        runServerProgram(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The server's programs, as the tests that start their own cluster need them (for skipWithout/requireAll). */
export function needPostgresServer(): Needed {
  const bin = serverBin();
  return bin ? { name: 'PostgreSQL server', path: bin, install: INSTALL } : { name: 'PostgreSQL server', install: INSTALL };
}

/** A database of its own for the calling test file, in the given server or a throwaway one. */
export async function testDatabase(): Promise<TestDatabase> {
  const given = process.env[TEST_DATABASE_ENV];
  const cluster = given ? undefined : await startCluster();
  const server = given ?? cluster!.url;
  const name = `tron_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    stop: async () => {
      if (cluster) return cluster.stop();
      const again = new pg.Client({ connectionString: server });
      await again.connect();
      try {
        // An autovacuum worker on the database (no role of ours: "must be a member of the role
        // whose process is being terminated") refuses the forced drop until it is done.
        for (let tries = 1; ; tries += 1) {
          try {
            await again.query(`drop database if exists ${name} with (force)`);
            break;
          } catch (err) {
            if ((err as { code?: string }).code !== '42501' || tries === 50) throw err;
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      } finally {
        await again.end();
      }
    },
  };
}

/**
 * The schema tron made in `url` (`public`: its one series of migrations), as pg_dump
 * prints it, its comments, session settings and blank lines left out: what a migrated
 * database holds, compared with the committed dump (engine/schema/schema.sql).
 */
export function dumpSchema(url: string): string {
  const bin = serverBin();
  const program = bin ? join(bin, 'pg_dump') : 'pg_dump';
  // The password goes by the environment, never argv (where ps shows it).
  const target = new URL(url);
  const password = decodeURIComponent(target.password);
  target.password = '';
  const out = execFileSync(program, ['--schema-only', '--schema=public', '--no-owner', '--no-privileges', '--dbname', target.toString()], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...(password ? { PGPASSWORD: password } : {}) },
  });
  return `${out
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^(--|SET |SELECT pg_catalog\.set_config|\\(un)?restrict )/.test(line))
    .join('\n')}\n`;
}

/**
 * Makes the schema of the database at `url` as a tron from before version 12 left it: the
 * log's series (`tron_schema`) at `log` and, with `queue` > 0, graphile-worker's schema and
 * the queue's own series (`tron_queue_schema`) at `queue` — the SQL each ran then, which is
 * versions 1–4 and 5–11 of the one series now (engine/schema/series.ts).
 */
export async function olderSchema(url: string, at: { log: number; queue: number }): Promise<void> {
  const raw = new pg.Client({ connectionString: url });
  await raw.connect();
  try {
    const series = async (table: string, versions: readonly string[]) => {
      await raw.query(`create table ${table} (version integer primary key, applied_at timestamptz not null default now())`);
      for (const [i, sql] of versions.entries()) {
        await raw.query(sql);
        await raw.query(`insert into ${table} (version) values ($1)`, [i + 1]);
      }
    };
    await series('tron_schema', MIGRATIONS.slice(0, at.log));
    if (at.queue === 0) return;
    const { runMigrations } = await import('graphile-worker');
    await runMigrations({ connectionString: url, logger: QUIET_LIBRARY });
    await series('tron_queue_schema', MIGRATIONS.slice(QUEUE_SERIES_BASE, QUEUE_SERIES_BASE + at.queue));
  } finally {
    await raw.end();
  }
}

/** Whether the tests of `what` skip here: no PostgreSQL, and not CI (says why once). For `describe.skipIf`. */
export function skipWithoutPostgres(what: string): boolean {
  return skipWithout(what, needPostgres());
}

/** A test file's own database (useTestDatabase): its URL, and connections closed with it. */
export interface UsedDatabase {
  /** The database's URL, once the file's beforeAll has made it. */
  readonly url: string;
  /** A connection (migrated: openDatabase), closed after the file's tests. */
  open(): Promise<Database>;
  /** Keeps a connection opened elsewhere, to close it with the others. */
  keep(d: Database): Database;
}

/**
 * The database setup every test file against PostgreSQL repeats: call inside its
 * `describe.skipIf(skipWithoutPostgres(…))`. Before the file's tests it requires
 * PostgreSQL (under CI it fails by name), makes the file's database and runs `prepare` on a
 * first connection; after them it closes every connection `open` made and drops the database.
 */
export function useTestDatabase(prepare?: (d: Database) => Promise<void>): UsedDatabase {
  let server: TestDatabase | undefined;
  const opened: Database[] = [];
  const used: UsedDatabase = {
    get url() {
      if (!server) throw new Error('the test database is made in beforeAll: read its url inside a test');
      return server.url;
    },
    open: async () => used.keep(await openDatabase(used.url)),
    keep: (d) => {
      opened.push(d);
      return d;
    },
  };
  beforeAll(async () => {
    requireAll(needPostgres());
    server = await testDatabase();
    if (prepare) await prepare(await used.open());
  }, 60_000);
  afterAll(async () => {
    for (const d of opened.splice(0)) await d.end().catch(() => undefined);
    await server?.stop();
  }, 60_000);
  return used;
}
