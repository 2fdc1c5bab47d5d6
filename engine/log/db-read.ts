/**
 * Reading a run from tron's database, for the commands that read runs — `logs`, `replay`,
 * `view`, `serve` (and `status`, `report`) — on any host: the same signed lines the file
 * log holds, read as the file is read, so each command says exactly what it says of a run
 * directory.
 *
 * Which log a command reads:
 * - `--database URL`: the database; with `--repo DIR` the runs of that repository
 *   (its `[cluster] repository`, by default its folder's name), else the run written last
 *   in the whole database;
 * - else, in a repository whose engine writes to a database (`[cluster] database` or
 *   `TRON_DATABASE_URL`): that database, the repository's runs — the table is the log of
 *   record, and a live run's lines are there only (its run directory gets its copy at the end);
 * - else the run directories, as ever. A RUN named by its directory, or by the id of a
 *   run directory that holds its log here, is read from that file unless `--database` is given.
 *
 * Lines are checked against the repository's key where this host holds it (as a file
 * reader checks them), else read unchecked: another host may hold no key.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { InputError } from '../core/errors.ts';
import type { TronEvent } from '../core/events.ts';
import { loadConfig } from '../project/config.ts';
import { databaseUrl, repositoryName } from './cluster.ts';
import { readLines } from './eventlog.ts';
import { parseEventLine } from './eventlog-line.ts';
import { repoKey } from './keys.ts';
import { checkedRunKey, type Database, openDatabase, type RunKey, redact, runLines } from './pg-log.ts';
import { readRunFiles, type RunFileName } from './pg-run-files.ts';

/** A database to read runs from, and which of its runs are meant. */
export interface DatabaseSource {
  url: string;
  /** The repository whose runs are read; undefined: any (the run written last). */
  repository?: string;
  /** The repository's key where this host holds it: lines are then checked, as a file reader checks them. */
  key?: Buffer;
}

/**
 * The database a reading command reads, or undefined for the run directories. `database` is
 * `--database`; `repoGiven` says whether `--repo` was given (with `--database`, it narrows
 * the runs to that repository's).
 */
export function databaseToRead(o: {
  repo: string;
  repoGiven: boolean;
  database?: string;
  /** The RUN the command names: a run directory (or a run id with one here) is read from its file, unless --database says otherwise. */
  run?: string;
  env: Readonly<Record<string, string | undefined>>;
}): DatabaseSource | undefined {
  if (o.database === undefined && o.run !== undefined) {
    for (const dir of [o.run, join(o.repo, '.tron', 'runs', o.run)]) if (existsSync(join(dir, 'events.jsonl'))) return undefined;
  }
  const isTron = existsSync(join(o.repo, '.tron', 'config.toml'));
  const config = isTron ? loadConfig(o.repo).config : undefined;
  const cluster = config?.cluster;
  const url = o.database ?? (isTron ? databaseUrl(cluster, o.env) : undefined);
  if (url === undefined) return undefined;
  if (o.database !== undefined && !o.repoGiven) return { url };
  const key = isTron ? repoKey(o.repo)?.key : undefined;
  return { url, repository: repositoryName(o.repo, cluster, config?.remote?.name), ...(key ? { key } : {}) };
}

/** One run in the database, open for reading. */
export class DatabaseRun {
  private constructor(
    private readonly db: Database,
    readonly source: DatabaseSource,
    readonly at: RunKey,
  ) {}

  /**
   * Opens the run with id `run` (of the source's repository, or — with none — the one of
   * that id written last), or the latest run. TRON_NO_RUN / TRON_RUN_NOT_FOUND as the file
   * commands say it.
   */
  static async open(source: DatabaseSource, run?: string): Promise<DatabaseRun> {
    const db = await openDatabase(source.url);
    try {
      const at = await findRun(db, source, run);
      return new DatabaseRun(db, source, at);
    } catch (err) {
      await db.end();
      throw err;
    }
  }

  /** How messages name the run: where it is, without a password. */
  get label(): string {
    return `${redact(this.source.url)} ${this.at.repository}/${this.at.run}`;
  }

  /** Every event of the run, read as a file log is read. */
  async events(): Promise<TronEvent[]> {
    return readLines(await runLines(this.db, this.at), `postgres:${this.at.repository}`, this.at.run, this.source.key).events;
  }

  /** The events after `seq`, in order (for followers: committed lines only ever grow). */
  async eventsAfter(seq: number): Promise<TronEvent[]> {
    const { rows } = await this.db.client.query<{ seq: number; line: string }>(
      'select seq, line from tron_events where repository = $1 and run = $2 and seq > $3 order by seq',
      [this.at.repository, this.at.run, seq],
    );
    const out: TronEvent[] = [];
    for (const r of rows) {
      const parsed = parseEventLine(r.line, r.seq);
      if (!parsed.ok) throw new Error(`postgres:${this.at.repository}/${this.at.run}:${r.seq}: ${parsed.reason}`);
      out.push(parsed.event);
    }
    return out;
  }

  /** The run's fixed files (workflow.toml, manifest.json), those the table holds. */
  files(): Promise<Partial<Record<RunFileName, string>>> {
    return readRunFiles(this.db, this.at);
  }

