/**
 * What the engine does about a job the queue will never hand out again (docs/cluster.md,
 * failure semantics): a role with rights on the queue library's tables could delete one,
 * and the engine would wait on it forever. So, while it waits, it looks for them
 * (engine/queue/pg-job-control.ts `exhaustedJobs`) and finishes each with a failure naming
 * why: the effect fails as it would have in process, decided like any failed turn or test
 * run. An attempt still running it is refused when it reports (the job is done). A job
 * whose attempts ran out needs no look: the claim past its last gives it up and announces
 * the failure (engine/schema/migrations/0011-attempts.ts).
 */
import type pg from 'pg';
import { exhaustedJobs, failJob } from './pg-job-control.ts';
import type { RunKey } from '../log/pg-log.ts';

/** Finishes the given waiting jobs the queue gave up on, each with its reason; how many it finished. */
export async function failExhausted(client: pg.ClientBase, at: RunKey, seqs: readonly number[]): Promise<number> {
  if (seqs.length === 0) return 0;
  let n = 0;
  for (const { seq, reason } of await exhaustedJobs(client, at, seqs)) {
    const failed = await failJob(client, { ...at, seq }, { ok: false, error: { message: `the job was given up: ${reason}` } });
    if (failed) n += 1;
  }
  return n;
}
