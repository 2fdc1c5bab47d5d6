#!/usr/bin/env node
// `npm run test:stressed [FILE…]`: end-to-end files run again beside two CPU burners. A
// test must assert on behaviour, never on timing; a test that holds on a quiet machine
// and still assumes timing shows it here. Without files, the shorter end-to-end files
// (each under a minute on an idle machine); name a longer one when you change its timing.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SHORTER = [
  'engine/runtime/lane.e2e.test.ts',
  'engine/runtime/attacks-block.test.ts',
  'engine/commands/cluster-operator.e2e.test.ts',
  'engine/commands/first-hour.e2e.test.ts',
  'engine/commands/blocked.e2e.test.ts',
  'engine/commands/failed-gate.e2e.test.ts',
  'engine/serve/page.test.ts',
  'engine/forge/queue.e2e.test.ts',
  'engine/forge/trust.e2e.test.ts',
  'engine/forge/pr.e2e.test.ts',
  'engine/forge/people.e2e.test.ts',
  'engine/forge/intake.e2e.test.ts',
  'engine/forge/withdraw.e2e.test.ts',
  'engine/forge/webhook.e2e.test.ts',
  'engine/workers/openai/agent.e2e.test.ts',
];
const files = process.argv.length > 2 ? process.argv.slice(2) : SHORTER;

const burners = [1, 2].map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
const stop = () => {
  for (const b of burners) b.kill('SIGKILL');
};
process.on('exit', stop);
const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const run = spawn(process.execPath, [vitest, 'run', ...files], { cwd: root, stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => run.kill(signal));
run.on('close', (code, signal) => {
  stop();
  process.exit(code ?? (signal ? 1 : 0));
});