  /**
   * The end of the output of the turn decided at `seq`, as the `tron agent` that ran it sent
   * it with its result (turn-log.ts), and that agent; undefined for a turn not run on an
   * agent, not ended yet, or a role that may not read the jobs' table.
   */
  async agentTurnOutput(seq: number): Promise<{ output: string; worker: string } | undefined> {
    try {
      const { rows } = await this.db.client.query<{ output: string | null; worker: string | null }>(
        `select outcome->>'output' as output, worker from tron_jobs where repository = $1 and run = $2 and seq = $3 and state = 'done'`,
        [this.at.repository, this.at.run, seq],
      );
      const row = rows[0];
      return row?.output == null ? undefined : { output: row.output, worker: row.worker ?? 'an agent' };
    } catch {
      return undefined;
    }
  }

  /**
   * A turn on an agent as far as the database has it: its output notes after note `after`
   * (kept there while it runs: the engine deletes them once it kept the output), and once it
   * ended, its result's end and where that starts. Undefined for a role that may not read them.
   */
  async agentTurnProgress(
    seq: number,
    after: number,
  ): Promise<
    | {
        notes: Array<{ id: number; attempt: number; offset: number; text: string }>;
        worker: string | null;
        /** Once the job ended: its result's end (null for a turn the engine ran itself: its output is on the engine's host). */
        done?: { output: string | null; outputAt: number | undefined; attempt: number };
      }
    | undefined
  > {
    try {
      const notes = await this.db.client.query<{ id: string; attempt: number; offset: unknown; text: unknown }>(
        `select id, attempt, body -> 'offset' as offset, body ->> 'text' as text from tron_job_notes
          where repository = $1 and run = $2 and seq = $3 and id > $4 and body ->> 'kind' = 'output' order by id`,
        [this.at.repository, this.at.run, seq, after],
      );
      const job = await this.db.client.query<{
        state: string;
        attempt: number;
        worker: string | null;
        output: string | null;
        output_at: unknown;
      }>(
        `select state, attempt, worker, outcome ->> 'output' as output, outcome -> 'outputAt' as output_at from tron_jobs
          where repository = $1 and run = $2 and seq = $3`,
        [this.at.repository, this.at.run, seq],
      );
      const row = job.rows[0];
      const outputAt = Number.isSafeInteger(row?.output_at) && (row!.output_at as number) >= 0 ? (row!.output_at as number) : undefined;
      return {
        // What an agent wrote: only well-formed notes are taken.
        notes: notes.rows.flatMap((n) =>
          Number.isSafeInteger(n.offset) && (n.offset as number) >= 0 && typeof n.text === 'string'
            ? [{ id: Number(n.id), attempt: n.attempt, offset: n.offset as number, text: n.text }]
            : [],
        ),
        worker: row?.worker ?? null,
        ...(row?.state === 'done' || row?.state === 'dropped' ? { done: { output: row.output, outputAt, attempt: row.attempt } } : {}),
      };
    } catch {
      return undefined;
    }
  }

  /** The engine leading the run's repository now (its lease is live), if any. */
  async leader(): Promise<{ holder: string; generation: number } | undefined> {
    const { rows } = await this.db.client.query<{ holder: string; generation: string }>(
      'select holder, generation from tron_lease where repository = $1 and expires_at > now()',
      [this.at.repository],
    );
    const row = rows[0];
    return row && { holder: row.holder, generation: Number(row.generation) };
  }

  end(): Promise<void> {
    return this.db.end();
  }
}

/** The latest run (of the source's repository, or any) in which `block` was dispatched: where `tron logs BLOCK` looks. */
export async function latestRunWithTurn(source: DatabaseSource, block: string): Promise<string | undefined> {
  const db = await openDatabase(source.url);
  try {
    // Block ids are [a-z0-9-]: nothing in them is special to LIKE.
    const { rows } = await db.client.query<{ run: string }>(
      `select run from tron_events where ($1::text is null or repository = $1) and line like '%"type":"block.dispatched"%' and line like $2
       order by written_at desc limit 1`,
      [source.repository ?? null, `%"block":"${block}"%`],
    );
    return rows[0]?.run;
  } finally {
    await db.end();
  }
}

/** The run meant: by id (of the repository when given), or the latest. */
export async function findRun(db: Database, source: DatabaseSource, run: string | undefined): Promise<RunKey> {
  const where = source.repository === undefined ? redact(source.url) : `${redact(source.url)} (repository ${source.repository})`;
  const args: string[] = [];
  const conds = ['seq = 1'];
  if (source.repository !== undefined) {
    args.push(source.repository);
    conds.push(`repository = $${args.length}`);
  }
  if (run !== undefined) {
    args.push(run);
    conds.push(`run = $${args.length}`);
  }
  const { rows } = await db.client.query<RunKey>(
    `select repository, run from tron_events where ${conds.join(' and ')} order by ${source.repository === undefined ? 'written_at desc, run desc' : 'run desc'} limit 1`,
    args,
  );
  const found = rows[0];
  if (found) return checkedRunKey(found, source.url);
  throw new InputError([
    run === undefined
      ? { code: 'TRON_NO_RUN', path: where, message: 'the database holds no run yet; start one with `tron start`' }
      : {
          code: 'TRON_RUN_NOT_FOUND',
          path: `${where}: ${run}`,
          message: `the database holds no run ${run}; \`tron status --database\` names the latest`,
        },
  ]);
}
