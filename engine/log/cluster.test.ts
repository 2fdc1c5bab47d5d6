import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { testGit } from '../testing/repo.ts';
import pg from 'pg';
import { bringLatestRun, normalizeRemoteUrl, readDatabaseRun, repositoryName, seatFailure, takeSeat } from './cluster.ts';

const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout('a run carried between hosts by the database', POSTGRES);

describe.skipIf(NO_DATABASE)('a run carried between hosts by the database', () => {
  let server: TestDatabase;
  const dirs: string[] = [];
  beforeAll(async () => {
    requireAll(POSTGRES);
    server = await testDatabase();
  }, 60_000);
  afterAll(async () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await server?.stop();
  }, 60_000);

  const folder = () => {
    const d = mkdtempSync(join(tmpdir(), 'tron-host-'));
    dirs.push(d);
    return d;
  };

  it('tells a start whose database went just after it took the lease TRON_DB_LOST, not an engine failure, and leaves coded errors alone', async () => {
    const seat = (await takeSeat({ url: server.url, repository: 'went-at-start', leaseMs: 30_000, print: () => undefined }))!;
    try {
      // Before the seat saw anything: the error of a query on a connection that broke.
      const broken = new Error('Client has encountered a connection error and is not queryable');
      expect((seatFailure(seat, server.url, broken) as Error).message).toMatch(/^TRON_DB_LOST: /);
      const coded = new Error('TRON_GIT_FAILED: git said no');
      expect(seatFailure(seat, server.url, coded)).toBe(coded);
      const mine = new Error('a bug of the engine');
      expect(seatFailure(seat, server.url, mine)).toBe(mine);
      // The server ends the seat's connection (a restart): what fails after is that loss, whatever it says.
      const admin = new pg.Client({ connectionString: server.url });
      await admin.connect();
      await admin.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where pid <> pg_backend_pid() and application_name = '' and state = 'idle' and datname = current_database()",
      );
      await admin.end();
      let lost: Error | undefined;
      seat.onLost((e) => {
        lost = e;
      });
      for (let i = 0; i < 100 && !lost; i += 1) await new Promise((r) => setTimeout(r, 20));
      expect(String(lost)).toMatch(/TRON_DB_LOST/);
      expect(seatFailure(seat, server.url, mine)).toBe(lost);
    } finally {
      await seat.leave().catch(() => undefined);
    }
  });

  it("brings the latest run to another host's run directory whole: its lines, its spine and its manifest", async () => {
    const key = Buffer.alloc(32, 3);
    const seat = await takeSeat({ url: server.url, repository: 'carried', leaseMs: 30_000, print: () => undefined });
    const runDir = join(folder(), 'runs', '20260101-000000-001');
    mkdirSync(runDir, { recursive: true });
    writeFileSync(join(runDir, 'workflow.toml'), '# the spine that drove the run\n');
    writeFileSync(join(runDir, 'manifest.json'), '{"config":{"test":"npm test"}}\n');
    const log = (await seat!.openLog('20260101-000000-001', key, join(runDir, 'events.jsonl'))).attach(new ManualClock(0));
    log.append({ type: 'merge.queued', block: 'alpha' });
    log.append({ type: 'block.abandoned', block: 'beta', reason: 'gave up' });
    await log.close();
    // The other host: no run directory yet; a standby's start brings it.
    const standby = await takeSeat({ url: server.url, repository: 'carried', leaseMs: 30_000, print: () => undefined });
    const there = join(folder(), 'runs');
    try {
      expect(await bringLatestRun(standby!, there)).toBe('20260101-000000-001');
    } finally {
      await standby!.leave();
    }
    for (const name of ['events.jsonl', 'workflow.toml', 'manifest.json'])
      expect(readFileSync(join(there, '20260101-000000-001', name), 'utf8'), name).toBe(readFileSync(join(runDir, name), 'utf8'));
  });

  it('writes no file the table names with a path: only workflow.toml and manifest.json come, in the run directory', async () => {
    const key = Buffer.alloc(32, 3);
    const seat = await takeSeat({ url: server.url, repository: 'planted-file', leaseMs: 30_000, print: () => undefined });
    const runDir = join(folder(), 'runs', '20260101-000000-001');
    mkdirSync(runDir, { recursive: true });
    writeFileSync(join(runDir, 'manifest.json'), '{}\n');
    const log = (await seat!.openLog('20260101-000000-001', key, join(runDir, 'events.jsonl'))).attach(new ManualClock(0));
    log.append({ type: 'merge.queued', block: 'alpha' });
    // A writer that is not tron adds rows whose names climb out of the run directory.
    for (const name of ['../../planted', '../planted', 'events.jsonl'])
      await seat!.db.client.query(
        `insert into tron_run_files (repository, run, name, generation, body) values ('planted-file', '20260101-000000-001', $1, $2, 'planted')`,
        [name, seat!.lease.generation],
      );
    await log.close();
    const standby = await takeSeat({ url: server.url, repository: 'planted-file', leaseMs: 30_000, print: () => undefined });
    const host = folder();
    try {
      expect(await bringLatestRun(standby!, join(host, 'runs'))).toBe('20260101-000000-001');
    } finally {
      await standby!.leave();
    }
    expect(readdirSync(host)).toEqual(['runs']);
    expect(readdirSync(join(host, 'runs'))).toEqual(['20260101-000000-001']);
    expect(readdirSync(join(host, 'runs', '20260101-000000-001')).sort()).toEqual(['events.jsonl', 'manifest.json']);
    expect(readFileSync(join(host, 'runs', '20260101-000000-001', 'events.jsonl'), 'utf8')).not.toContain('planted');
  });

  it('refuses a run whose id in the table is a path with TRON_DB_NAME, and writes nothing for it', async () => {
    const key = Buffer.alloc(32, 3);
    const run = 'zz/../../../escaped';
    const seat = await takeSeat({ url: server.url, repository: 'planted-run', leaseMs: 30_000, print: () => undefined });
    const log = (await seat!.openLog(run, key)).attach(new ManualClock(0));
    log.append({ type: 'merge.queued', block: 'alpha' });
    await log.close();
    const standby = await takeSeat({ url: server.url, repository: 'planted-run', leaseMs: 30_000, print: () => undefined });
    const host = folder();
    const runs = join(host, 'a', 'b', 'runs');
    try {
      await expect(bringLatestRun(standby!, runs)).rejects.toThrow(/TRON_DB_NAME.*run "zz\/\.\.\/\.\.\/\.\.\/escaped"/s);
    } finally {
      await standby!.leave();
    }
    expect(existsSync(join(runs, run))).toBe(false);
    expect(readdirSync(host)).toEqual([]);
    // Read from the database alone (status, report --database): refused alike, its password never said.
    const refused = await readDatabaseRun(server.url).then(
      () => '',
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/TRON_DB_NAME/);
    const password = new URL(server.url).password;
    if (password) expect(refused).not.toContain(`:${password}@`);
  });
});

