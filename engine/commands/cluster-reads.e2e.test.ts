/**
 * The commands that read runs — `logs`, `replay`, `view`, `status` — read the log in
 * PostgreSQL from any host (a folder with no repository at all stands for another host),
 * and say of it exactly what they say of the same run's file log; while a run is live too.
 * Against a real PostgreSQL (engine/testing/postgres.ts), through the CLI.
 */
import { readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { configFile, landingSim, makeProject } from '../testing/project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { clusterHosts, untilLine } from '../testing/cluster-hosts.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { SCHEMA_VERSION } from '../schema/series.ts';
import { serveCommand } from './serve.ts';
import { systemClock } from '../os/clock.ts';
import { readSse } from '../testing/sse.ts';
import { getMetricsFromIterator, type PromData } from 'prom2javascript';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');
const NO_DATABASE = skipWithoutPostgres('reading the log in PostgreSQL from any host');

describe.skipIf(NO_DATABASE)('reading runs from the database', () => {
  const server = useTestDatabase();
  const hosts = clusterHosts();
  afterEach(async () => {
    await hosts.end();
    // tron view's folder for runs read from a database, once this test's page is gone from it.
    rmdirIfEmpty(join(tmpdir(), 'tron-view'));
  });

  /** A folder with no repository: the other host's working directory. */
  const elsewhere = () => hosts.folder('tron-other-host-');
  const cli = (args: string[], o: { cwd?: string; env?: Record<string, string> } = {}) => hosts.cli(args, { ...o, timeout: 120_000 });

  /** `tron serve` in this process until `use` is done: its URL and token. */
  async function serving<T>(
    o: { repo: string; database?: string; repoGiven?: boolean; env?: Record<string, string> },
    use: (url: string, token: string) => Promise<T>,
  ): Promise<T> {
    const stop = new AbortController();
    let ready!: (v: { url: string; token: string }) => void;
    const listening = new Promise<{ url: string; token: string }>((r) => (ready = r));
    const done = serveCommand({
      repo: o.repo,
      port: 0,
      clock: systemClock,
      env: o.env ?? {},
      print: () => undefined,
      signal: stop.signal,
      ...(o.database !== undefined ? { database: o.database } : {}),
      repoGiven: o.repoGiven ?? true,
      onListening: (s, token) => ready({ url: s.url, token }),
    });
    const { url, token } = await Promise.race([listening, done.then(() => Promise.reject(new Error('serve ended')))]);
    try {
      return await use(url, token);
    } finally {
      stop.abort();
      await done;
    }
  }

  const api = async (url: string, token: string, path: string, init: RequestInit = {}) => {
    const res = await fetch(`${url}api/v1/${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  /** What the API says of a run, without what moves with the clock. */
  async function apiView(url: string, token: string, run: string) {
    const state = (await api(url, token, 'state')).json;
    const { now: _now, ...rest } = state;
    const blocks = (rest.blocks as Record<string, unknown>[]).map(({ age: _age, ...b }) => b);
    const stream = await readSse(`${url}api/v1/events`, { token, until: (m) => m.data.includes('"run.finished"') });
    return {
      state: { ...rest, blocks },
      frames: stream.messages.map((m) => [m.id, m.data]),
      events: (await api(url, token, `runs/${run}/events`)).json,
      flows: (await api(url, token, 'flows')).json,
    };
  }

  it('says of a run in the database what logs, replay and view say of its file log, from the engine’s host and from another', async () => {
    const ids = ['alpha', 'beta'];
    const repo = await makeProject({
      blocks: { alpha: {}, beta: { depends_on: ['alpha'] }, stuck: {} },
      sim: `${landingSim(ids)}\n[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
      config: configFile({ extra: '\n[cluster]\nrepository = "same-output"\n' }),
    });
    hosts.adopt(repo);
    // The database comes from the environment this time (TRON_DATABASE_URL), as an operator may give it.
    const env = { TRON_DATABASE_URL: server.url };
    const run = await cli(['start', '--repo', repo.dir, '--plain'], { env });
    expect(run.exitCode, `${run.stdout}\n${run.stderr}`).toBe(3);
    const [runId] = readdirSync(join(repo.dir, '.tron', 'runs'));
    const runDir = join(repo.dir, '.tron', 'runs', runId!);
    const other = elsewhere();
    const db = ['--database', server.url];

    // logs: the run's events as lines.
    const fromFile = await cli(['logs', '--run', runDir], { cwd: other });
    expect(fromFile.exitCode, fromFile.stderr).toBe(0);
    expect(fromFile.stdout).toContain('stuck is parked');
    const fromDb = await cli(['logs', ...db], { cwd: other });
    expect(fromDb.exitCode, fromDb.stderr).toBe(0);
    // The other host has no run directory to name; every line else is the same.
    expect(fromDb.stdout).toBe(fromFile.stdout.replaceAll(`; run directory: ${runDir}`, '').replaceAll(`${runDir}/`, ''));
    // On the engine's host the repository's database is read without being named, and says it all the same.
    const atHome = await cli(['logs', '--repo', repo.dir], { env });
    const atHomeFile = await cli(['logs', '--repo', repo.dir, '--run', runDir]);
    expect(atHome.stdout).toBe(atHomeFile.stdout);
    // One block's turns: the engine's host shows their output; another host the same headers.
    const alphaFile = await cli(['logs', '--repo', repo.dir, '--run', runDir, 'alpha']);
    const alphaDb = await cli(['logs', '--repo', repo.dir, 'alpha'], { env });
    expect(alphaDb.exitCode, alphaDb.stderr).toBe(0);
    expect(alphaDb.stdout).toBe(alphaFile.stdout);
    const alphaOther = await cli(['logs', ...db, 'alpha'], { cwd: other });
    expect(alphaOther.stdout.split('\n').filter((l) => l.startsWith('── '))).toEqual(
      alphaFile.stdout.split('\n').filter((l) => l.startsWith('── ')),
    );
    expect(alphaOther.stdout).toContain("the turn's output is on the engine's host");

    // report: the same statistics, on the engine's host from the repository's database and from another host.
    const reportFile = await cli(['report', runDir], { cwd: other });
    expect(reportFile.exitCode, reportFile.stderr).toBe(0);
    expect((await cli(['report', '--repo', repo.dir], { env })).stdout).toBe(reportFile.stdout);
    expect((await cli(['report', ...db], { cwd: other })).stdout).toBe(reportFile.stdout);

    // replay: the same decisions from the same spine and manifest, which the table holds too.
    const replayFile = await cli(['replay', runDir], { cwd: other });
    expect(replayFile.exitCode, replayFile.stdout).toBe(0);
    const replayDb = await cli(['replay', ...db, runId!], { cwd: other });
    expect(replayDb.exitCode, `${replayDb.stdout}\n${replayDb.stderr}`).toBe(0);
    const verdict = (out: string) => out.replace(/^replay: .*?: (\d+ inputs)/, '$1');
    expect(verdict(replayDb.stdout)).toBe(verdict(replayFile.stdout));
    expect(replayDb.stdout).toContain(`same-output/${runId}`);
    expect(replayDb.stdout).not.toContain(runDir);

    // view: the same page.
    const viewFile = await cli(['view', runDir], { cwd: other });
    expect(viewFile.exitCode, viewFile.stderr).toBe(0);
    const viewDb = await cli(['view', ...db], { cwd: other });
    expect(viewDb.exitCode, viewDb.stderr).toBe(0);
    const pageDb = viewDb.stdout.split('\n')[0]!;
    expect(pageDb).not.toContain(repo.dir);
    hosts.removeAtEnd(join(tmpdir(), 'tron-view', 'same-output'));
    expect(readFileSync(pageDb, 'utf8')).toBe(readFileSync(join(runDir, 'view', 'index.html'), 'utf8'));

    // serve: the same state, the same stream, the same run; and no answer from another host.
    const viaFile = await serving({ repo: repo.dir }, (url, token) => apiView(url, token, runId!));
    expect((viaFile.state.blocks as { block: string; phase: string }[]).map((b) => b.phase).sort()).toEqual(['landed', 'landed', 'parked']);
    expect(viaFile.frames.length).toBeGreaterThan(10);
    const viaDb = await serving({ repo: other, database: server.url, repoGiven: false }, async (url, token) => {
      const answer = await api(url, token, 'blocks/stuck/answer', {
        method: 'POST',
        body: JSON.stringify({ reply: '>>ABANDON {"reason":"no"}' }),
      });
      expect(answer.status).toBe(409);
      expect((answer.json.error as { code: string }).code).toBe('TRON_SERVE_READ_ONLY');
      return apiView(url, token, runId!);
    });
    expect(viaDb).toEqual(viaFile);

    // A later run in which alpha had no turn: `logs alpha` still shows the run in which it had, as from the files.
    expect((await cli(['answer', '--repo', repo.dir, 'stuck', '>>ABANDON {"reason":"out of scope"}'])).exitCode).toBe(0);
    expect((await cli(['start', '--repo', repo.dir, '--plain'], { env })).exitCode).toBe(3);
    expect(readdirSync(join(repo.dir, '.tron', 'runs'))).toHaveLength(2);
    const alphaLater = await cli(['logs', '--repo', repo.dir, 'alpha'], { env });
    expect(alphaLater.stdout).toBe(alphaFile.stdout);
    const alphaLaterFile = await cli(['logs', '--repo', repo.dir, 'alpha']);
    expect(alphaLaterFile.stdout).toBe(alphaFile.stdout);

    // A run id the database does not hold is said as the file commands say it.
    const none = await cli(['replay', ...db, '20000101-000000-001'], { cwd: other });
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toContain('TRON_RUN_NOT_FOUND');
    expect(none.stderr).not.toMatch(/\n\s+at /);
  }, 180_000);

  it('shows the live run from another host while it runs: status, logs and replay read it, and logs -f follows it to its end', async () => {
    const { repo, go } = await hosts.heldProject({ database: server.url, repository: 'live' });
    const engine = cli(['start', '--repo', repo.dir, '--plain']);
    const client = await hosts.connect(server.url);
    const other = elsewhere();
    try {
      // Wait on the log: the builder is at work.
      await untilLine(client, { type: 'worker.spawned' }, { repository: 'live', engine });
      // From another host, no repository: the run is live, its engine named, the block building.
      const status = await cli(['status', '--database', server.url, '--json'], { cwd: other });
      expect(status.exitCode, status.stderr).toBe(0);
      const json = JSON.parse(status.stdout) as {
        engine: string;
        leader: { generation: number };
        blocks: { block: string; phase: string }[];
      };
      expect(json.engine).toBe('running');
      expect(json.leader.generation).toBe(1);
      expect(json.blocks.map((b) => [b.block, b.phase])).toEqual([['alpha', 'build']]);
      const text = await cli(['status', '--database', server.url], { cwd: other });
      expect(text.stdout).toMatch(/^run \S+ \(running: .* generation 1\) — live in postgres:/m);
      // Its events so far, and a replay of them (a live log is replayed up to its last input).
      const logs = await cli(['logs', '--database', server.url], { cwd: other });
      expect(logs.stdout).toContain('alpha');
      const replay = await cli(['replay', '--database', server.url], { cwd: other });
      expect(replay.exitCode, replay.stdout).toBe(0);
      expect(replay.stdout).toContain('identical (the log ends without run.finished');
      // On the engine's host, status reads the live run from the database too (its run directory has no log yet).
      const home = await cli(['status', '--repo', repo.dir, '--json']);
      expect(JSON.parse(home.stdout)).toMatchObject({ engine: 'running', blocks: [{ block: 'alpha', phase: 'build' }] });
      // A follower from the other host, then the builder let go: it follows to run.finished and stops.
      const follower = cli(['logs', '-f', '--database', server.url], { cwd: other });
      // And the dashboard's API on the engine's host, from the repository's database: the live run, streamed to its end.
      const streamed = serving({ repo: repo.dir }, async (url, token) => {
        const state = (await api(url, token, 'state')).json;
        expect(state).toMatchObject({ engine: 'running', blocks: [{ block: 'alpha', phase: 'build' }] });
        // Its metrics tell the lease the engine holds, and that the engine is up.
        const scraped = await fetch(`${url}metrics`, { headers: { authorization: `Bearer ${token}` } });
        const metrics = await getMetricsFromIterator((await scraped.text()).split('\n')[Symbol.iterator]());
        expect((metrics.tron_lease_generation?.data[0] as PromData | undefined)?.value).toBe(1);
        expect((metrics.tron_engine_up?.data[0] as PromData | undefined)?.value).toBe(1);
        writeFileSync(go, '');
        return readSse(`${url}api/v1/events`, { token, until: (m) => m.data.includes('"run.finished"') });
      });
      const frames = (await streamed).messages;
      expect(frames.map((m) => Number(m.id))).toEqual(frames.map((_, i) => i + 1));
      expect(frames.at(-1)!.data).toContain('"run.finished"');
      const ended = await engine;
      expect(ended.exitCode, ended.stdout).toBe(0);
      const followed = await follower;
      expect(followed.exitCode, followed.stderr).toBe(0);
      const [runId] = readdirSync(join(repo.dir, '.tron', 'runs'));
      const runDir = join(repo.dir, '.tron', 'runs', runId!);
      const file = await cli(['logs', '--run', runDir], { cwd: other });
      expect(followed.stdout).toBe(file.stdout.replaceAll(`; run directory: ${runDir}`, '').replaceAll(`${runDir}/`, ''));
      const after = await cli(['status', '--database', server.url, '--json'], { cwd: other });
      expect(JSON.parse(after.stdout)).toMatchObject({ engine: 'finished', blocks: [{ block: 'alpha', phase: 'landed' }] });
    } finally {
      writeFileSync(go, '');
      await engine;
    }
  }, 180_000);

  it('refuses, with exit 2 and a clear message, a database whose schema a newer tron made — at start and at every read', async () => {
    const repo = await hosts.landingProject({ database: server.url, repository: 'newer' }, ['alpha']);
    const client = await hosts.connect(server.url);
    try {
      // The schema exists (a read migrates it), then a newer tron moves it on.
      expect((await cli(['status', '--database', server.url])).exitCode).toBe(0);
      await client.query('insert into tron_schema (version) values ($1)', [SCHEMA_VERSION + 1]);
      for (const args of [
        ['start', '--repo', repo.dir],
        ['status', '--database', server.url],
        ['logs', '--database', server.url],
        ['replay', '--repo', repo.dir],
      ]) {
        const refused = await cli(args);
        expect(refused.exitCode, args.join(' ')).toBe(2);
        expect(refused.stderr).toContain('TRON_DB_SCHEMA_NEWER');
        expect(refused.stderr).toContain(`version ${SCHEMA_VERSION + 1}, and this tron knows up to ${SCHEMA_VERSION}`);
        expect(refused.stderr).toContain('upgrade tron on this host');
        expect(refused.stderr).not.toMatch(/\n\s+at /);
      }
      // Nothing was written: no run, no lease.
      const { rows } = await client.query(`select count(*)::int as n from tron_lease where repository = 'newer'`);
      expect(rows[0].n).toBe(0);
      expect(readdirSync(join(repo.dir, '.tron')).includes('runs')).toBe(false);
    } finally {
      await client.query('delete from tron_schema where version = $1', [SCHEMA_VERSION + 1]);
    }
  }, 120_000);

  it('reads the run directories, not a database, where the repository names none and the environment is scrubbed', async () => {
    // The suite's setup removes an inherited TRON_DATABASE_URL (engine/testing/scrub-env.ts): a file run stays a file run.
    expect(process.env.TRON_DATABASE_URL).toBeUndefined();
    const repo = hosts.adopt(await makeProject({ blocks: { alpha: {} }, sim: landingSim(['alpha']) }));
    const run = await execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], {
      reject: false,
      stdin: 'ignore',
      env: GIT_IDENTITY_ENV,
    });
    expect(run.exitCode, run.stdout).toBe(0);
    const logs = await execa('node', [BIN, 'logs', '--repo', repo.dir], { reject: false, env: GIT_IDENTITY_ENV });
    expect(logs.exitCode, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('alpha');
    expect(readdirSync(join(repo.dir, '.tron', 'runs'))).toHaveLength(1);
  }, 120_000);
});

function rmdirIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // Not there, or another run's pages are in it.
  }
}
