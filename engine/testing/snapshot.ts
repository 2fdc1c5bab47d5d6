/** Every path under a folder with its bytes: how tests prove that a refusal changed nothing. */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/** Every path under `dir` (including .git) with its bytes as base64, or "dir" for a folder. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(dir, rel)).sort()) {
      const child = path.join(rel, name);
      if (statSync(path.join(dir, child)).isDirectory()) {
        out[child] = 'dir';
        walk(child);
      } else out[child] = readFileSync(path.join(dir, child)).toString('base64');
    }
  };
  walk('.');
  return out;
}