describe("the repository's name every clone derives alike", () => {
  it('spells one remote one way however a clone wrote its URL: credentials, scheme, case, .git and / aside', () => {
    const same = [
      'git@Forge.Internal:team/myapp.git',
      'ssh://git@forge.internal/team/myapp.git',
      'ssh://git@forge.internal:22/team/myapp',
      'https://forge.internal/team/myapp',
      'https://bot:s3cret@FORGE.internal/team/myapp.git/',
      'git://forge.internal/team/myapp.git',
    ];
    for (const url of same) expect(normalizeRemoteUrl(url), url).toBe('forge.internal/team/myapp');
    expect(normalizeRemoteUrl('https://forge.internal:8443/team/myapp.git')).toBe('forge.internal:8443/team/myapp');
    expect(normalizeRemoteUrl('https://forge.internal/team/other')).not.toBe('forge.internal/team/myapp');
    // A local remote: its absolute path, however it was named.
    expect(normalizeRemoteUrl('file:///srv/git/myapp.git')).toBe('/srv/git/myapp');
    expect(normalizeRemoteUrl('/srv/git/myapp.git/')).toBe('/srv/git/myapp');
    expect(normalizeRemoteUrl('../myapp.git', '/srv/git/clone')).toBe('/srv/git/myapp');
  });

  it('takes [cluster] repository first, then the remote, then the folder of a repository without one', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'tron-name-'));
    try {
      const dir = join(parent, 'some-folder');
      await testGit(parent, 'init', '-q', dir);
      expect(repositoryName(dir, undefined)).toBe('some-folder');
      await testGit(dir, 'remote', 'add', 'upstream', 'git@forge.internal:team/myapp.git');
      // The only remote, whatever its name; `origin` when there are more.
      expect(repositoryName(dir, undefined)).toBe('forge.internal/team/myapp');
      await testGit(dir, 'remote', 'add', 'origin', 'https://forge.internal/team/fork');
      expect(repositoryName(dir, undefined)).toBe('forge.internal/team/fork');
      expect(repositoryName(dir, undefined, 'upstream')).toBe('forge.internal/team/myapp');
      expect(repositoryName(dir, { repository: 'named' } as never)).toBe('named');
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
