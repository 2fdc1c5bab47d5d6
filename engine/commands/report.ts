/**
 * `tron report [RUN] [--repo DIR] [--json] [--database URL]`: run statistics from the
 * events alone, of the repository's latest run by default (with `--database`, of the
 * run written last in the database, from any host). The JSON keys are camelCase and every time is
 * a number of milliseconds, as in every JSON the CLI prints (docs/operating.md).
 */
import { join } from 'node:path';
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
}): Promise<number> {
  if (opts.database !== undefined) {
    const { at, events } = await readDatabaseRun(opts.database, opts.run);
    opts.print(opts.json ? JSON.stringify({ repository: at.repository, ...runStats(events) }, null, 2) : renderReport(events));
    return 0;
  }
  const runDir = resolveRun(opts.repo, opts.run);
  const { events } = readLog(join(runDir, 'events.jsonl'));
  opts.print(opts.json ? JSON.stringify({ runDir, ...runStats(events) }, null, 2) : renderReport(events));
  return 0;
}
