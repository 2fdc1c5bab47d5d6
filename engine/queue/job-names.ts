/**
 * The names a `tron agent` takes from a claimed job and makes paths of on its host: the
 * run id (`.git/tron-agent/<run>/`), the block (`turns/<block>/…`) and a test run's log
 * (`tests/<name>.log`). The engine queues only names of tron's shapes (engine/core/names.ts);
 * a job row that carries another — written by anyone but tron — is refused before any
 * folder is made, never followed out of the clone.
 */
import { BLOCK_ID, isRunId, shownName, TEST_LOG } from '../core/names.ts';
import type { JobKey } from './pg-job-types.ts';

/** Why the job's names are not tron's (one line), or undefined when they are. */
export function refusedJobNames(key: JobKey, names: { block: unknown; log?: unknown }): string | undefined {
  const bad = [
    ...(isRunId(key.run) ? [] : [`run ${shownName(key.run)}`]),
    ...(typeof names.block === 'string' && BLOCK_ID.test(names.block) ? [] : [`block ${shownName(names.block)}`]),
    ...('log' in names && !(typeof names.log === 'string' && TEST_LOG.test(names.log)) ? [`log ${shownName(names.log)}`] : []),
  ];
  return bad.length === 0
    ? undefined
    : `job ${key.seq} names ${bad.join(', ')}: not a name tron queues (it would be a path out of this clone's .git/tron-agent/); refused, nothing written`;
}
