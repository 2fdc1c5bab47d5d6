/**
 * A worker pool on the database's queue in a process of its own, for the tests that kill
 * one mid-job (engine/queue/job-queue.test.ts): it claims jobs of the role in
 * TRON_TEST_ROLE of the repository in TRON_TEST_REPOSITORY, prints `claimed <seq> <attempt>`
 * and never finishes them — until the test kills it with SIGKILL, as a lost host would die,
 * or, with TRON_TEST_FINISH_ON=SIGUSR2, until that signal, when it reports one input (a pool
 * paused past its heartbeat and woken: job-queue.test.ts). With TRON_TEST_INSTANT=1 it
 * finishes every job at once instead, reporting a trunk test's result for the job's
 * request (the bench's instant agents: evaluation/bench-agents.ts).
 */
import { startWorkers } from '../queue/job-queue.ts';

const url = process.env.TRON_TEST_QUEUE_URL!;
const finish: Array<() => void> = [];
if (process.env.TRON_TEST_FINISH_ON)
  process.on(process.env.TRON_TEST_FINISH_ON as NodeJS.Signals, () => {
    for (const f of finish.splice(0)) f();
  });
await startWorkers({
  url,
  repository: process.env.TRON_TEST_REPOSITORY ?? 'bench',
  roles: [process.env.TRON_TEST_ROLE ?? 'test'],
  slots: 1,
  agent: `queue-worker pid ${process.pid}`,
  heartbeatMs: Number(process.env.TRON_TEST_HEARTBEAT_MS ?? 500),
  onStale: (key, attempt) => process.stdout.write(`stale ${key.seq} ${attempt}\n`),
  run: (claimed, key) => {
    const { block, sha } = (claimed.request ?? {}) as { block?: string; sha?: string };
    if (process.env.TRON_TEST_INSTANT === '1')
      return Promise.resolve({ ok: true, inputs: [{ type: 'trunk.tested', block, sha, ok: true }] });
    process.stdout.write(`claimed ${key.seq} ${claimed.attempt}\n`);
    return new Promise((resolve) => finish.push(() => resolve({ ok: true, inputs: [{ type: 'stale', attempt: claimed.attempt }] })));
  },
});
process.stdout.write('ready\n');
