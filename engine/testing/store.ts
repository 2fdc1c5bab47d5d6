/**
 * What tests look at in a repository's object store: `git fsck` of the whole repository
 * (what the user would run to learn whether history is intact), and a fingerprint of
 * every file under `objects/`, to show that none that existed before a turn was removed,
 * truncated or rewritten.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { execa } from 'execa';

/** `git fsck --full` of the repository at `dir`: its exit status and what it said (dangling objects are not damage). */
export async function fsck(dir: string): Promise<{ code: number; said: string }> {
  const result = await execa('git', ['fsck', '--full', '--no-dangling', '--no-progress'], {
    cwd: dir,
    env: { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
    reject: false,
    all: true,
  });
  return { code: result.exitCode ?? -1, said: String(result.all ?? '').trim() };
}

/** Every file under the object store `objects` (tron's private stores aside): path → sha-256 of its bytes. */
export function storeFiles(objects: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.set(relative(objects, path), createHash('sha256').update(readFileSync(path)).digest('hex'));
    }
  };
  walk(objects);
  return files;
}

/** The files of `before` that `after` lost or changed (an empty list: nothing that existed was touched). */
export function touched(before: Map<string, string>, after: Map<string, string>): string[] {
  return [...before].filter(([path, hash]) => after.get(path) !== hash).map(([path]) => path);
}
