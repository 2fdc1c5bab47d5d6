/**
 * The operator's commands read where the run lives: with `[cluster] database`, a live run's
 * lines are only in the table, and several repositories may share the database. Against a
 * real PostgreSQL (engine/testing/postgres.ts), through the CLI.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterHosts, clusterLines, untilLine } from '../testing/cluster-hosts.ts';
import { configFile, makeProject } from '../testing/project.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';

const NO_DATABASE = skipWithoutPostgres("the operator's commands on a run in PostgreSQL");

describe.skipIf(NO_DATABASE)("the operator's commands on a run in the database", () => {
  const server = useTestDatabase();
  const hosts = clusterHosts();
  afterEach(() => hosts.end());

  const cli = (args: string[], o: { cwd?: string } = {}) => hosts.cli(args, { ...o, timeout: 120_000 });
  const clustered = (repository: string) => ({ database: server.url, repository });
  /** A `tron start --watch` the test stops with SIGTERM. */
  const watching = (dir: string) => hosts.cli(['start', '--watch', '--repo', dir], { timeout: 0, forceKillAfterDelay: false });

  it('status --database --repo shows that repository’s run, not the run another repository wrote last', async () => {
    const one = await hosts.landingProject(clustered('one'), ['alpha']);
    const two = await hosts.landingProject(clustered('two'), ['beta']);
    expect((await cli(['start', '--repo', one.dir])).exitCode).toBe(0);
    expect((await cli(['start', '--repo', two.dir])).exitCode).toBe(0);
    const other = hosts.folder('tron-other-host-');
    const narrowed = await cli(['status', '--database', server.url, '--repo', one.dir, '--json'], { cwd: other });
    expect(narrowed.exitCode, narrowed.stderr).toBe(0);
    expect(JSON.parse(narrowed.stdout)).toMatchObject({ repository: 'one', blocks: [{ block: 'alpha', phase: 'landed' }] });
    // Without --repo: the run written last in the whole database, as documented.
    const latest = await cli(['status', '--database', server.url, '--json'], { cwd: other });
    expect(JSON.parse(latest.stdout)).toMatchObject({ repository: 'two', blocks: [{ block: 'beta', phase: 'landed' }] });
  }, 180_000);

  it('tron answer takes an answer for a block parked in a live cluster run, and the run lands it', async () => {
    const repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"which API?"}'\n\n[[blocks.stuck.builder]]\nwrite = { "stuck.txt" = "done\\n" }\ncommit = "Unstuck"\nreply = ">>DONE"\n`,
      config: configFile({ extra: clusterLines(clustered('answered')) }),
    });
    hosts.adopt(repo);
    const engine = watching(repo.dir);
    const client = await hosts.connect(server.url);
    try {
      await untilLine(client, { like: '%"type":"page.sent"%' }, { repository: 'answered', engine });
      // The lease named another host (a leader elsewhere reads its own inbox): refused, nothing written here.
      const holder = (await client.query(`select holder from tron_lease where repository = 'answered'`)).rows[0].holder as string;
      await client.query(`update tron_lease set holder = 'db-host-2.example pid 4242' where repository = 'answered'`);
      const elsewhere = await cli(['answer', '--repo', repo.dir, 'stuck', '>>RETRY {"guidance":"from here"}']);
      expect(elsewhere.exitCode).toBe(2);
      expect(elsewhere.stderr).toContain('TRON_ANSWER_ELSEWHERE');
      expect(elsewhere.stderr).toContain('db-host-2.example pid 4242');
      expect(existsSync(join(repo.dir, '.tron', 'inbox')) ? readdirSync(join(repo.dir, '.tron', 'inbox')) : []).toEqual([]);
      await client.query('update tron_lease set holder = $1 where repository = $2', [holder, 'answered']);
      const answer = await cli(['answer', '--repo', repo.dir, 'stuck', '>>RETRY {"guidance":"use the v2 API"}']);
      expect(answer.exitCode, answer.stderr).toBe(0);
      expect(answer.stdout).toMatch(/stuck answered .*; the running engine \(.* generation 1\) reads it now/);
      await untilLine(client, { like: '%"type":"block.phase"%"block":"stuck"%"to":"landed"%' }, { repository: 'answered', engine });
      await untilLine(client, { like: '%"type":"operator.answered"%use the v2 API%' }, { repository: 'answered', engine });
      // Not parked any more: a second answer is refused, nothing written.
      const again = await cli(['answer', '--repo', repo.dir, 'stuck', '>>RETRY {"guidance":"again"}']);
      expect(again.exitCode).toBe(2);
      expect(again.stderr).toContain('TRON_ANSWER_NOT_PARKED');
    } finally {
      engine.kill('SIGTERM');
      await engine;
    }
  }, 180_000);

  it('a follower that loses the database says so with a database code, not as a failure of tron', async () => {
    const repo = hosts.adopt(await makeProject({ blocks: {}, config: configFile({ extra: clusterLines(clustered('followed')) }) }));
    const engine = watching(repo.dir);
    const client = await hosts.connect(server.url);
    try {
      await untilLine(client, { like: '%"type":"run.started"%' }, { repository: 'followed', engine });
      const follower = cli(['logs', '-f', '--database', server.url]);
      let heard = '';
      follower.stdout?.on('data', (chunk: Buffer) => (heard += chunk.toString()));
      for (let i = 0; i < 1200 && !heard.includes('tron: run '); i += 1) await new Promise((r) => setTimeout(r, 50));
      expect(heard).toContain('tron: run ');
      // Every other backend of the database ended, as a restart or an operator would.
      await client.query(
        'select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
      );
      const ended = await follower;
      expect(ended.exitCode).toBe(1);
      expect(ended.stderr).toMatch(
        /^tron logs: TRON_DB_READ_LOST: tron logs lost its connection to tron's database \(.+\); it changed nothing/m,
      );
      expect(ended.stderr).not.toContain('TRON_ENGINE_FAILED');
      expect(ended.stderr).not.toMatch(/\n\s+at /);
    } finally {
      engine.kill('SIGTERM');
      await engine;
    }
  }, 180_000);
});
