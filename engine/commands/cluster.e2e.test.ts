/**
 * `tron start` with `[cluster] database`, as the CLI runs it, against a real PostgreSQL:
 * the run's log is the table, `tron status --database` reads it from no repository at
 * all, a second engine is refused while the lease is live, and a standby takes over from
 * an engine killed mid-run and lands everything exactly once.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { configFile, landingSim, makeProject } from '../testing/project.ts';
import { clusterHosts, landedOnce, untilLine } from '../testing/cluster-hosts.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { acquireLease } from '../log/lease.ts';
import { latestPgRun, openDatabase, readPgRun, runLines } from '../log/pg-log.ts';

const NO_DATABASE = skipWithoutPostgres('tron start with the log in PostgreSQL');
const IDS = ['alpha', 'beta', 'gamma'];

describe.skipIf(NO_DATABASE)('tron start with [cluster] database', () => {
  const server = useTestDatabase();
  const hosts = clusterHosts();
  afterEach(() => hosts.end());

  /** A project of IDS that the sim lands, its log in the database under `repository`. */
  const clusterProject = (repository: string, lease = '10s') => hosts.landingProject({ database: server.url, repository, lease }, IDS);
  const cli = (args: string[], env: Record<string, string> = {}) => hosts.cli(args, { env, timeout: 120_000 });

  it('lands every block with the log in the table, and status reads the run from the database alone', async () => {
    const repo = await clusterProject('lands');
    const run = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(run.stderr).toBe('');
    expect(run.exitCode, run.stdout).toBe(0);
    await landedOnce(repo, IDS);
    const [runId] = readdirSync(join(repo.dir, '.tron', 'runs'));
    const db = await openDatabase(server.url);
    try {
      const at = await latestPgRun(db, 'lands');
      expect(at).toEqual({ repository: 'lands', run: runId });
      const events = (await readPgRun(db, at!, undefined)).events;
      expect(
        events
          .filter((e) => e.type === 'block.landed')
          .map((e) => (e as { block: string }).block)
          .sort(),
      ).toEqual(IDS);
      expect(events.at(-1)!.type).toBe('run.finished');
      // The run directory holds a copy of the table's lines, made when the run ended: this host's readers read it as ever.
      const lines = await runLines(db, at!);
      expect(readFileSync(join(repo.dir, '.tron', 'runs', runId!, 'events.jsonl'), 'utf8')).toBe(`${lines.join('\n')}\n`);
    } finally {
      await db.end();
    }
    const local = await cli(['report', '--repo', repo.dir, '--json']);
    expect(JSON.parse(local.stdout)).toMatchObject({ run: runId });
    // From anywhere: no --repo, the database only.
    const status = await cli(['status', '--database', server.url, '--json'], {});
    expect(status.exitCode, status.stderr).toBe(0);
    const json = JSON.parse(status.stdout) as {
      repository: string;
      run: string;
      engine: string;
      blocks: { block: string; phase: string }[];
    };
    expect(json).toMatchObject({ repository: 'lands', run: runId, engine: 'finished' });
    expect(json.blocks.map((b) => [b.block, b.phase]).sort()).toEqual(IDS.map((id) => [id, 'landed']));
    const text = await cli(['status', '--database', server.url]);
    expect(text.stdout).toMatch(new RegExp(`^run ${runId} \\(finished\\) — lands in postgres://`, 'm'));
    // The report too, of the run named by its id.
    const report = await cli(['report', '--database', server.url, runId!, '--json']);
    expect(report.exitCode, report.stderr).toBe(0);
    expect(JSON.parse(report.stdout)).toMatchObject({ repository: 'lands', run: runId });
    const none = await cli(['report', '--database', server.url, '20000101-000000-001']);
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toContain('TRON_RUN_NOT_FOUND');
  }, 180_000);

  it('keeps the database password and the webhook secret out of the run directory, tron_run_files and tron_events', async () => {
    // The URL as a team writes it, with its password in the user part (the local server ignores one it does not ask for).
    const url = new URL(server.url);
    url.password ||= 'tron-test-password';
    const password = decodeURIComponent(url.password);
    const webhook = 'http://127.0.0.1:9/services/T000/B000/hook-secret-4711';
    const repo = await makeProject({
      blocks: { alpha: {} },
      sim: landingSim(['alpha']),
      config: configFile({
        extra: `\n[cluster]\ndatabase = "${url.href}"\nrepository = "secret"\n\n[notify]\nwebhook = "${webhook}"\non = ["run"]\nattempts = 1\n`,
      }),
    });
    hosts.adopt(repo);
    const run = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(run.exitCode, run.stdout + run.stderr).toBe(0);
    const secrets = [`:${password}@`, `:${encodeURIComponent(password)}@`, 'hook-secret-4711'];
    const [runId] = readdirSync(join(repo.dir, '.tron', 'runs'));
    const runDir = join(repo.dir, '.tron', 'runs', runId!);
    const files = readdirSync(runDir, { recursive: true, encoding: 'utf8' }).filter((f) => !statSync(join(runDir, f)).isDirectory());
    expect(files).toContain('manifest.json');
    for (const f of files) for (const secret of secrets) expect(readFileSync(join(runDir, f), 'utf8'), f).not.toContain(secret);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8'));
    expect(manifest.config.cluster.database).toBe(url.href.replace(`:${url.password}@`, ':***@'));
    expect(manifest.config.notify.webhook).toBe('http://127.0.0.1:9/***');
    const db = await openDatabase(server.url);
    try {
      const stored = await db.client.query<{ name: string; body: string }>(
        "select name, body from tron_run_files where repository = 'secret'",
      );
      expect(stored.rows.map((r) => r.name).sort()).toEqual(['manifest.json', 'workflow.toml']);
      const lines = await runLines(db, { repository: 'secret', run: runId! });
      for (const text of [...stored.rows.map((r) => r.body), ...lines, run.stdout, run.stderr])
        for (const secret of secrets) expect(text).not.toContain(secret);
    } finally {
      await db.end();
    }
  }, 120_000);

  it('refuses a second engine on the repository while the lease is live, changing nothing', async () => {
    const repo = await clusterProject('held');
    const db = await openDatabase(server.url);
    const lease = await acquireLease(db, { repository: 'held', periodMs: 60_000, holder: 'other-host pid 4242' });
    try {
      const refused = await cli(['start', '--repo', repo.dir]);
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain('TRON_LEASE_HELD');
      expect(refused.stderr).toContain('other-host pid 4242');
      expect(refused.stderr).not.toMatch(/\n\s+at /);
      expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
    } finally {
      await lease.release();
      await db.end();
    }
  }, 60_000);

  it('has a standby take over from an engine killed mid-run, resume through recovery, and land each block once', async () => {
    // Workers whose every step is idempotent, so a re-dispatched turn does the right thing (engine/testing/crash.ts).
    const repo = await hosts.crashProject({ database: server.url, repository: 'takeover', lease: '1s' });
    // The leader dies abruptly (SIGKILL) right after its 12th line: its lease is no longer renewed.
    const leader = await cli(['start', '--repo', repo.dir, '--plain'], { TRON_CRASH_AFTER_EVENT: '12' });
    expect(leader.signal).toBe('SIGKILL');
    const standby = await cli(['start', '--repo', repo.dir, '--plain', '--standby']);
    expect(standby.stderr).toBe('');
    expect(standby.exitCode, standby.stdout).toBe(0);
    const landed = (await repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
    expect(landed).toEqual(['tron/landed/alpha', 'tron/landed/beta', 'tron/landed/gamma']);
    const subjects = (await repo.git('log', '--format=%s', 'main')).split('\n');
    for (const id of ['alpha', 'beta', 'gamma'])
      expect(
        subjects.filter((s) => s === `Build ${id}`),
        `${id} on trunk`,
      ).toHaveLength(1);
    const db = await openDatabase(server.url);
    try {
      const { rows } = await db.client.query<{ run: string; generation: string }>(
        `select distinct run, generation from tron_events where repository = 'takeover' order by run`,
      );
      // Two runs, two generations: the standby wrote with the next one, and began by recovering the first.
      expect(rows.map((r) => Number(r.generation))).toEqual([1, 2]);
      const second = (await readPgRun(db, { repository: 'takeover', run: rows[1]!.run }, undefined)).events;
      expect(second.some((e) => e.type === 'recovery.started')).toBe(true);
    } finally {
      await db.end();
    }
  }, 180_000);

  it('stops an engine whose lease was taken over: the database refuses its next line, and it exits naming TRON_LEASE_LOST', async () => {
    // A builder that holds its turn until the test lets it go: the steal happens while the engine waits on it.
    const { repo, go } = await hosts.heldProject({ database: server.url, repository: 'stolen', lease: '30s' });
    const db = await openDatabase(server.url);
    try {
      const engine = cli(['start', '--repo', repo.dir, '--plain']);
      // Wait on the log: the builder's process is up.
      await untilLine(db.client, { type: 'worker.spawned' }, { repository: 'stolen', engine });
      // Another engine takes the lease over (as after a lapse): generation 2.
      await db.client.query(`update tron_lease set expires_at = now() where repository = 'stolen'`);
      const thief = await acquireLease(db, { repository: 'stolen', periodMs: 60_000, holder: 'thief pid 1' });
      expect(thief.generation).toBe(2);
      const count = async () =>
        Number((await db.client.query(`select count(*) as n from tron_events where repository = 'stolen'`)).rows[0].n);
      const before = await count();
      writeFileSync(go, '');
      const ended = await engine;
      expect(ended.exitCode).toBe(1);
      expect(`${ended.stdout}\n${ended.stderr}`).toContain('TRON_LEASE_LOST');
      expect(`${ended.stdout}\n${ended.stderr}`).not.toMatch(/\n\s+at /);
      // Not one line of the old generation reached the table after the takeover.
      expect(await count()).toBe(before);
      await thief.release();
    } finally {
      await db.end();
    }
  }, 120_000);

  it('resumes from the table across starts: nothing to do for a parked block, and an answer consumed only once its line is committed', async () => {
    const repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
      config: configFile({ extra: `\n[cluster]\ndatabase = "${server.url}"\nrepository = "answers"\n` }),
    });
    hosts.adopt(repo);
    expect((await cli(['start', '--repo', repo.dir, '--plain'])).exitCode).toBe(3);
    // The next start reads the parked run from the table and has nothing to do.
    const idle = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(idle.exitCode).toBe(3);
    expect(idle.stdout).toContain('nothing to do — 0 landed, 1 parked, 0 abandoned');
    const answer = await cli(['answer', '--repo', repo.dir, 'stuck', '>>ABANDON {"reason":"out of scope"}']);
    expect(answer.exitCode, answer.stderr).toBe(0);
    const answered = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(answered.exitCode, answered.stdout).toBe(3);
    const db = await openDatabase(server.url);
    try {
      const at = await latestPgRun(db, 'answers');
      const types = (await readPgRun(db, at!, undefined)).events.map((e) => e.type);
      expect(types).toContain('block.abandoned');
      // The file went only after its answer's line was committed, and that is recorded after it.
      expect(types.indexOf('inbox.consumed')).toBeGreaterThan(types.indexOf('operator.answered'));
      expect(types.indexOf('operator.answered')).toBeGreaterThan(-1);
    } finally {
      await db.end();
    }
    expect(readdirSync(join(repo.dir, '.tron', 'inbox')).filter((f) => !f.startsWith('.'))).toEqual([]);
    const again = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(again.stdout).toContain('nothing to do — 0 landed, 0 parked, 1 abandoned');
  }, 180_000);

  it('has a standby wait while the lease is held, write nothing meanwhile, and start once it is let go', async () => {
    const repo = await clusterProject('waits');
    const db = await openDatabase(server.url);
    try {
      const lease = await acquireLease(db, { repository: 'waits', periodMs: 60_000, holder: 'leader-host pid 7' });
      const standby = cli(['start', '--repo', repo.dir, '--plain', '--standby']);
      // Wait on what it says: it names the leader it waits for.
      await hosts.said(standby, 'standby — leader-host pid 7 leads waits');
      expect(await latestPgRun(db, 'waits')).toBeUndefined();
      expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
      await lease.release();
      const done = await standby;
      expect(done.exitCode, `${done.stdout}\n${done.stderr}`).toBe(0);
      await landedOnce(repo, IDS);
      const { rows } = await db.client.query(`select distinct generation from tron_events where repository = 'waits'`);
      expect(rows.map((r) => Number(r.generation))).toEqual([lease.generation + 1]);
    } finally {
      await db.end();
    }
  }, 120_000);

  it('refuses --standby without a database, as a usage mistake', async () => {
    const repo = await makeProject({ blocks: { alpha: {} }, sim: landingSim(['alpha']) });
    hosts.adopt(repo);
    const refused = await cli(['start', '--repo', repo.dir, '--standby']);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('TRON_USAGE');
    expect(refused.stderr).toContain('[cluster] database');
    expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
  });

  it('refuses jobs on agents without a remote as a usage mistake, before any run directory is made', async () => {
    const noRemote = await makeProject({
      blocks: { alpha: {} },
      sim: landingSim(['alpha']),
      config: configFile({ extra: `\n[cluster]\ndatabase = "${server.url}"\nrepository = "no-remote"\njobs = "agents"\n` }),
    });
    hosts.adopt(noRemote);
    const refused = await cli(['start', '--repo', noRemote.dir]);
    expect(refused.exitCode, refused.stderr).toBe(2);
    expect(refused.stderr).toContain('TRON_USAGE: [cluster] jobs');
    expect(existsSync(join(noRemote.dir, '.tron', 'runs'))).toBe(false);
  });
});
