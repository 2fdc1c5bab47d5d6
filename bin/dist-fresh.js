// Whether dist/ was built after the last change to any TypeScript source under engine/
// or evaluation/ (tests aside): bin/tron.js runs dist/ only then, and the packing test
// builds first when it is not. The stamp dist/BUILT is written last by bin/build.js.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** `root`: the tron checkout. */
export function distIsFresh(root) {
  let stamp;
  try {
    stamp = statSync(join(root, 'dist', 'BUILT')).mtimeMs;
  } catch {
    return false;
  }
  for (const dir of ['engine', 'evaluation']) {
    for (const entry of readdirSync(join(root, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue;
      if (statSync(join(entry.parentPath, entry.name)).mtimeMs > stamp) return false;
    }
  }
  return true;
}
