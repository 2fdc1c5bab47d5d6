// Runs at `npm install` (prepare): links node_modules/.bin/tron to this checkout's entry,
// so `node_modules/.bin/tron` works the same as `npx tron` with no global install.
// A link that already points there is left alone.
import { mkdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const binDir = join(root, 'node_modules', '.bin');
const link = join(binDir, 'tron');
const target = relative(binDir, join(root, 'bin', 'tron.js'));
let current;
try {
  current = readlinkSync(link);
} catch {
  current = undefined;
}
if (current !== target) {
  mkdirSync(binDir, { recursive: true });
  rmSync(link, { force: true });
  symlinkSync(target, link);
}
