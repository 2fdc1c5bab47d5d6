/**
 * What the cluster's end-to-end files share (engine/commands/cluster*.e2e.test.ts, and the
 * agents', the standby host's and the nemesis's): `tron` run as a host runs it,
 * connections to the database, projects whose log is in it — one whose builder holds its
 * first turn until the test lets it go, one the sim lands at once, the crash project, or
 * the crash project on a served remote —, clones of a project's remote as on other hosts,
 * and the waits and checks they make on the table and on trunk. One `clusterHosts()` per
 * describe, its `end()` in the afterEach: it kills every `tron` it started that still
 * runs, closes every connection and removes every project and folder.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import pg from 'pg';
import { expect } from 'vitest';
import { BIN, crashProject } from './crash.ts';
import { type BlockSpec, configFile, landingSim, makeProject } from './project.ts';
import { type RemoteProject, remoteProject } from './remote-project.ts';
import { GIT_IDENTITY_ENV, type TestRepo, type TestTree, testGit } from './repo.ts';
import { approvingWorkers, slowBuilder } from './workers.ts';

/** A child process, ended by an exit or by a signal (a SIGKILLed one has no exit code). */
export type Ended = { exitCode?: number | null; signalCode?: string | null };

export const ended = (p: Ended): boolean => (p.exitCode ?? null) !== null || (p.signalCode ?? null) !== null;

/** Where a project's log goes: `[cluster] database` and `repository` (none: the engine names it), `lease`, and more lines. */
export interface Clustered {
  database: string;
  repository?: string;
  lease?: string;
  /** Config lines before [sandbox] (e.g. `[remote]`). */
  extra?: string;
  /** More lines of [cluster] (e.g. `jobs = "agents"`). */
  clusterExtra?: string;
}

interface TronOptions {
  env?: Record<string, string>;
  cwd?: string;
  /** Default 150 s; 0: none (a `--watch` run the test stops). */
  timeout?: number;
  /** false: a SIGTERM the test sends is the stop under test, with no SIGKILL after it. */
  forceKillAfterDelay?: false;
}

/** `tron <args>` as another host runs it: the test identity, no TRON_DATABASE_URL but `env`'s. */
function runTron(args: string[], o: TronOptions) {
  return execa('node', [BIN, ...args], {
    reject: false,
    stdin: 'ignore',
    cwd: o.cwd ?? process.cwd(),
    env: { ...GIT_IDENTITY_ENV, TRON_DATABASE_URL: '', ...o.env },
    timeout: o.timeout ?? 150_000,
    forceKillAfterDelay: o.forceKillAfterDelay ?? 5000,
  });
}

export type TronRun = ReturnType<typeof runTron>;

export interface ClusterHosts {
  /** `tron <args>` as another host runs it (runTron), ended by `end`; its output kept for `said`. */
  cli(args: string[], o?: TronOptions): TronRun;
  /** Waits until `child` has printed `text` since its start (it ended first: throws). */
  said(child: TronRun, text: string): Promise<void>;
  /** All `child` has printed so far, stdout and stderr as they came. */
  output(child: TronRun): string;
  /** A connection to `url`, closed by `end`. */
  connect(url: string): Promise<pg.Client>;
  /** A folder of the test's own, removed by `end`. */
  folder(prefix: string): string;
  /** `path` removed by `end`, as a folder of the test's own. */
  removeAtEnd(path: string): void;
  /** A project made elsewhere, cleaned up by `end`. */
  adopt<R extends Cleaned>(repo: R): R;
  /**
   * A project of one block, alpha, whose builder holds its first turn until the file `go`
   * exists; with `remote`, a bare remote beside it as `origin` (what `cloneOf` clones).
   */
  heldProject(c: Clustered & { remote?: boolean }): Promise<{ repo: TestRepo; go: string }>;
  /** A project of `ids` that the sim lands at once, each as a commit named by its id. */
  landingProject(c: Clustered, ids: readonly string[], blocks?: Record<string, BlockSpec>): Promise<TestRepo>;
  /** The crash project (crash.ts: workers whose every step is idempotent), its log put in the database, committed. */
  crashProject(c: Omit<Clustered, 'extra'>): Promise<TestRepo>;
  /**
   * The crash project on a served remote (remote-project.ts), its config changed by `edit`
   * and its log put in the database, committed and pushed to the remote's trunk.
   */
  servedProject(c: Omit<Clustered, 'extra'>, edit?: (config: string) => string): Promise<RemoteProject>;
  /** A clone of `repo`'s `origin`, in a folder of its own named `name` (another host's). */
  cloneOf(repo: TestRepo, name?: string): Promise<string>;
  /** Ends and removes everything the above made. */
  end(): Promise<void>;
}

/** Something the test made that `end` removes. */
type Cleaned = { cleanup(): Promise<void> };

/** The config lines that put a project's log in the database. */
export function clusterLines(c: Clustered): string {
  return `${c.extra ?? ''}\n[sandbox]\nmode = "off"\n\n${clusterTable(c)}`;
}

/** The `[cluster]` table alone, for a project whose config has its `[sandbox]` already. */
function clusterTable(c: Omit<Clustered, 'extra'>): string {
  const named = c.repository === undefined ? '' : `repository = "${c.repository}"\n`;
  const lease = c.lease === undefined ? '' : `lease = "${c.lease}"\n`;
  return `[cluster]\ndatabase = "${c.database}"\n${named}${lease}${c.clusterExtra ?? ''}`;
}

