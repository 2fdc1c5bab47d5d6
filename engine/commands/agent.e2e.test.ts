/**
 * `tron agent` as the CLI runs it, against a real PostgreSQL and a served remote: the
 * engine (`[cluster] jobs = "agents"`) decides, three agents — each in its own clone —
 * claim the turns, fetch the remote at the exact sha, build and review there and push the
 * builders' work back; the engine lands every block. An agent killed mid-turn has its
 * turn re-run by another as a new attempt; nothing is lost or landed twice, and a forged
 * result of the dead attempt is refused by the database.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from '../testing/crash.ts';
import { requireAll, skipWithout } from '../testing/needs.ts';
import { needPostgres, type TestDatabase, testDatabase } from '../testing/postgres.ts';
import { configFile, makeProject } from '../testing/project.ts';
import { makeBareRemote, serveDaemon } from '../testing/remote-server.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from '../testing/workers.ts';
import { completeJob, STALE_ATTEMPT } from '../log/pg-jobs.ts';
import { openDatabase } from '../log/pg-log.ts';

const POSTGRES = needPostgres();
const NO_DATABASE = skipWithout('tron agent with [cluster] database', POSTGRES);
const IDS = ['alpha', 'beta', 'gamma'];
const ENV = { ...GIT_IDENTITY_ENV, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', TRON_DATABASE_URL: '' };

/** An honest builder; alpha's first turn says it started (its pid in `held`) and then hangs until killed. */
function builder(held: string): string {
  return `${builderPrelude('the file and its test')}if [ "$TRON_BLOCK" = alpha ] && [ ! -e "${held}" ]; then
  echo $$ > "${held}.tmp" && mv "${held}.tmp" "${held}"
  exec sleep 60
fi
echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"
printf "require('node:assert').ok(require('node:fs').existsSync(__dirname + '/../%s.txt'));\\n" "$TRON_BLOCK" > "tests/$TRON_BLOCK.test.js"
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;
}

describe.skipIf(NO_DATABASE)('tron agent with [cluster] database', () => {
  let server: TestDatabase;
  beforeAll(async () => {
    requireAll(POSTGRES);
    server = await testDatabase();
  }, 60_000);
  afterAll(async () => server?.stop(), 60_000);

  it('lands every block with three agents in their own clones, re-running a killed agent’s turn as a new attempt and refusing its late result', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'tron-agents-'));
    const held = join(scratch, 'alpha.held');
    const bare = await makeBareRemote();
    const served = await serveDaemon(bare);
    const repo = await makeProject({
      blocks: { alpha: {}, beta: {}, gamma: { depends_on: ['alpha'] } },
      config: configFile({
        maxParallel: 3,
        workers: approvingWorkers(writeBuilder(scratch, builder(held))),
        extra: `\n[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\nretries = 50\n\n[cluster]\ndatabase = "${server.url}"\nrepository = "agents"\njobs = "agents"\nheartbeat = "500ms"\n`,
      }),
    });
    const agents: ResultPromise[] = [];
    const db = await openDatabase(server.url);
    try {
      await repo.git('push', '-q', bare.dir, 'main');
      await repo.git('remote', 'add', 'origin', served.url);
      await repo.git('fetch', '-q', 'origin');
      const outs: string[] = [];
      for (let n = 0; n < 3; n += 1) {
        const clone = join(scratch, `clone-${n}`);
        await execa('git', ['clone', '-q', served.url, clone], { env: ENV });
        const agent = execa('node', [BIN, 'agent', '--repo', clone, '--database', server.url, '--roles', 'builder,reviewer'], {
          env: ENV,
          reject: false,
          stdin: 'ignore',
          buffer: false,
        });
        outs.push('');
        agent.stdout!.on('data', (c: Buffer) => {
          outs[n] += c.toString();
        });
        agent.stderr!.on('data', (c: Buffer) => {
          outs[n] += c.toString();
        });
        agents.push(agent);
      }
      const engine = execa('node', [BIN, 'start', '--repo', repo.dir, '--plain'], {
        env: ENV,
        reject: false,
        stdin: 'ignore',
        timeout: 240_000,
      });
      // alpha's builder hangs on whichever agent claimed it: that agent dies as a lost host would.
      while (!existsSync(held)) await new Promise((r) => setTimeout(r, 50));
      const { rows } = await db.client.query<{ worker: string; attempt: number }>(
        `select worker, attempt from tron_jobs where repository = 'agents' and kind = 'block.dispatched' and state = 'running'
           and request->'decision'->>'block' = 'alpha'`,
      );
      expect(rows).toHaveLength(1);
      const pid = Number(/pid (\d+)$/.exec(rows[0]!.worker)![1]);
      const victim = agents.find((a) => a.pid === pid)!;
      expect(victim, `the agent holding alpha (${rows[0]!.worker})`).toBeDefined();
      victim.kill('SIGKILL');
      process.kill(Number(readFileSync(held, 'utf8')), 'SIGKILL');
      const run = await engine;
      expect(run.exitCode, `${run.stdout}\n${run.stderr}\n${outs.join('\n---\n')}`).toBe(0);
      // Every block landed once, on the remote's trunk too.
      const landed = (await repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
      expect(landed).toEqual(IDS.map((id) => `tron/landed/${id}`));
      const subjects = (await bare.git('log', '--format=%s', 'main')).split('\n');
      for (const id of IDS)
        expect(
          subjects.filter((s) => s === `Build ${id}`),
          `${id} on the remote's trunk`,
        ).toHaveLength(1);
      // Every turn ran on an agent; alpha's first build as a second attempt, on another agent.
      const turns = await db.client.query<{
        block: string;
        role: string;
        worker: string;
        attempt: number;
        state: string;
        seq: number;
        run: string;
      }>(
        `select request->'decision'->>'block' as block, role, worker, attempt, state, seq, run from tron_jobs
          where repository = 'agents' and kind = 'block.dispatched' order by seq`,
      );
      expect(turns.rows.length).toBeGreaterThanOrEqual(6);
      for (const t of turns.rows) {
        expect(t.state).toBe('done');
        expect(t.worker).toMatch(/^agent /);
      }
      const alpha = turns.rows.find((t) => t.block === 'alpha' && t.role === 'builder')!;
      expect(alpha.attempt).toBe(2);
      expect(alpha.worker).not.toBe(rows[0]!.worker);
      // The dead attempt's result, sent now (forged, or late from a host that comes back): refused in SQL.
      await expect(
        completeJob(db.client, { repository: 'agents', run: alpha.run, seq: alpha.seq }, 1, { ok: true, inputs: [{ type: 'forged' }] }),
      ).rejects.toMatchObject({ code: STALE_ATTEMPT });
      // The agents' clones: their work went through the remote, and no agent touched the engine's keys or log.
      const works = (await bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/work/')).split('\n').sort();
      expect(works).toEqual(IDS.map((id) => `refs/tron/work/${id}`));
    } finally {
      for (const a of agents) a.kill('SIGTERM');
      await Promise.all(agents.map((a) => a.catch(() => undefined)));
      await db.end();
      await served.stop().catch(() => undefined);
      await Promise.all([repo.cleanup(), bare.cleanup()]);
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 300_000);
});
