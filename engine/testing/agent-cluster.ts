/**
 * A cluster of `tron agent`s for the end-to-end tests, as the CLI runs it: a scratch
 * folder, a bare remote served by `git daemon`, a project on it with `[cluster] jobs =
 * "agents"` in the given database, agents each in a clone of its own with their output
 * collected, and `tron start` as a process of its own. `stop()` ends every process it
 * started (and the worker or test a test held, by the pid in `held`) and removes every
 * folder; the project's removal runs `git fsck` of it, so damage fails the test.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { type Database, openDatabase } from '../log/pg-log.ts';
import { BIN } from './crash.ts';
import { type BlockSpec, configFile, makeProject } from './project.ts';
import { type BareRemote, makeBareRemote, type ServedRemote, serveDaemon, publishTo } from './remote-server.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from './repo.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from './workers.ts';

/** The environment of every process of a cluster: the test identity, no git config of the machine's, no database of its own. */
export const CLUSTER_ENV: Readonly<Record<string, string>> = {
  ...GIT_IDENTITY_ENV,
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
  TRON_DATABASE_URL: '',
};

/** The three blocks most cluster tests land: two in parallel, one depending on the first. */
export const THREE_BLOCKS: Readonly<Record<string, BlockSpec>> = { alpha: {}, beta: {}, gamma: { depends_on: ['alpha'] } };

/**
 * An honest builder: the block's file and a test that checks it, committed; it gives
 * evidence when challenged and rebases when asked to merge. With `alphaFirst`, alpha's first
 * turn (until the file `held` exists) runs those shell lines before it builds.
 */
