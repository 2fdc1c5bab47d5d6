/**
 * The crash sweep across agents, through the CLI against a real PostgreSQL and a served
 * remote: a leader and a waiting standby (two engines, `[cluster] jobs = "agents"`) and
 * three `tron agent`s, each in its own clone. The agent that holds alpha's first build is
 * SIGKILLed mid-turn (its worker with it, as a lost host), and the leader is SIGKILLed at
 * an event boundary; the standby takes over. Nothing lost, nothing landed twice, every
 * landed sha green when tested again, and a forged late result of the dead agent's attempt
 * refused by the database.
 *
 * By default a short spread of boundaries (the whole suite stays short);
 * `TRON_CRASH_SWEEP=full` kills the leader at every boundary of a clean run.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { agentCluster, CLUSTER_ENV as ENV, honestBuilder, sayPid } from '../testing/agent-cluster.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import { poolOf } from '../testing/pools.ts';
import { completeJob, STALE_ATTEMPT } from '../queue/pg-jobs.ts';
import type { Database } from '../log/pg-log.ts';

const NO_DATABASE = skipWithoutPostgres('the crash sweep across agents');
const IDS = ['alpha', 'beta', 'gamma'];

type Line = Record<string, unknown> & { type: string; seq: number };

describe.skipIf(NO_DATABASE)('the crash sweep across two engines and three agents', () => {
  const server = useTestDatabase();
  let db: Database;
  beforeAll(async () => {
    db = await server.open();
  }, 60_000);

  /** Every line of the repository's runs in the table, oldest run first. */
  async function tableRuns(repository: string): Promise<Line[][]> {
    const { rows } = await db.client.query<{ run: string; line: string }>(
      'select run, line from tron_events where repository = $1 order by run, seq',
      [repository],
    );
    const runs = new Map<string, Line[]>();
    for (const r of rows) runs.set(r.run, [...(runs.get(r.run) ?? []), JSON.parse(r.line) as Line]);
    return [...runs.values()];
  }

  /**
   * A project on a served remote and three agents in their own clones. `crashAt`: the
   * leader dies at that event while a standby waits, and alpha's first build hangs and its
   * agent is SIGKILLed. Returns what the test checks after.
   */
  async function cluster(repository: string, crashAt: number | undefined): Promise<void> {
    // With `crashAt`, alpha's first build says its pid in `held` and hangs until killed.
    const c = await agentCluster({
      database: server.url,
      repository,
      agents: 3,
      builder: (held) => honestBuilder(crashAt === undefined ? undefined : { held, run: `${sayPid(held)}\n  exec sleep 120` }),
      lease: '1s',
    });
    const { repo, bare, held } = c;
    try {
      // The standby leads from a clone of its own, as on another host: the log, the key and the work come from the database and the remote.
      const standbyDir = await c.clone('standby');
      const start = (extra: string[], env: Record<string, string>, dir = repo.dir) => c.start({ args: extra, env, dir });
      if (crashAt === undefined) {
        const clean = await start([], {});
        expect(clean.exitCode, `${clean.stdout}\n${clean.stderr}\n${c.said()}`).toBe(0);
      } else {
        const leader = start([], { TRON_CRASH_AFTER_EVENT: String(crashAt) });
        // The leader holds the lease before it writes a line; the standby waits beside it.
        while (
          leader.exitCode === null &&
          leader.signalCode === null &&
          (await db.client.query('select 1 from tron_lease where repository = $1', [repository])).rows.length === 0
        )
          await new Promise((r) => setTimeout(r, 20));
        const standby = start(['--standby'], {}, standbyDir);
        // alpha's first build hangs on whichever agent claimed it (under the leader, or the standby): that agent dies as a lost host.
        while (!existsSync(held)) await new Promise((r) => setTimeout(r, 50));
        const { rows } = await db.client.query<{ worker: string; run: string; seq: number }>(
          `select worker, run, seq from tron_jobs where repository = $1 and kind = 'block.dispatched' and state = 'running'
             and request->'decision'->>'block' = 'alpha' and attempt = 1 order by seq limit 1`,
          [repository],
        );
        const holding = rows[0];
        expect(holding, 'the job of alpha’s first build, running').toBeDefined();
        if (holding) {
          c.agentOf(holding.worker)?.kill('SIGKILL');
        }
        process.kill(Number(readFileSync(held, 'utf8')), 'SIGKILL');
        const died = await leader;
        expect(died.signal, `the leader at event ${crashAt}: ${died.stdout}`).toBe('SIGKILL');
        const done = await standby;
        expect(done.exitCode, `the standby after a crash at event ${crashAt}: ${done.stdout}\n${done.stderr}\n${c.said()}`).toBe(0);
        if (holding) {
          // The dead agent's attempt, reported now (forged, or late from a host that comes back): refused in SQL.
          await expect(
            completeJob(
              db.client,
              await poolOf(db.client, `a forger ${crashAt}`, repository, { roles: ['builder'] }),
              { repository, run: holding.run, seq: holding.seq },
              1,
              { ok: true, inputs: [{ type: 'forged' }] },
            ),
          ).rejects.toMatchObject({ code: STALE_ATTEMPT });
        }
        const runs = await tableRuns(repository);
        expect(runs.at(-1)!.some((e) => e.type === 'recovery.started')).toBe(true);
        expect(JSON.stringify(runs.flat())).not.toContain('forged');
      }
      // The clone the last engine led from: the standby's after a crash.
      const last = crashAt === undefined ? repo.dir : standbyDir;
      const git = async (...args: string[]) => (await execa('git', args, { cwd: last, env: ENV })).stdout.trim();
      // Nothing lost, nothing landed twice: every block landed once, there and on the remote's trunk.
      const landed = (await git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
      expect(landed).toEqual(IDS.map((id) => `tron/landed/${id}`));
      const subjects = (await bare.git('log', '--format=%s', 'main')).split('\n');
      for (const id of IDS)
        expect(
          subjects.filter((s) => s === `Build ${id}`),
          `${id} on the remote's trunk`,
        ).toHaveLength(1);
      // Each block's landing is recorded once: by the run that landed it, or by the standby's recovery
      // when the leader died between the landing and its line (refs/tron/landed/<id> recognised:
      // block.recovered in wrap or landed, as core/recover.ts counts it; or the remote held it: remote.recovered).
      const lines = (await tableRuns(repository)).flat();
      for (const id of IDS) {
        const recorded = lines.filter((e) => e.type === 'block.landed' && e.block === id).length;
        const recovered = lines.some(
          (e) =>
            (e.type === 'block.recovered' && e.block === id && (e.phase === 'landed' || e.phase === 'wrap') && e.sha !== undefined) ||
            (e.type === 'remote.recovered' && JSON.stringify(e.blocks).includes(`"${id}"`)),
        );
        expect(recorded + (recorded === 0 && recovered ? 1 : 0), `${id}'s landing recorded once`).toBe(1);
        expect(recorded).toBeLessThanOrEqual(1);
      }
      expect(await git('rev-list', '--min-parents=2', 'main')).toBe('');
      expect(await git('rev-parse', 'main'), "the clone's trunk is the remote's").toBe(await bare.git('rev-parse', 'main'));
      // Every landed sha is green, tested again here.
      for (const id of IDS) {
        const sha = await git('rev-parse', `refs/tron/landed/${id}`);
        const dir = join(c.scratch, `check-${id}`);
        await git('worktree', 'add', '-q', '--detach', dir, sha);
        expect((await execa('node', ['test.js'], { cwd: dir, reject: false })).exitCode, `${id} green at ${sha}`).toBe(0);
        await git('worktree', 'remove', '--force', dir);
      }
      // The work refs went with the landings.
      expect(await bare.git('for-each-ref', 'refs/tron/work/')).toBe('');
    } finally {
      await c.stop();
    }
  }

  it('lands every block exactly once, each landed sha green, when an agent dies mid-turn and the leader at a spread of event boundaries', async () => {
    // A clean run first: how many lines a run with agents writes, and where its landing begins.
    await cluster('agent-sweep-clean', undefined);
    const [events] = await tableRuns('agent-sweep-clean');
    const total = events!.length;
    const first = (type: string) => events!.find((e) => e.type === type)!.seq;
    // TRON_CRASH_SWEEP=full: every boundary; else two — while the builds run, and at the first landing.
    const points =
      process.env.TRON_CRASH_SWEEP === 'full'
        ? Array.from({ length: total - 1 }, (_, i) => i + 1)
        : [...new Set([first('gate.passed'), first('land.intent')])].sort((a, b) => a - b);
    for (const n of points) await cluster(`agent-sweep-${n}`, n);
  }, 1_800_000);
});