/** Puts a made project's log in the database: its config, changed by `edit`, gains the [cluster] table, committed. */
async function logInDatabase(repo: TestRepo, c: Omit<Clustered, 'extra'>, edit = (config: string) => config): Promise<void> {
  await repo.write('.tron/config.toml', `${edit(await repo.read('.tron/config.toml'))}\n${clusterTable(c)}`);
  await repo.commitAll('tron: the log in the database');
}

export function clusterHosts(): ClusterHosts {
  const children: TronRun[] = [];
  const clients: pg.Client[] = [];
  const repos: Cleaned[] = [];
  const dirs: string[] = [];
  const output = new WeakMap<TronRun, () => string>();
  const folder = (prefix: string) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  };
  return {
    cli(args, o = {}) {
      const child = runTron(args, o);
      children.push(child);
      let out = '';
      const take = (chunk: Buffer) => {
        out += chunk.toString();
      };
      child.stdout!.on('data', take);
      child.stderr!.on('data', take);
      output.set(child, () => out);
      return child;
    },
    output: (child) => output.get(child)!(),
    async said(child, text) {
      const out = output.get(child)!;
      while (!out().includes(text)) {
        if (ended(child)) throw new Error(`ended before saying ${text}: ${out()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async connect(url) {
      const client = new pg.Client({ connectionString: url });
      client.on('error', () => undefined);
      await client.connect();
      clients.push(client);
      return client;
    },
    folder,
    removeAtEnd: (path) => void dirs.push(path),
    adopt(repo) {
      repos.push(repo);
      return repo;
    },
    async heldProject(c) {
      const workers = folder('tron-cluster-workers-');
      const go = join(workers, 'go');
      const repo = await makeProject({
        blocks: { alpha: {} },
        config: configFile({ workers: approvingWorkers(slowBuilder(workers, 'building alpha', go)), extra: clusterLines(c) }),
      });
      repos.push(repo);
      if (c.remote) {
        const bare = join(workers, 'remote.git');
        await testGit(workers, 'init', '-q', '--bare', '-b', 'main', bare);
        await repo.git('push', '-q', bare, 'main');
        await repo.git('remote', 'add', 'origin', bare);
      }
      return { repo, go };
    },
    async landingProject(c, ids, blocks) {
      const repo = await makeProject({
        blocks: blocks ?? Object.fromEntries(ids.map((id) => [id, {}])),
        sim: landingSim([...ids]),
        config: configFile({ extra: clusterLines(c) }),
      });
      repos.push(repo);
      return repo;
    },
    async crashProject(c) {
      const repo = await crashProject();
      repos.push(repo);
      await logInDatabase(repo, c);
      return repo;
    },
    async servedProject(c, edit) {
      const p = await remoteProject();
      repos.push(p);
      await logInDatabase(p.repo, c, edit);
      await p.repo.git('push', '-q', 'origin', 'main');
      return p;
    },
    async cloneOf(repo, name = 'clone') {
      const dir = join(folder('tron-cluster-host-'), name);
      await testGit(tmpdir(), 'clone', '-q', await repo.git('remote', 'get-url', 'origin'), dir);
      return dir;
    },
    async end() {
      for (const c of children.splice(0)) {
        c.kill('SIGCONT');
        c.kill('SIGKILL');
        await c.catch(() => undefined);
      }
      for (const c of clients.splice(0)) await c.end().catch(() => undefined);
      for (const r of repos.splice(0)) await r.cleanup();
      for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
    },
  };
}

/**
 * Waits on the table until a line of event `type` is there — or a line `like` a pattern —
 * of `repository` and `generation` when given; throws when `engine` ended first, or after
 * `timeoutMs`. A table not made yet (no engine has migrated the database) holds no line.
 */
export async function untilLine(
  db: pg.Client,
  what: { type: string } | { like: string },
  o: { repository?: string; generation?: number; engine?: Ended; timeoutMs?: number } = {},
): Promise<void> {
  const like = 'type' in what ? `%"type":"${what.type}"%` : what.like;
  const timeoutMs = o.timeoutMs ?? 120_000;
  const by = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db
      .query(
        `select 1 from tron_events where line like $1 and ($2::text is null or repository = $2) and ($3::bigint is null or generation = $3)`,
        [like, o.repository ?? null, o.generation ?? null],
      )
      .catch((err: { code?: string }) => {
        if (err.code === '42P01') return { rows: [] };
        throw err;
      });
    if (rows.length > 0) return;
    if (o.engine && ended(o.engine)) throw new Error(`the engine ended before a line like ${like}`);
    if (Date.now() > by) throw new Error(`no line like ${like} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every block of `ids` landed once: one landed ref each, and one commit on trunk whose subject is `subject(id)`. */
export async function landedOnce(repo: TestTree, ids: readonly string[], subject: (id: string) => string = (id) => id): Promise<void> {
  const landed = (await repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
  expect(landed).toEqual(ids.map((id) => `tron/landed/${id}`).sort());
  const subjects = (await repo.git('log', '--format=%s', 'main')).split('\n');
  for (const id of ids)
    expect(
      subjects.filter((s) => s === subject(id)),
      `${id} on trunk`,
    ).toHaveLength(1);
}