export function honestBuilder(alphaFirst?: { held: string; run: string }): string {
  const first = alphaFirst
    ? `if [ "$TRON_BLOCK" = alpha ] && [ ! -e "${alphaFirst.held}" ]; then
  ${alphaFirst.run}
fi
`
    : '';
  return `${builderPrelude('the file and its test')}${first}echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"
printf "require('node:assert').ok(require('node:fs').existsSync(__dirname + '/../%s.txt'));\\n" "$TRON_BLOCK" > "tests/$TRON_BLOCK.test.js"
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;
}

/** The shell line that says the running script's pid in `held` (whole or not at all). */
export function sayPid(held: string): string {
  return `echo $$ > "${held}.tmp" && mv "${held}.tmp" "${held}"`;
}

export interface AgentClusterOptions {
  /** The database the engine and the agents share. */
  database: string;
  /** `[cluster] repository`: the name the cluster's rows go under. */
  repository: string;
  /** The agents: this many with their default roles, or one per entry with `--roles` it. */
  agents: number | readonly string[];
  /** The project's blocks (default THREE_BLOCKS). */
  blocks?: Record<string, BlockSpec>;
  /** `max_parallel` (default 3). */
  maxParallel?: number;
  /** The builder's script, given the `held` path (default honestBuilder()). */
  builder?: (held: string) => string;
  /** More files of the project's first commit, given the `held` path. */
  files?: (held: string) => Record<string, string>;
  /** Config lines before [sandbox] (e.g. [liveness]). */
  extra?: string;
  /** `[timeouts] turn` (default "1m"). */
  turn?: string;
  /** `[cluster] lease` (default: none written, the engine's own). */
  lease?: string;
  /** Start `tron start` once the agents run: `engine` (default false: the test calls `start`). */
  engine?: boolean;
}

/** How a `tron start` of the cluster runs. */
export interface EngineStart {
  /** Arguments after `start --repo <dir> --plain` (e.g. `--standby`). */
  args?: string[];
  /** More environment, over CLUSTER_ENV. */
  env?: Record<string, string>;
  /** The folder it leads from (default the project; a clone for a standby of another host). */
  dir?: string;
  /** Default 240 s. */
  timeout?: number;
  /** false: a SIGTERM the test sends is the stop under test, with no SIGKILL from execa after it. */
  forceKillAfterDelay?: false;
}

export interface AgentCluster {
  repo: TestRepo;
  bare: BareRemote;
  served: ServedRemote;
  /** A connection to the database, closed by `stop`. */
  db: Database;
  /** A folder of the test's own, removed by `stop`: the builder, the clones. */
  scratch: string;
  /** A file in `scratch` where a worker or test the test holds says its pid; that process is killed by `stop`. */
  held: string;
  agents: ResultPromise[];
  /** Each agent's output so far. */
  outs: string[];
  /** Every agent's output so far, for an assertion's message. */
  said(): string;
  /** The first `tron start` (`engine: true`, or the first `start`). */
  readonly engine: ResultPromise;
  /** Another `tron start`, ended by `stop` if still running. */
  start(o?: EngineStart): ResultPromise;
  /** A clone of the remote in `scratch/<name>`, as on another host; its path. */
  clone(name: string): Promise<string>;
  /** The agent a job's `worker` names (`agent <host> pid <pid>`). */
  agentOf(worker: string): ResultPromise | undefined;
  /** Ends every process, closes the connection, removes every folder; rejects when the project's fsck fails. */
  stop(): Promise<void>;
}

/** A project on a served remote, its agents in their own clones and (with `engine`) `tron start`. */
export async function agentCluster(o: AgentClusterOptions): Promise<AgentCluster> {
  const scratch = mkdtempSync(join(tmpdir(), 'tron-agent-cluster-'));
  const held = join(scratch, 'held');
  const agents: ResultPromise[] = [];
  const engines: ResultPromise[] = [];
  const outs: string[] = [];
  let bare: BareRemote | undefined;
  let served: ServedRemote | undefined;
  let repo: TestRepo | undefined;
  let db: Database | undefined;
  const stop = async () => {
    for (const p of engines) p.kill('SIGKILL');
    for (const a of agents) {
      a.kill('SIGCONT');
      a.kill('SIGTERM');
    }
    await Promise.all([...engines, ...agents].map((p) => p.catch(() => undefined)));
    const pid = existsSync(held) ? Number(readFileSync(held, 'utf8')) : 0;
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await db?.end().catch(() => undefined);
    await served?.stop().catch(() => undefined);
    try {
      await Promise.all([repo?.cleanup(), bare?.cleanup()]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  };
  try {
    bare = await makeBareRemote();
    served = await serveDaemon(bare);
    const lease = o.lease === undefined ? '' : `lease = "${o.lease}"\n`;
    const config = configFile({
      maxParallel: o.maxParallel ?? 3,
      workers: approvingWorkers(writeBuilder(scratch, (o.builder ?? (() => honestBuilder()))(held))),
      extra: `${o.extra ?? ''}\n[sandbox]\nmode = "off"\n\n[remote]\nbackoff = "100ms"\nretries = 50\n\n[cluster]\ndatabase = "${o.database}"\nrepository = "${o.repository}"\njobs = "agents"\nheartbeat = "500ms"\n${lease}`,
    });
    repo = await makeProject({
      blocks: o.blocks ?? THREE_BLOCKS,
      config: o.turn === undefined ? config : config.replace('turn = "1m"', `turn = "${o.turn}"`),
      ...(o.files && { files: o.files(held) }),
    });
    db = await openDatabase(o.database);
    await publishTo(repo, bare, served);
    const url = served.url;
    const clone = async (name: string) => {
      const dir = join(scratch, name);
      await execa('git', ['clone', '-q', url, dir], { env: CLUSTER_ENV });
      return dir;
    };
    const roles = typeof o.agents === 'number' ? Array.from({ length: o.agents }, () => undefined) : o.agents;
    for (const [n, r] of roles.entries()) {
      const dir = await clone(`clone-${n}`);
      const agent = execa('node', [BIN, 'agent', '--repo', dir, '--database', o.database, ...(r === undefined ? [] : ['--roles', r])], {
        env: CLUSTER_ENV,
        reject: false,
        stdin: 'ignore',
        buffer: false,
      });
      outs.push('');
      const take = (c: Buffer) => {
        outs[n] += c.toString();
      };
      agent.stdout!.on('data', take);
      agent.stderr!.on('data', take);
      agents.push(agent);
    }
    const project = repo;
    const start = (s: EngineStart = {}) => {
      const p = execa('node', [BIN, 'start', '--repo', s.dir ?? project.dir, '--plain', ...(s.args ?? [])], {
        env: { ...CLUSTER_ENV, ...s.env },
        reject: false,
        stdin: 'ignore',
        timeout: s.timeout ?? 240_000,
        ...(s.forceKillAfterDelay === false && { forceKillAfterDelay: false }),
      });
      engines.push(p);
      return p;
    };
    if (o.engine) start();
    return {
      repo,
      bare,
      served,
      db,
      scratch,
      held,
      agents,
      outs,
      said: () => outs.join('\n---\n'),
      get engine() {
        const first = engines[0];
        if (!first) throw new Error('no engine started: pass `engine: true`, or call start()');
        return first;
      },
      start,
      clone,
      agentOf: (worker) => {
        const pid = Number(/pid (\d+)$/.exec(worker)?.[1]);
        return agents.find((a) => a.pid === pid);
      },
      stop,
    };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
