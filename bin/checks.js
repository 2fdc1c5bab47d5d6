#!/usr/bin/env node
// `npm test`'s checks before the tests: lint, the type check and the build, run beside
// each other (each is one process, mostly on one core; in a row they were ~40 s of a run).
// Each one's output is printed whole, in this order, once all have ended; any failure
// fails the checks, so the tests do not start.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const checks = [
  ['lint', 'npm', ['run', '--silent', 'lint']],
  // Incremental: a second run re-checks only what changed (its state is kept in node_modules/.cache).
  ['tsc --noEmit', process.execPath, [tsc, '--noEmit', '--incremental', '--tsBuildInfoFile', 'node_modules/.cache/tron/tsc.tsbuildinfo']],
  ['build', process.execPath, ['bin/build.js']],
];

const ended = await Promise.all(
  checks.map(
    ([name, command, args]) =>
      new Promise((resolve) => {
        const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
        const chunks = [];
        child.stdout.on('data', (c) => chunks.push(c));
        child.stderr.on('data', (c) => chunks.push(c));
        child.on('error', (error) => resolve({ name, code: 1, output: `${error.message}\n` }));
        child.on('close', (code, signal) => resolve({ name, code: code ?? (signal ? 1 : 0), output: Buffer.concat(chunks).toString() }));
      }),
  ),
);
for (const { name, code, output } of ended) {
  process.stdout.write(`> ${name}${code === 0 ? '' : ` (failed, exit ${code})`}\n${output}`);
}
process.exitCode = ended.some((e) => e.code !== 0) ? 1 : 0;
