/**
 * Test runs on agents (`[cluster] jobs = "agents"`, `tron agent --roles …,test`), as the
 * CLI runs them, against a real PostgreSQL and a remote served by `git daemon`: the
 * engine observes the facts and builds the stacks, each suite goes to an agent — a gate's
 * through the block's work ref, a candidate's through `refs/tron/test/<sha>` — and the
 * engine lands only shas an agent tested. An agent killed
 * mid-test has its test run again as a new attempt; an agent that reports another sha is
 * not believed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import type { TestRun, TronEvent } from '../core/events.ts';
import { poolOf } from '../testing/pools.ts';
import { completeJob, STALE_ATTEMPT } from '../queue/pg-jobs.ts';
import type { Database } from '../log/pg-log.ts';
import { startWorkers } from '../queue/job-queue.ts';
import { type AgentCluster, agentCluster, CLUSTER_ENV as ENV } from '../testing/agent-cluster.ts';
import { BIN, leaderDiesUntilGone } from '../testing/crash.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { configFile, makeProject } from '../testing/project.ts';
import { approvingWorkers } from '../testing/workers.ts';

const NO_DATABASE = skipWithoutPostgres('test runs on tron agents');
const IDS = ['alpha', 'beta', 'gamma'];

/** A test of the repository that, the first time it runs anywhere on alpha's work, says its pid in `held` and sleeps until killed. */
const holdOnce = (held: string): string => `const fs = require('node:fs');
if (fs.existsSync(__dirname + '/../alpha.txt') && !fs.existsSync(${JSON.stringify(held)})) {
  fs.writeFileSync(${JSON.stringify(`${held}.tmp`)}, String(process.pid));
  fs.renameSync(${JSON.stringify(`${held}.tmp`)}, ${JSON.stringify(held)});
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000);
}
`;

/** The run's lines in the database, in order. */
async function events(db: Database, repository: string): Promise<TronEvent[]> {
  const { rows } = await db.client.query<{ line: string }>('select line from tron_events where repository = $1 order by run, seq', [
    repository,
  ]);
  return rows.map((r) => JSON.parse(r.line) as TronEvent);
}

/** Every test run the run recorded, with the sha it was of. */
function testRuns(all: readonly TronEvent[]): Array<{ type: string; sha: string; ok: boolean; tests: TestRun }> {
  const out: Array<{ type: string; sha: string; ok: boolean; tests: TestRun }> = [];
  for (const e of all) {
    if (e.type === 'facts.observed' && e.tests) out.push({ type: e.type, sha: e.head, ok: e.tests.exit === 0, tests: e.tests });
    if (e.type === 'candidate.tested' && e.tests) out.push({ type: e.type, sha: e.sha, ok: e.ok, tests: e.tests });
    if (e.type === 'trunk.tested') out.push({ type: e.type, sha: e.sha, ok: e.ok, tests: e.tests });
  }
  return out;
}

/** Every sha trunk was moved to passed a test run of exactly that sha, run by `by` (the agent's name, or the engine's: undefined). */
function expectLandingsTested(all: readonly TronEvent[], by: (ranOn: string | undefined) => boolean): void {
  const runs = testRuns(all);
  const intents = all.filter((e) => e.type === 'land.intent');
  expect(intents.length).toBeGreaterThan(0);
  for (const intent of intents) {
    const green = runs.filter((r) => r.sha === intent.sha && r.ok && by(r.tests.ran_on));
    expect(green.length, `a green run of ${intent.sha} before it landed`).toBeGreaterThan(0);
  }
}

