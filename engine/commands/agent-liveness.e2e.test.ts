/**
 * The turns an engine hands to `tron agent`s, stopped and timed as its own, against a real
 * PostgreSQL and a served remote, through the CLI: SIGTERM to the engine stops the turn on
 * the agent (its worker's process is gone) and the engine exits, the next start recovering
 * the block; a silent turn on an agent overruns, is probed there, and is re-issued — the old
 * worker killed through the database — while a turn that shows life is extended; the
 * agents' process notes are in the engine's log, naming the agent.
 */
import { existsSync, readFileSync } from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import { describe, expect, it } from 'vitest';
import { agentCluster, CLUSTER_ENV as ENV, honestBuilder, sayPid } from '../testing/agent-cluster.ts';
import { BIN, running } from '../testing/crash.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import type { BareRemote } from '../testing/remote-server.ts';
import type { TestRepo } from '../testing/repo.ts';
import type { Database } from '../log/pg-log.ts';

const NO_DATABASE = skipWithoutPostgres('turns on agents, stopped and timed');

interface Setup {
  repo: TestRepo;
  bare: BareRemote;
  db: Database;
  held: string;
  agent: ResultPromise;
  out: () => string;
  start: () => ResultPromise;
}

describe.skipIf(NO_DATABASE)('turns on agents, stopped and timed as the engine’s own', () => {
  const server = useTestDatabase();

  /**
   * A project of one block on a served remote, one agent in its own clone; `extra` config
   * lines; alpha's first turn says its pid in `held`, then runs `first` (a shell line)
   * before it builds; removed after `body`.
   */
  async function withAgent(
    repository: string,
    first: string,
    extra: string,
    body: (s: Setup) => Promise<void>,
    turn = '1m',
  ): Promise<void> {
    const c = await agentCluster({
      database: server.url,
      repository,
      agents: 1,
      blocks: { alpha: {} },
      builder: (held) => honestBuilder({ held, run: `${sayPid(held)}\n  ${first}` }),
      extra,
      turn,
      lease: '2s',
    });
    try {
      // The test's SIGTERM is the stop under test: no SIGKILL from execa after it.
      const start = () => c.start({ timeout: 200_000, forceKillAfterDelay: false });
      await body({ repo: c.repo, bare: c.bare, db: c.db, held: c.held, agent: c.agents[0]!, out: () => c.outs[0]!, start });
    } finally {
      await c.stop();
    }
  }

  /** The lines of the repository's runs, oldest run first. */
  async function runs(db: Database, repository: string): Promise<Array<Array<Record<string, unknown> & { type: string }>>> {
    const { rows } = await db.client.query<{ run: string; line: string }>(
      'select run, line from tron_events where repository = $1 order by run, seq',
      [repository],
    );
    const by = new Map<string, Array<Record<string, unknown> & { type: string }>>();
    for (const r of rows) by.set(r.run, [...(by.get(r.run) ?? []), JSON.parse(r.line)]);
    return [...by.values()];
  }

  async function landedOnce(s: Setup): Promise<void> {
    expect(await s.repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).toBe('tron/landed/alpha');
    const subjects = (await s.bare.git('log', '--format=%s', 'main')).split('\n');
    expect(subjects.filter((x) => x === 'Build alpha')).toHaveLength(1);
    // Landed, its work ref on the remote is gone.
    expect(await s.bare.git('for-each-ref', 'refs/tron/work/')).toBe('');
  }

  it('stops the turn on the agent when the engine is stopped, exits, and lands the block at the next start', async () => {
    await withAgent('stopped', 'exec sleep 120', '', async (s) => {
      const engine = s.start();
      while (!existsSync(s.held)) {
        if (engine.exitCode !== null) throw new Error(`the engine ended first: ${(await engine).stdout}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const worker = Number(readFileSync(s.held, 'utf8'));
      expect(running(worker)).toBe(true);
      engine.kill('SIGTERM');
      const stopped = await engine;
      expect(stopped.signal, String(stopped.stdout)).toBeUndefined();
      // The worker's process on the agent's host went with the turn, before the engine exited.
      expect(running(worker), `worker ${worker}\n${s.out()}`).toBe(false);
      expect(s.out()).toContain('its turn is stopped');
      // Stopped, alpha waits for no answer: the next start goes on with it.
      expect(stopped.stdout).toContain('alpha is unfinished — the next `tron start` goes on with it');
      expect(stopped.stdout).not.toContain('alpha is parked');
      const [first] = await runs(s.db, 'stopped');
      const types = first!.map((e) => e.type);
      expect(types).toContain('run.stopping');
      expect(first!.find((e) => e.type === 'reply.received')).toMatchObject({ block: 'alpha', ok: false, failure: 'aborted' });
      // The agent's process notes are the engine's, naming the agent; recovery leaves such pids to it.
      expect(first!.find((e) => e.type === 'worker.spawned')).toMatchObject({ pid: worker, agent: expect.stringMatching(/^agent /) });
      expect(first!.find((e) => e.type === 'worker.exited')).toMatchObject({ pid: worker, agent: expect.stringMatching(/^agent /) });
      // Nothing of the stopped run waits on the queue.
      const { rows } = await s.db.client.query(`select state from tron_jobs where repository = 'stopped' and state <> 'done'`);
      expect(rows).toEqual([]);
      const again = await s.start();
      expect(again.exitCode, `${again.stdout}\n${again.stderr}\n${s.out()}`).toBe(0);
      await landedOnce(s);
      const all = await runs(s.db, 'stopped');
      expect(all).toHaveLength(2);
      expect(all[1]!.map((e) => e.type)).toContain('recovery.started');
    });
  }, 240_000);

  it('finishes the stop itself when the agent holding the turn is cut off, exits without waiting for it, and the agent stops the turn once back', async () => {
    await withAgent('cut-off', 'exec sleep 120', '', async (s) => {
      const engine = s.start();
      while (!existsSync(s.held)) {
        if (engine.exitCode !== null) throw new Error(`the engine ended first: ${(await engine).stdout}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const worker = Number(readFileSync(s.held, 'utf8'));
      // The agent's host is cut off: it hears nothing and says nothing.
      s.agent.kill('SIGSTOP');
      try {
        engine.kill('SIGTERM');
        const stopped = await engine;
        expect(stopped.signal, String(stopped.stdout)).toBeUndefined();
        const [first] = await runs(s.db, 'cut-off');
        expect(first!.find((e) => e.type === 'reply.received')).toMatchObject({
          block: 'alpha',
          ok: false,
          failure: 'aborted',
          detail: expect.stringContaining('did not report within the stop grace'),
        });
        // The job was finished by the engine: the cut-off attempt can no longer report.
        const { rows } = await s.db.client.query(
          `select state, attempt from tron_jobs where repository = 'cut-off' and kind = 'block.dispatched'`,
        );
        expect(rows).toEqual([{ state: 'done', attempt: 1 }]);
        // Back on line, the agent finds its attempt no longer holds the job, and stops the turn there.
        s.agent.kill('SIGCONT');
        while (running(worker)) await new Promise((r) => setTimeout(r, 50));
        expect(s.out()).toContain('no longer holds its job; its turn is stopped');
      } finally {
        s.agent.kill('SIGKILL');
        try {
          process.kill(worker, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    });
  }, 240_000);

  const fast = (extension: string) => `\n[liveness]\nprobe_wait = "300ms"\nextension = "${extension}"\nmax_extensions = 3\nreissues = 1\n`;

  it('probes a silent turn on the agent that runs it, re-issues it and kills the old worker there, and lands the block', async () => {
    await withAgent(
      'silent',
      'exec sleep 120',
      fast('1s'),
      async (s) => {
        const run = await s.start();
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${s.out()}`).toBe(0);
        const worker = Number(readFileSync(s.held, 'utf8'));
        expect(running(worker), `worker ${worker}`).toBe(false);
        const [events] = await runs(s.db, 'silent');
        const alpha = events!.filter((e) => e.block === 'alpha');
        const live = alpha
          .map((e) => e.type)
          .filter((t) => ['timer.fired', 'worker.overran', 'worker.probed', 'turn.reissued'].includes(t));
        expect(live.slice(0, 4)).toEqual(['timer.fired', 'worker.overran', 'worker.probed', 'turn.reissued']);
        expect(alpha.find((e) => e.type === 'worker.probed')).toMatchObject({ alive: false, turn: 1 });
        // The re-issued turn ran as the next turn of the session; the silent one's reply says it was stopped.
        const builds = alpha.filter((e) => e.type === 'block.dispatched' && e.role === 'builder').map((e) => e.turn);
        expect(builds.slice(0, 2)).toEqual([1, 2]);
        expect(alpha.find((e) => e.type === 'reply.received' && e.turn === 1)).toMatchObject({ ok: false, failure: 'aborted' });
        expect(alpha.find((e) => e.type === 'worker.exited' && e.pid === worker)).toMatchObject({
          agent: expect.stringMatching(/^agent /),
        });
        await landedOnce(s);
        // Every timing entered as an input: the run replays to the same decisions.
        const replay = await execa('node', [BIN, 'replay', '--repo', s.repo.dir], { env: ENV, reject: false, stdin: 'ignore' });
        expect(replay.exitCode, `${replay.stdout}\n${replay.stderr}`).toBe(0);
      },
      '3s',
    );
  }, 240_000);

  it('extends a turn on an agent that shows life there, instead of re-issuing it', async () => {
    const working = 'i=0; while [ $i -lt 20 ]; do echo "working $i"; sleep 0.2; i=$((i+1)); done';
    await withAgent(
      'working',
      working,
      fast('8s'),
      async (s) => {
        const run = await s.start();
        expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${s.out()}`).toBe(0);
        const [events] = await runs(s.db, 'working');
        const probes = events!.filter((e) => e.type === 'worker.probed' && e.turn === 1);
        expect(probes.length).toBeGreaterThanOrEqual(1);
        expect(probes[0]).toMatchObject({ alive: true, signs: expect.arrayContaining(['output']) });
        expect(events!.filter((e) => e.type === 'worker.extended').length).toBeGreaterThanOrEqual(1);
        expect(events!.filter((e) => e.type === 'turn.reissued')).toHaveLength(0);
        await landedOnce(s);
      },
      '2s',
    );
  }, 240_000);
});
