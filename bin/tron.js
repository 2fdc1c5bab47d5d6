#!/usr/bin/env node
// The tron entry point. An installed tron runs the compiled JavaScript in dist/. In the
// checkout, dist/ runs only while its build stamp is newer than every TypeScript source;
// after an edit, and until the next `npm run build`, the sources run through tsx (slower
// to start, never stale). So `npx tron`, the tests that spawn this file and an installed
// `tron` all run the code as it is now.
import { existsSync, readdirSync, statSync } from 'node:fs';

const at = (path) => new URL(`../${path}`, import.meta.url);

/** Whether dist/ was built after the last change to any source under engine/ or evaluation/. */
function distIsFresh() {
  let stamp;
  try {
    stamp = statSync(at('dist/BUILT')).mtimeMs;
  } catch {
    return false;
  }
  for (const dir of ['engine', 'evaluation']) {
    for (const entry of readdirSync(at(dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue;
      if (statSync(`${entry.parentPath}/${entry.name}`).mtimeMs > stamp) return false;
    }
  }
  return true;
}

let cli;
if (!existsSync(at('engine/cli.ts')) || distIsFresh()) {
  cli = await import('../dist/engine/cli.js');
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import('../engine/cli.ts');
}
process.exitCode = await cli.main(process.argv.slice(2));
