/**
 * `tron status`: every block of the latest run — its phase, attempt, what it waits on, how
 * long it has been in its phase (across runs: recovery carries the time a block entered
 * the phase it resumes in), why it is parked or abandoned, and an operator answer waiting
 * in `.tron/inbox/`. Folded from the events; `--json` gives the same with numbers (ms),
 * titles and shas, in the camelCase every JSON of the CLI uses.
 */
import { join, resolve } from 'node:path';
import type { Clock } from '../os/clock.ts';
import { formatDuration } from '../core/duration.ts';
import { isHolderAlive, readLock } from '../log/lockfile.ts';
import { latestRun } from '../log/runs.ts';
import { noRunYet } from '../log/run-select.ts';
import { readLog } from '../log/eventlog.ts';
import { apply, initialState } from '../core/state.ts';
import { requireRepo } from './project-check.ts';
import { type StatusRow, statusRows, waitingAnswers } from '../render/status-rows.ts';
import { openDatabase, readPgRun, redact } from '../log/pg-log.ts';
import { type DatabaseSource, databaseToRead, findRun } from '../log/db-read.ts';
import { InputError } from '../core/errors.ts';
import { forgeLinks } from '../render/forge-links.ts';

/** Each row with its block's issue and pull request on the forge, where it has them. */
function withForgeLinks(rows: StatusRow[], events: Parameters<typeof forgeLinks>[0]): StatusRow[] {
  const links = forgeLinks(events);
  return rows.map((r) => ({ ...r, ...links.get(r.block) }));
}

import { loadConfig } from '../project/config.ts';
import { distanceFromRemote } from '../git/remote.ts';

export { foldRun, latestRun } from '../log/runs.ts';
export { statusRows, type PendingAnswer, type StatusRow } from '../render/status-rows.ts';

/**
 * With [remote]: how far your checkout is from the remote's trunk as tron last fetched
 * it (`refs/remotes/<name>/<trunk>`). No network: status answers at once, even offline.
 */
async function remoteDistance(repo: string) {
  const { config } = loadConfig(repo);
  if (!config?.remote) return undefined;
  const d = await distanceFromRemote(repo, config.remote.name, config.trunk);
  return d && { name: config.remote.name, trunk: config.trunk, ...d };
}

export interface StatusOptions {
  repo: string;
  json: boolean;
  clock: Clock;
  print: (line: string) => void;
  /** --database: read the latest run from tron's database (any host, no repository needed). */
  database?: string;
  /** Where TRON_DATABASE_URL is read (default: none). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Whether --repo was given: with --database, it narrows the runs to that repository's. */
  repoGiven?: boolean;
}

export async function statusCommand(opts: StatusOptions): Promise<number> {
  if (opts.database !== undefined) {
    // With --repo, that repository's runs (its name in the database); without, the run written last.
    const source = opts.repoGiven
      ? databaseToRead({ repo: resolve(opts.repo), repoGiven: true, database: opts.database, env: opts.env ?? {} })
      : undefined;
    return statusFromDatabase({ ...opts, database: opts.database }, source ?? { url: opts.database });
  }
  const repo = resolve(opts.repo);
  requireRepo(repo);
  // A repository whose engine writes to a database: the table is the log of record (a live run's lines are there only).
  const source = databaseToRead({ repo, repoGiven: true, env: opts.env ?? {} });
  if (source) return statusFromDatabase({ ...opts, database: source.url }, source);
  const run = latestRun(repo);
  if (!run) {
    opts.print(
      opts.json ? JSON.stringify({ repo, run: null, runDir: null, engine: null, blocks: [] }, null, 2) : `tron status: ${noRunYet(repo)}`,
    );
    return 0;
  }
  // A torn last line is left out, as the engine would.
  const events = readLog(join(run, 'events.jsonl')).events;
  const state = events.reduce(apply, initialState());
  const now = opts.clock.now();
  const rows = withForgeLinks(statusRows(state, now, waitingAnswers(repo, events)), events);
  const holder = readLock(join(repo, '.tron', 'engine.lock'));
  const running = holder !== undefined && isHolderAlive(holder);
  const engine = running ? 'running' : state.finished ? 'finished' : 'interrupted';
  const remote = await remoteDistance(repo);
  if (opts.json) {
    const json = {
      repo,
      run: state.run ?? null,
      runDir: run,
      engine,
      ...(running ? { pid: holder.pid } : {}),
      now,
      ...(remote ? { remote } : {}),
      blocks: rows,
    };
    opts.print(JSON.stringify(json, null, 2));
    return 0;
  }
  const said = running
    ? ` (running: pid ${holder.pid})`
    : state.finished
      ? ' (finished)'
      : ' (interrupted: the next tron start recovers it)';
  opts.print(`run ${state.run ?? '?'}${said} — ${run}`);
  if (remote) {
    const where =
      remote.ahead === 0 && remote.behind === 0
        ? `at ${remote.name}/${remote.trunk}`
        : `${remote.behind} commit(s) behind and ${remote.ahead} ahead of ${remote.name}/${remote.trunk}`;
    opts.print(`your checkout is ${where} (${remote.remoteSha.slice(0, 12)}, as of tron's last fetch)`);
  }
  printRows(opts, rows, running);
  return 0;
}

