/**
 * How a failure nobody expected is told: one line, with a stable code — its own when it
 * has one (`TRON_GIT_FAILED: …`), else TRON_ENGINE_FAILED naming what failed and where.
 * Never a stack trace (the CLI's `--debug` prints that), never more than one line.
 */
import { coded, isCoded } from '../core/problems.ts';

export function codedLine(err: Error, where: string): string {
  const first = (err.message || String(err)).split('\n')[0]!.trim();
  if (isCoded(first)) return first;
  return coded('TRON_ENGINE_FAILED', `${where} failed: ${first}`);
}
