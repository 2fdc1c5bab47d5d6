/** `tron report RUN_DIR [--json]`: run statistics from the events alone. */
import { join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';
import { readLog } from '../runtime/eventlog.ts';
import { renderReport, runStats } from '../render/report.ts';

export async function reportCommand(opts: { runDir: string | undefined; json: boolean; print: (line: string) => void }): Promise<number> {
  if (!opts.runDir)
    throw new InputError([
      { code: 'TRON_USAGE', path: 'RUN_DIR', message: 'name a run directory, e.g. tron report .tron/runs/20261130-024812-001' },
    ]);
  const { events } = readLog(join(resolve(opts.runDir), 'events.jsonl'));
  opts.print(opts.json ? JSON.stringify(runStats(events), null, 2) : renderReport(events));
  return 0;
}
