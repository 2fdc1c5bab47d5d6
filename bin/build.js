#!/usr/bin/env node
// `npm run build` (run by `prepare`, so `npm install` and `npm ci` build too): compiles
// engine/ and evaluation/ to JavaScript in dist/. The output is built beside dist/ and
// swapped in whole, and its stamp (dist/BUILT) is written last: bin/tron.js runs dist/
// only while that stamp is newer than every source, so no one runs a half-built or
// stale dist/.
import { spawnSync } from 'node:child_process';
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const next = join(root, `.dist-${process.pid}`);
const old = join(root, `.dist-old-${process.pid}`);
const dist = join(root, 'dist');

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const built = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', next], { stdio: 'inherit' });
if (built.status !== 0) {
  rmSync(next, { recursive: true, force: true });
  console.error('tron build: tsc failed; dist/ is unchanged');
  process.exit(built.status ?? 1);
}
writeFileSync(join(next, 'BUILT'), `${new Date().toISOString()}\n`);
if (existsSync(dist)) renameSync(dist, old);
renameSync(next, dist);
rmSync(old, { recursive: true, force: true });
