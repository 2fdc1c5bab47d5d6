#!/usr/bin/env node
// The tron entry point. An installed tron runs the compiled JavaScript in dist/. In the
// checkout, dist/ runs only while its build stamp is newer than every TypeScript source;
// after an edit, and until the next `npm run build`, the sources run through tsx (slower
// to start, never stale). So `npx tron`, the tests that spawn this file and an installed
// `tron` all run the code as it is now.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// The commands that run workers, tests or a server scrub their own environment before
// anything else starts — tsx's loader and its esbuild process copy it when they start —
// and keep the copy for their own calls (bin/own-env.js, engine/cli.ts).
if (['start', 'agent', 'serve'].includes(process.argv.slice(2).find((arg) => arg !== '--debug') ?? '')) {
  const { scrubOwnEnvironment } = await import('./own-env.js');
  const scrubbed = scrubOwnEnvironment();
  if (scrubbed.problem)
    console.error(`tron: warning: ${scrubbed.problem}; without a sandbox, what tron runs can read its secrets there (docs/SECURITY.md)`);
}

const root = fileURLToPath(new URL('..', import.meta.url));
const checkout = existsSync(new URL('../engine/cli.ts', import.meta.url));
let cli;
if (!checkout || (await import('./dist-fresh.js')).distIsFresh(root)) {
  cli = await import('../dist/engine/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import('../engine/cli.ts');
}
// While the command runs, the process stays up: a wait of its own that holds no handle (an
// engine's bounded wait on a pool the database dropped) ends as it should, not in Node's
// exit 13 (a top-level await left unsettled) with its lease and its coded line lost.
const running = setInterval(() => undefined, 1 << 30);
const status = await cli.main(process.argv.slice(2)).finally(() => clearInterval(running));
process.exitCode = status;
// An engine that must stop, exits: whatever the command left open (a pool that would not
// close, a connection, a timer) does not keep it running past a grace for its output.
setTimeout(() => {
  if (process.env.TRON_DEBUG === '1')
    process.stderr.write(`tron: still open after the command ended: ${process.getActiveResourcesInfo().join(', ')}; exiting\n`);
  process.exit(status);
}, 2000).unref();