describe.skipIf(NO_DATABASE)('test runs on tron agents', () => {
  const server = useTestDatabase();

  /** A project on a served remote, agents with `roles` each in its own clone, and `tron start`; removed after `body`. */
  async function withCluster(
    repository: string,
    roles: string[],
    files: (held: string) => Record<string, string>,
    body: (c: AgentCluster) => Promise<void>,
  ): Promise<void> {
    const c = await agentCluster({ database: server.url, repository, agents: roles, files, engine: true });
    try {
      await body(c);
      // Every block landed once, on the remote's trunk too; no test ref is left there.
      const landed = (await c.repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
      expect(landed).toEqual(IDS.map((id) => `tron/landed/${id}`));
      const subjects = (await c.bare.git('log', '--format=%s', 'main')).split('\n');
      for (const id of IDS) expect(subjects.filter((s) => s === `Build ${id}`)).toHaveLength(1);
      expect(await c.bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/test/')).toBe('');
    } finally {
      await c.stop();
    }
  }

  /** The test jobs of a repository's runs, in order. */
  async function testJobs(db: Database, repository: string) {
    const { rows } = await db.client.query<{ sha: string; worker: string; attempt: number; state: string; seq: number; run: string }>(
      `select request->>'sha' as sha, worker, attempt, state, seq, run from tron_jobs
        where repository = $1 and role = 'test' order by seq`,
      [repository],
    );
    return rows;
  }

  it('lands every block with every test run carried out by an agent, each of exactly the sha the engine pushed for it', async () => {
    await withCluster(
      'tests-on-agents',
      ['builder,reviewer,test', 'builder,reviewer,test'],
      () => ({}),
      async (c) => {
        const run = await c.engine;
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
        const all = await events(c.db, 'tests-on-agents');
        // Every suite the run believed was run by an agent, never by the engine, and none was refused.
        const runs = testRuns(all);
        expect(runs.filter((r) => r.type === 'facts.observed').length).toBeGreaterThanOrEqual(3);
        expect(runs.filter((r) => r.type === 'candidate.tested').length).toBeGreaterThanOrEqual(1);
        for (const r of runs) expect(r.tests.ran_on, `${r.type} at ${r.sha}`).toMatch(/^agent /);
        expect(all.filter((e) => e.type === 'tests.refused')).toEqual([]);
        expectLandingsTested(all, (ranOn) => ranOn?.startsWith('agent ') ?? false);
        // Each was handed out by a line of its own, whose job an agent completed.
        const queued = all.filter((e) => e.type === 'tests.queued');
        expect(queued.map((q) => q.sha).sort()).toEqual(runs.map((r) => r.sha).sort());
        // A gate's run is of the block's own work, fetched from its work ref; a stack's candidate is pushed for the agent.
        for (const q of queued) expect(q.ref).toBe(q.session === 'tests:gate' ? `refs/tron/work/${q.block}` : `refs/tron/test/${q.sha}`);
        expect(queued.filter((q) => q.session === 'tests:gate').length).toBeGreaterThanOrEqual(3);
        const jobs = await testJobs(c.db, 'tests-on-agents');
        expect(jobs.map((j) => j.seq)).toEqual(queued.map((q) => q.seq));
        for (const j of jobs) expect(j).toMatchObject({ state: 'done', worker: expect.stringMatching(/^agent /) });
        // The gate's and the lane's decisions are not jobs themselves: their engine part (git, the stacks) ran in the engine.
        const { rows } = await c.db.client.query<{ n: string }>(
          `select count(*) as n from tron_jobs where repository = 'tests-on-agents' and kind <> all($1::text[])`,
          [['block.dispatched', 'tests.queued']],
        );
        expect(rows[0]!.n).toBe('0');
        // The engine kept each agent's output in its run directory, under the name it gives a run of its own.
        const { rows: runIds } = await c.db.client.query<{ run: string }>(
          `select distinct run from tron_events where repository = 'tests-on-agents'`,
        );
        expect(runIds).toHaveLength(1);
        for (const r of runs) {
          const saved = readFileSync(join(c.repo.dir, '.tron', 'runs', runIds[0]!.run, r.tests.log), 'utf8');
          expect(saved).toMatch(new RegExp(`^# ran on ${r.tests.ran_on} \\(tron agent\\) at ${r.sha}`));
        }
      },
    );
  }, 300_000);

  it('runs the test of an agent killed mid-test again as a new attempt on another, refusing the dead attempt’s result', async () => {
    await withCluster(
      'test-agent-killed',
      ['builder,reviewer', 'test', 'test'],
      (held) => ({ 'tests/hold.test.js': holdOnce(held) }),
      async (c) => {
        // alpha's first test run, on whichever agent claimed it, hangs: that agent dies as a lost host would.
        while (!existsSync(c.held)) await new Promise((r) => setTimeout(r, 50));
        const { rows } = await c.db.client.query<{ worker: string; seq: number }>(
          `select worker, seq from tron_jobs where repository = 'test-agent-killed' and role = 'test' and state = 'running'
             and request->>'block' = 'alpha'`,
        );
        expect(rows).toHaveLength(1);
        const killed = rows[0]!;
        const agent = c.agentOf(killed.worker);
        expect(agent, `the agent running the test (${killed.worker})`).toBeDefined();
        agent!.kill('SIGKILL');
        // Without a sandbox its test process outlives it (bwrap's --die-with-parent would end it): ended as the host's would be.
        process.kill(Number(readFileSync(c.held, 'utf8')), 'SIGKILL');
        const run = await c.engine;
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
        const jobs = await testJobs(c.db, 'test-agent-killed');
        const again = jobs.find((j) => j.seq === killed.seq)!;
        expect(again.state).toBe('done');
        // (A busy machine may miss a live agent's heartbeat too: then a later attempt than the second.)
        expect(again.attempt).toBeGreaterThanOrEqual(2);
        expect(again.worker).not.toBe(killed.worker);
        expect(again.worker).toMatch(/^agent /);
        // The dead attempt's result, sent now (forged, or late from a host that comes back): refused in SQL.
        await expect(
          completeJob(
            c.db.client,
            await poolOf(c.db.client, 'a forger', 'test-agent-killed'),
            { repository: 'test-agent-killed', run: again.run, seq: again.seq },
            1,
            { ok: true, inputs: [] },
          ),
        ).rejects.toMatchObject({ code: STALE_ATTEMPT });
        const all = await events(c.db, 'test-agent-killed');
        // The run that came back is the second attempt's, of the sha that was asked for.
        const queued = all.find((e) => e.seq === killed.seq)!;
        expect(queued.type).toBe('tests.queued');
        const result = testRuns(all).find((r) => r.sha === (queued as { sha: string }).sha)!;
        expect(result.tests.ran_on).toBe(again.worker);
        expect(all.filter((e) => e.type === 'tests.refused')).toEqual([]);
        expectLandingsTested(all, (ranOn) => ranOn?.startsWith('agent ') ?? false);
      },
    );
  }, 300_000);

  it('ends on its agent the test run a SIGKILLed leader left running, once the next leader starts, and lands every block once', async () => {
    await withCluster(
      'test-orphaned',
      ['builder,reviewer', 'test'],
      (held) => ({ 'tests/hold.test.js': holdOnce(held) }),
      async (c) => {
        // alpha's first test run hangs (60 s) on the test agent; the leader dies, the agent lives on.
        while (!existsSync(c.held)) await new Promise((r) => setTimeout(r, 50));
        const test = Number(readFileSync(c.held, 'utf8'));
        // The next leader waits out the dead one's lease (10 s), then drops what it left; the agent ends the run.
        const { next, gone } = await leaderDiesUntilGone(c.engine, c.repo.dir, ENV, test, 40_000);
        expect(gone, `test process ${test}\n${c.said()}`).toBe(true);
        expect(c.outs[1]).toMatch(/no longer holds its job/);
        const run = await next;
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
      },
    );
  }, 300_000);

  it('refuses an agent’s report of a sha it was not asked to test, and runs that suite in the engine instead (the first test waiting, said, until an agent holds test)', async () => {
    const other = 'f'.repeat(40);
    let liar: { stop(): Promise<void> } | undefined;
    await withCluster(
      'test-agent-lies',
      ['builder,reviewer'],
      () => ({}),
      async (c) => {
        // No agent holds role test yet: the engine says so at its first test run, which waits in the queue.
        let said = '';
        c.engine.stdout!.on('data', (chunk: Buffer) => {
          said += chunk.toString();
        });
        while (!said.includes('no tron agent holds role test yet')) await new Promise((r) => setTimeout(r, 50));
        // Then one starts, which runs nothing and reports every test green — of another sha.
        liar = await startWorkers({
          url: server.url,
          repository: 'test-agent-lies',
          roles: ['test'],
          slots: 2,
          agent: 'agent liar',
          heartbeatMs: 500,
          run: async () => ({
            ok: true,
            inputs: [
              {
                sha: other,
                agent: 'agent liar',
                setup: null,
                tests: { exit: 0, timed_out: false, log: 'tests/x.log', tail: 'all green' },
                output: {},
              },
            ],
          }),
        });
        try {
          const run = await c.engine;
          expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${c.said()}`).toBe(0);
        } finally {
          await liar.stop();
        }
        const all = await events(c.db, 'test-agent-lies');
        const queued = all.filter((e) => e.type === 'tests.queued');
        const refused = all.filter((e) => e.type === 'tests.refused');
        expect(queued.length).toBeGreaterThanOrEqual(4);
        expect(refused.map((r) => r.sha)).toEqual(queued.map((q) => q.sha));
        for (const r of refused) {
          expect(r.agent).toBe('agent liar');
          expect(r.reason).toContain(`reported a run of ${other}, not of ${r.sha}`);
        }
        // Every suite believed was the engine's own, and every landing sha passed one.
        for (const r of testRuns(all)) expect(r.tests.ran_on).toBeUndefined();
        expectLandingsTested(all, (ranOn) => ranOn === undefined);
        const jobs = await testJobs(c.db, 'test-agent-lies');
        for (const j of jobs) expect(j).toMatchObject({ state: 'done', worker: 'agent liar' });
      },
    );
  }, 300_000);
});

describe('a host that only tests', () => {
  it('needs no worker CLI: the workers are checked only where turns are claimed', async () => {
    const repo = await makeProject({
      blocks: { alpha: {} },
      config: configFile({ workers: approvingWorkers('/nonexistent/worker-cli'), extra: '\n[remote]\n' }),
    });
    try {
      await repo.git('remote', 'add', 'origin', repo.dir);
      const agent = (roles: string) =>
        execa('node', [BIN, 'agent', '--repo', repo.dir, '--database', 'postgres://nobody@127.0.0.1:1/none', '--roles', roles], {
          env: ENV,
          reject: false,
          stdin: 'ignore',
        });
      const builder = await agent('builder,test');
      expect(builder.exitCode).toBe(2);
      expect(builder.stderr).toContain('TRON_WORKER_NOT_FOUND');
      // Past the check of the workers, to the database (which is not there).
      const tester = await agent('test');
      expect(tester.stderr).not.toContain('TRON_WORKER_NOT_FOUND');
      expect(tester.stderr).toContain('ECONNREFUSED 127.0.0.1:1');
    } finally {
      await repo.cleanup();
    }
  }, 60_000);
});
