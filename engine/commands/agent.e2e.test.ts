/**
 * `tron agent` as the CLI runs it, against a real PostgreSQL and a served remote: the
 * engine (`[cluster] jobs = "agents"`) decides, three agents — each in its own clone —
 * claim the turns, fetch the remote at the exact sha, build and review there and push the
 * builders' work back; the engine lands every block. An agent killed mid-turn has its
 * turn re-run by another as a new attempt; one paused past its heartbeats (its job
 * delivered twice) finds its late result refused; nothing is lost or landed twice, and a
 * forged result of a dead attempt is refused by the database.
 */
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { ResultPromise } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentCluster, agentCluster, CLUSTER_ENV as ENV, honestBuilder, sayPid } from '../testing/agent-cluster.ts';
import { clusterHosts } from '../testing/cluster-hosts.ts';
import { leaderDiesUntilGone } from '../testing/crash.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { configFile, landingSim, makeProject } from '../testing/project.ts';
import { poolOf } from '../testing/pools.ts';
import { completeJob, migrateJobs, STALE_ATTEMPT } from '../queue/pg-jobs.ts';
import { SCHEMA_VERSION } from '../schema/series.ts';
import { type Database, openDatabase } from '../log/pg-log.ts';

const NO_DATABASE = skipWithoutPostgres('tron agent with [cluster] database');
const IDS = ['alpha', 'beta', 'gamma'];

/** alpha's first turn says it started (its pid in `held`), then either hangs until killed (`hang`) or takes `slow` seconds before it builds. */
function alphaFirst(held: string, first: 'hang' | { slow: number }): string {
  return `echo "alpha is thinking"
  ${sayPid(held)}
  ${first === 'hang' ? 'exec sleep 60' : `sleep ${first.slow}`}`;
}

interface Cluster extends AgentCluster {
  /** The agent holding alpha's first build now, and its name in tron_jobs. */
  holdingAlpha(): Promise<{ agent: ResultPromise; worker: string }>;
}

