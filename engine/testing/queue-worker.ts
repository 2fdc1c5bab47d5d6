/**
 * A worker pool on the database's queue in a process of its own, for the tests that kill
 * one mid-job (engine/runtime/job-queue.test.ts): it claims jobs of the role in
 * TRON_TEST_ROLE, prints `claimed <seq> <attempt>` and never finishes them — until the
 * test kills it with SIGKILL, as a lost host would die. With TRON_TEST_INSTANT=1 it
 * finishes every job at once instead, reporting one input (the bench's instant agents:
 * evaluation/bench-agents.ts).
 */
import { startWorkers } from '../runtime/job-queue.ts';

const url = process.env.TRON_TEST_QUEUE_URL!;
await startWorkers({
  url,
  roles: [process.env.TRON_TEST_ROLE ?? 'test'],
  slots: 1,
  agent: `queue-worker pid ${process.pid}`,
  heartbeatMs: Number(process.env.TRON_TEST_HEARTBEAT_MS ?? 500),
  run: (claimed, key) => {
    if (process.env.TRON_TEST_INSTANT === '1')
      return Promise.resolve({ ok: true, inputs: [{ type: 'run.heartbeat', running: 0, parked: 0 }] });
    process.stdout.write(`claimed ${key.seq} ${claimed.attempt}\n`);
    return new Promise(() => undefined);
  },
});
process.stdout.write('ready\n');
