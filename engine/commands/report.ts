/**
 * `tron report [RUN] [--repo DIR] [--json] [--database URL]`: run statistics from the
 * events alone, of the repository's latest run by default (with `--database`, of the
 * run written last in the database, from any host). The JSON keys are camelCase and every time is
 * a number of milliseconds, as in every JSON the CLI prints (docs/operating.md).
 */
import { join, resolve } from 'node:path';
import { DatabaseRun, databaseToRead } from '../log/db-read.ts';
import { readLog } from '../log/eventlog.ts';
import { resolveRun } from '../log/runs.ts';
import { readDatabaseRun } from '../log/cluster.ts';
import { renderReport, runStats } from '../render/report.ts';

export async function reportCommand(opts: {
  repo: string;
  run: string | undefined;
  json: boolean;
  print: (line: string) => void;
  /** --database: the run from tron's database (any host): RUN is then a run id. */
  database?: string;
  /** Where TRON_DATABASE_URL is read (default: none). */
  env?: Readonly<Record<string, string | undefined>>;
}): Promise<number> {
  if (opts.database !== undefined) {
    const { at, events } = await readDatabaseRun(opts.database, opts.run);
    opts.print(opts.json ? JSON.stringify({ repository: at.repository, ...runStats(events) }, null, 2) : renderReport(events));
    return 0;
  }
  // A repository whose engine writes to a database: the table is the log of record (a live run is there only).
  const source = databaseToRead({
    repo: resolve(opts.repo),
    repoGiven: true,
    ...(opts.run !== undefined ? { run: opts.run } : {}),
    env: opts.env ?? {},
  });
  if (source) {
    const run = await DatabaseRun.open(source, opts.run);
    try {
      const events = await run.events();
      opts.print(opts.json ? JSON.stringify({ repository: run.at.repository, ...runStats(events) }, null, 2) : renderReport(events));
    } finally {
      await run.end();
    }
    return 0;
  }
  const runDir = resolveRun(opts.repo, opts.run);
  const { events } = readLog(join(runDir, 'events.jsonl'));
  opts.print(opts.json ? JSON.stringify({ runDir, ...runStats(events) }, null, 2) : renderReport(events));
  return 0;
}