describe.skipIf(NO_DATABASE)('tron agent with [cluster] database', () => {
  const server = useTestDatabase();
  const hosts = clusterHosts();
  afterEach(() => hosts.end());
  /** `tron <args>` as a host of the cluster runs it. */
  const cli = (args: string[], timeout?: number) => hosts.cli(args, { env: ENV, ...(timeout && { timeout }) });

  /** A project on a served remote, three agents in their own clones, and `tron start`; removed after `body`. */
  async function withCluster(
    repository: string,
    first: 'hang' | { slow: number },
    body: (c: Cluster) => Promise<void>,
    lease = '10s',
  ): Promise<void> {
    const cluster = await agentCluster({
      database: server.url,
      repository,
      agents: ['builder,reviewer,test', 'builder,reviewer,test', 'builder,reviewer,test'],
      builder: (held) => honestBuilder({ held, run: alphaFirst(held, first) }),
      lease,
      engine: true,
    });
    try {
      const holdingAlpha = async () => {
        while (!existsSync(cluster.held)) await new Promise((r) => setTimeout(r, 50));
        const { rows } = await cluster.db.client.query<{ worker: string }>(
          `select worker from tron_jobs where repository = $1 and kind = 'block.dispatched' and state = 'running'
             and request->'decision'->>'block' = 'alpha'`,
          [repository],
        );
        expect(rows).toHaveLength(1);
        const agent = cluster.agentOf(rows[0]!.worker)!;
        expect(agent, `the agent holding alpha (${rows[0]!.worker})`).toBeDefined();
        return { agent, worker: rows[0]!.worker };
      };
      await body(Object.assign(cluster, { holdingAlpha }));
      // Every block landed once, on the remote's trunk too.
      const landed = (await cluster.repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
      expect(landed).toEqual(IDS.map((id) => `tron/landed/${id}`));
      const subjects = (await cluster.bare.git('log', '--format=%s', 'main')).split('\n');
      for (const id of IDS)
        expect(
          subjects.filter((s) => s === `Build ${id}`),
          `${id} on the remote's trunk`,
        ).toHaveLength(1);
    } finally {
      await cluster.stop();
    }
  }

  /** The turn jobs of a repository's runs, in order. */
  async function turns(db: Database, repository: string) {
    const { rows } = await db.client.query<{
      block: string;
      role: string;
      worker: string;
      attempt: number;
      state: string;
      seq: number;
      run: string;
    }>(
      `select request->'decision'->>'block' as block, role, worker, attempt, state, seq, run from tron_jobs
        where repository = $1 and kind = 'block.dispatched' order by seq`,
      [repository],
    );
    return rows;
  }

  it('runs every turn and test run as a job of the engine’s own process when no agents are asked for', async () => {
    const repo = await hosts.landingProject({ database: server.url, repository: 'here' }, IDS);
    const db = await hosts.connect(server.url);
    const run = await cli(['start', '--repo', repo.dir, '--plain']);
    expect(run.exitCode, run.stdout).toBe(0);
    const { rows } = await db.query<{ kind: string; role: string; worker: string; attempt: number; state: string }>(
      `select kind, role, worker, attempt, state from tron_jobs where repository = 'here'`,
    );
    const kinds = new Set(rows.map((r) => r.kind));
    expect(kinds).toContain('block.dispatched');
    expect(kinds).toContain('facts.requested');
    expect(kinds).toContain('candidate.requested');
    for (const r of rows) expect(r).toMatchObject({ attempt: 1, state: 'done', worker: expect.stringMatching(/^engine /) });
    // Each job's decision is in the log, and each decision of those kinds has its job.
    const { rows: lines } = await db.query<{ n: string }>(
      `select count(*) as n from tron_events e where e.repository = 'here' and not exists
         (select 1 from tron_jobs j where j.repository = e.repository and j.run = e.run and j.seq = e.seq)
         and e.line::jsonb->>'type' in ('block.dispatched', 'facts.requested', 'candidate.requested', 'bisect.step', 'test.requested')`,
    );
    expect(lines[0]!.n).toBe('0');
  }, 120_000);

  it('refuses unknown roles for an agent as a usage mistake, before reaching the database — and says so when no database answers', async () => {
    const repo = hosts.adopt(await makeProject({ blocks: { alpha: {} }, sim: landingSim(['alpha']) }));
    for (const roles of ['builder,gardener', 'tester']) {
      const refused = await cli(['agent', '--repo', repo.dir, '--database', 'postgres://nobody@127.0.0.1:1/none', '--roles', roles]);
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain('TRON_USAGE');
      expect(refused.stderr).toContain('--roles');
    }
    // Roles it knows, and no database at the URL: said as such, the password hidden.
    const clone = hosts.adopt(await makeProject({ blocks: { alpha: {} }, config: configFile({ extra: '\n[remote]\n' }) }));
    await clone.git('remote', 'add', 'origin', repo.dir);
    const away = await cli(['agent', '--repo', clone.dir, '--database', 'postgres://nobody:secret@127.0.0.1:1/none']);
    expect(away.exitCode).toBe(1);
    expect(away.stderr).toContain('TRON_DB_UNREACHABLE: cannot reach the database at postgres://nobody:***@127.0.0.1:1/none');
    expect(away.stderr).not.toContain('secret');
  }, 60_000);

  it('refuses, with exit 2 and a clear message, a job queue a newer tron migrated, and claims nothing', async () => {
    const db = await openDatabase(server.url);
    await migrateJobs(db);
    const newer = SCHEMA_VERSION + 1;
    await db.client.query('insert into tron_schema (version) values ($1)', [newer]);
    const origin = hosts.adopt(await makeProject({ blocks: { alpha: {} }, sim: landingSim(['alpha']) }));
    const clone = hosts.adopt(await makeProject({ blocks: { alpha: {} }, config: configFile({ extra: '\n[remote]\n' }) }));
    try {
      await clone.git('remote', 'add', 'origin', origin.dir);
      const agent = cli(['agent', '--repo', clone.dir, '--database', server.url], 30_000);
      const refused = await agent;
      expect(refused.exitCode, refused.stderr).toBe(2);
      expect(refused.stderr).toContain('TRON_DB_SCHEMA_NEWER');
      expect(refused.stderr).toContain(`(tron_schema) is version ${newer}, and this tron knows up to ${SCHEMA_VERSION}`);
      expect(refused.stderr).toContain('upgrade tron on this host');
      expect(refused.stderr).not.toMatch(/\n\s+at /);
      // It never joined the agents (an agent's name: its host and pid).
      const { rows } = await db.client.query(`select count(*)::int as n from tron_agents where worker = $1`, [
        `agent ${hostname()} pid ${agent.pid}`,
      ]);
      expect(rows[0].n).toBe(0);
    } finally {
      await db.client.query('delete from tron_schema where version = $1', [newer]);
      await db.end();
    }
  }, 60_000);

  it('lands every block with three agents in their own clones, re-running a killed agent’s turn as a new attempt and refusing its late result', async () => {
    await withCluster('agents', 'hang', async (c) => {
      // alpha's builder hangs on whichever agent claimed it: what it printed reaches the engine's host meanwhile.
      const holding = await c.holdingAlpha();
      const live = async () => (await cli(['logs', '--repo', c.repo.dir, 'alpha'])).stdout;
      let seen = await live();
      for (let i = 0; i < 100 && !seen.includes('alpha is thinking'); i += 1) {
        await new Promise((r) => setTimeout(r, 100));
        seen = await live();
      }
      expect(seen).toMatch(/» run on agent [^;]+; its output as it came[^\n]*\nalpha is thinking/);
      // And on a host without the repository, through the database, as it runs.
      const following = hosts.cli(['logs', '-f', '--database', server.url, 'alpha'], { env: ENV, cwd: hosts.folder('tron-logs-away-') });
      const followed = () => hosts.output(following);
      for (let i = 0; i < 100 && !followed().includes('alpha is thinking'); i += 1) await new Promise((r) => setTimeout(r, 100));
      following.kill('SIGTERM');
      await following;
      expect(followed()).toMatch(
        /── alpha · builder · build · [^\n]*\n» run on agent [^;]+; its output as it came[^\n]*\nalpha is thinking/,
      );
      // Then that agent dies as a lost host would.
      holding.agent.kill('SIGKILL');
      process.kill(Number(readFileSync(c.held, 'utf8')), 'SIGKILL');
      const run = await c.engine;
      expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
      // Every turn ran on an agent; alpha's first build as a second attempt, on another agent.
      const all = await turns(c.db, 'agents');
      expect(all.length).toBeGreaterThanOrEqual(6);
      for (const t of all) {
        expect(t.state).toBe('done');
        expect(t.worker).toMatch(/^agent /);
      }
      const alpha = all.find((t) => t.block === 'alpha' && t.role === 'builder')!;
      expect(alpha.attempt).toBe(2);
      expect(alpha.worker).not.toBe(holding.worker);
      // The dead attempt's result, sent now (forged, or late from a host that comes back): refused in SQL.
      await expect(
        completeJob(
          c.db.client,
          await poolOf(c.db.client, 'a forger', 'agents', { roles: ['builder'] }),
          { repository: 'agents', run: alpha.run, seq: alpha.seq },
          1,
          { ok: true, inputs: [{ type: 'forged' }] },
        ),
      ).rejects.toMatchObject({ code: STALE_ATTEMPT });
      // The builders' work went through the remote, and its refs went with the blocks' landing (effects/work-ref.ts).
      const works = (await c.bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/work/')).split('\n').filter(Boolean);
      expect(works).toEqual([]);
      // What each turn printed on its agent is read on the engine's host: its end came back with the result.
      const logs = await cli(['logs', '--repo', c.repo.dir, 'beta']);
      expect(logs.exitCode, logs.stderr).toBe(0);
      expect(logs.stdout).toMatch(
        /── beta · builder · build · .* turn 1 · .*──\n» run on agent [^;]+; (all of it here|its output as it came)/,
      );
      expect(logs.stdout).toContain('>>DONE');
      expect(logs.stdout).toContain('>>APPROVE');
      // alpha's first build: what the dead attempt printed, then the second attempt's whole output, each under its agent.
      const alphaLogs = (await cli(['logs', '--repo', c.repo.dir, 'alpha'])).stdout;
      expect(alphaLogs).toMatch(/alpha is thinking\n\n» run on agent [^;]+ \(attempt 2\); its output as it came[^\n]*\n(.*\n)*>>DONE/);
      // Kept in the turn's file, the streamed output leaves the database.
      const { rows: notes } = await c.db.client.query(`select count(*)::int as n from tron_job_notes where body ->> 'kind' = 'output'`);
      expect(notes[0].n).toBe(0);
      // And from any host, through the database: the end each agent sent with its result.
      const elsewhere = hosts.folder('tron-logs-elsewhere-');
      const read = await hosts.cli(['logs', '--database', server.url, '--run', alpha.run, 'beta'], { env: ENV, cwd: elsewhere });
      expect(read.exitCode, read.stderr).toBe(0);
      expect(read.stdout).toMatch(/── beta · builder · build · .* turn 1 · .*──\n» run on agent [^;]+; the end of its output/);
      expect(read.stdout).toContain('>>DONE');
      expect(read.stdout).not.toContain("on the engine's host");
    });
  }, 300_000);

  it('stops on its agent the turn a SIGKILLed leader left running as soon as the next leader starts, and lands every block once', async () => {
    await withCluster(
      'orphaned',
      'hang',
      async (c) => {
        // alpha's builder hangs on an agent (sleep 60); the leader dies, the agent lives on.
        const holding = await c.holdingAlpha();
        const worker = Number(readFileSync(c.held, 'utf8'));
        // The next leader (a standby: it waits out the dead one's lease) drops what it left: the
        // worker is gone within seconds of the takeover — not at its 60 s sleep's end, nor the turn's timeout.
        const { next, gone } = await leaderDiesUntilGone(c.engine, c.repo.dir, ENV, worker, 20_000);
        expect(gone, `worker ${worker}\n${c.said()}`).toBe(true);
        const index = c.agents.indexOf(holding.agent);
        expect(c.outs[index]).toMatch(/no longer holds its job; its turn is stopped/);
        const run = await next;
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
        const { rows } = await c.db.client.query(
          `select count(*)::int as n from tron_jobs where repository = 'orphaned' and state = 'dropped'`,
        );
        expect(rows[0].n).toBeGreaterThanOrEqual(1);
      },
      '2s',
    );
  }, 300_000);

  it('re-runs the turn of an agent paused past its heartbeats, and refuses its result when it wakes: the job delivered twice lands once', async () => {
    await withCluster('paused', { slow: 3 }, async (c) => {
      // alpha's first builder takes 3 s; its agent is paused meanwhile, as a host cut off from the database.
      const holding = await c.holdingAlpha();
      holding.agent.kill('SIGSTOP');
      const run = await c.engine;
      expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
      const alpha = (await turns(c.db, 'paused')).find((t) => t.block === 'alpha' && t.role === 'builder')!;
      expect(alpha).toMatchObject({ attempt: 2, state: 'done' });
      expect(alpha.worker).not.toBe(holding.worker);
      // Woken, the paused agent finishes its attempt and reports: the database refuses it, and it says so.
      holding.agent.kill('SIGCONT');
      const index = c.agents.indexOf(holding.agent);
      while (!/was refused/.test(c.outs[index]!)) await new Promise((r) => setTimeout(r, 50));
      expect(c.outs[index]).toContain(`the result of job ${alpha.seq} attempt 1 was refused`);
      const after = (await turns(c.db, 'paused')).find((t) => t.seq === alpha.seq)!;
      expect(after).toMatchObject({ attempt: 2, state: 'done', worker: alpha.worker });
    });
  }, 300_000);

  it('loses nothing and lands nothing twice when an agent dies mid-turn and then the engine, a standby taking over', async () => {
    await withCluster(
      'takeover',
      'hang',
      async (c) => {
        const holding = await c.holdingAlpha();
        holding.agent.kill('SIGKILL');
        process.kill(Number(readFileSync(c.held, 'utf8')), 'SIGKILL');
        // Once alpha's build is given to another agent, the engine dies as a lost host would.
        for (;;) {
          const alpha = (await turns(c.db, 'takeover')).find((t) => t.block === 'alpha' && t.role === 'builder');
          if (alpha && alpha.attempt >= 2) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        c.engine.kill('SIGKILL');
        expect((await c.engine).signal).toBe('SIGKILL');
        const standby = await c.start({ args: ['--standby'] });
        expect(standby.exitCode, `${standby.stdout}\n${standby.stderr}\n${c.said()}`).toBe(0);
        // Two generations wrote; every job the standby waited on was run by an agent and done.
        const { rows } = await c.db.client.query<{ generation: string; state: string; n: string }>(
          `select generation, state, count(*) as n from tron_jobs where repository = 'takeover' group by generation, state order by generation, state`,
        );
        expect(new Set(rows.map((r) => Number(r.generation)))).toEqual(new Set([1, 2]));
        expect(rows.filter((r) => Number(r.generation) === 2).map((r) => r.state)).toEqual(['done']);
      },
      '1s',
    );
  }, 300_000);
});