/**
 * `tron status --database URL`: the run written last in the table (whichever repository),
 * read as the file is;
 * the engine is running while its lease is live. Lines are not checked against a key
 * (this host may hold none); the engine's own reads check them.
 */
async function statusFromDatabase(opts: StatusOptions & { database: string }, source: DatabaseSource): Promise<number> {
  const db = await openDatabase(opts.database);
  try {
    const at = await findRun(db, source, undefined).catch((err: unknown) => {
      if (err instanceof InputError && err.problems[0]?.code === 'TRON_NO_RUN') return undefined;
      throw err;
    });
    if (!at) {
      opts.print(
        opts.json
          ? JSON.stringify({ database: redact(opts.database), run: null, engine: null, blocks: [] }, null, 2)
          : `tron status: no run${source.repository === undefined ? '' : ` of ${source.repository}`} in ${redact(opts.database)} yet`,
      );
      return 0;
    }
    const events = (await readPgRun(db, at, source.key)).events;
    const lease = await db.client.query<{ holder: string; generation: string }>(
      'select holder, generation from tron_lease where repository = $1 and expires_at > now()',
      [at.repository],
    );
    const leader = lease.rows[0];
    const state = events.reduce(apply, initialState());
    const rows = withForgeLinks(statusRows(state, opts.clock.now(), new Map()), events);
    const running = leader !== undefined && !state.finished;
    const engine = running ? 'running' : state.finished ? 'finished' : 'interrupted';
    if (opts.json) {
      const json = {
        database: redact(opts.database),
        repository: at.repository,
        run: state.run ?? null,
        engine,
        ...(leader ? { leader: { holder: leader.holder, generation: Number(leader.generation) } } : {}),
        now: opts.clock.now(),
        blocks: rows,
      };
      opts.print(JSON.stringify(json, null, 2));
      return 0;
    }
    const said = running
      ? ` (running: ${leader.holder}, generation ${leader.generation})`
      : state.finished
        ? ' (finished)'
        : ' (interrupted: the next tron start recovers it)';
    opts.print(`run ${state.run ?? '?'}${said} — ${at.repository} in ${redact(opts.database)}`);
    printRows(opts, rows, running);
    return 0;
  } finally {
    await db.end();
  }
}

function printRows(opts: StatusOptions, rows: StatusRow[], running: boolean): void {
  const width = Math.max(5, ...rows.map((r) => r.block.length));
  opts.print(`${'block'.padEnd(width)}  ${'phase'.padEnd(9)}  attempt  ${'waiting'.padEnd(11)}  ${'age'.padEnd(8)}  title`);
  for (const r of rows) {
    const age = formatDuration(Math.floor(r.ageMs / 1000) * 1000);
    // A blocked block shows as blocked, whatever its phase in the fold (pending, or parked when its dependency was abandoned).
    const phase = r.blockedBy ? 'blocked' : r.phase;
    opts.print(
      `${r.block.padEnd(width)}  ${phase.padEnd(9)}  ${String(r.attempt).padEnd(7)}  ${r.waiting.padEnd(11)}  ${age.padEnd(8)}  ${r.title}`,
    );
    const indent = ' '.repeat(width + 2);
    // Every line of the cause under the row (a failing test's own lines), none of them reaching the row's column.
    if (r.reason) opts.print(`${indent}why: ${r.reason.split('\n').join(`\n${indent}     `)}`);
    if (r.issue) opts.print(`${indent}issue: ${r.issue.ref}${r.issue.url ? ` ${r.issue.url}` : ''}`);
    if (r.pull) opts.print(`${indent}pull request: #${r.pull.number} ${r.pull.url} (${r.pull.state})`);
    if (r.answer)
      opts.print(
        `${indent}answered: ${r.answer.line} (${r.answer.file}; ${running ? 'the engine reads it now' : 'the next tron start reads it'})`,
      );
  }
}
