/**
 * A worker pool on the database's queue in a process of its own, for the tests that kill
 * one mid-job (engine/runtime/job-queue.test.ts): it claims jobs of the role in
 * TRON_TEST_ROLE, prints `claimed <seq> <attempt>` and never finishes them — until the
 * test kills it with SIGKILL, as a lost host would die.
 */
import { startWorkers } from '../runtime/job-queue.ts';

const url = process.env.TRON_TEST_QUEUE_URL!;
await startWorkers({
  url,
  roles: [process.env.TRON_TEST_ROLE ?? 'test'],
  slots: 1,
  agent: `doomed pid ${process.pid}`,
  heartbeatMs: Number(process.env.TRON_TEST_HEARTBEAT_MS ?? 500),
  run: (claimed, key) => {
    process.stdout.write(`claimed ${key.seq} ${claimed.attempt}\n`);
    return new Promise(() => undefined);
  },
});
process.stdout.write('ready\n');
