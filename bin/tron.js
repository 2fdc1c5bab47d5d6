#!/usr/bin/env node
// The tron entry point. An installed tron runs the compiled JavaScript in dist/. In the
// checkout, dist/ runs only while its build stamp is newer than every TypeScript source;
// after an edit, and until the next `npm run build`, the sources run through tsx (slower
// to start, never stale). So `npx tron`, the tests that spawn this file and an installed
// `tron` all run the code as it is now.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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
process.exitCode = await cli.main(process.argv.slice(2));
