/**
 * A builder's private object store, the sandbox side (docs/SECURITY.md, "The object
 * store"). Inside the sandbox the repository's `objects/` folder is a fresh, empty store
 * the builder may write; the real store is shown read-only at `SHARED_INSIDE`, and the
 * private store's `info/alternates` (read-only itself) names it. Every git inside —
 * whatever program runs it, with whatever environment — reads all of history and writes
 * only the private store: `rm`, `git gc --prune=now`, `git repack -adf` reach nothing
 * that existed before the turn. Afterwards engine/git/objects.ts brings in what the
 * branch needs, and the private store goes.
 *
 * Why a mount, not `GIT_OBJECT_DIRECTORY` and `GIT_ALTERNATE_OBJECT_DIRECTORIES`: the
 * variables reach only the processes that inherit them (an agent CLI may start its shell
 * with a clean environment; then its commits would fail on the read-only store), and they
 * apply to every repository a process touches — a `git init` or clone in a test, a
 * package manager's git — which would all write into this one store. The mount applies
 * to this repository alone and to every process, with nothing to inherit.
 *
 * The store lives beside the shared one, in `<common>/tron-objects/` (same disk, not
 * memory: a builder may commit large files), named after the engine's pid; stores of
 * engines that died before they could remove theirs are removed the first time.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { Mount } from './mount.ts';

/** Where the repository's own object store appears inside the sandbox (under its private /tmp). */
export const SHARED_INSIDE = '/tmp/.tron-shared-objects';

/** The folder of a repository's private stores, in its common git directory. */
export const STORES_DIR = 'tron-objects';

export interface PrivateStore {
  /** The private store, outside the sandbox. */
  dir: string;
  /** The repository's own store (`<common>/objects`), real path. */
  shared: string;
  /** What the sandbox mounts: the private store over `objects/`, the shared one read-only beside it. */
  mounts: Mount[];
  /** Removes the private store. Never throws. */
  remove(): void;
}

const swept = new Set<string>();

/** Makes a private store for one builder process in the repository whose common git directory is `common`. */
export function privateStore(common: string): PrivateStore {
  const objects = join(common, 'objects');
  const shared = realOr(objects);
  const parent = join(common, STORES_DIR);
  mkdirSync(parent, { recursive: true });
  if (!swept.has(parent)) {
    swept.add(parent);
    for (const name of list(parent)) {
      const pid = /^(\d+)-/.exec(name)?.[1];
      if (pid !== undefined && !existsSync(`/proc/${pid}`)) rmSync(join(parent, name), { recursive: true, force: true });
    }
  }
  const dir = mkdtempSync(join(parent, `${process.pid}-`));
  mkdirSync(join(dir, 'info'));
  mkdirSync(join(dir, 'pack'));
  // The shared store's own alternates (a clone made with --reference) are followed from
  // the private store too; relative ones are relative to the shared store, so made absolute.
  const chained = alternatesOf(shared);
  writeFileSync(join(dir, 'info', 'alternates'), [SHARED_INSIDE, ...chained].map((line) => `${line}\n`).join(''));
  const alternates = join(objects, 'info', 'alternates');
  const mounts: Mount[] = [
    { kind: 'rw', src: dir, dest: objects },
    { kind: 'ro', src: join(dir, 'info', 'alternates'), dest: alternates },
    { kind: 'ro', src: shared, dest: SHARED_INSIDE },
  ];
  // Alternates under /tmp would be hidden by the sandbox's private /tmp: shown again, read-only.
  for (const path of chained) if (isInside(path, '/tmp') && existsSync(path)) mounts.push({ kind: 'ro', src: path, dest: path });
  return { dir, shared, mounts, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The stores an object store at `dir` borrows from, absolute. */
function alternatesOf(dir: string): string[] {
  let text: string;
  try {
    text = readFileSync(join(dir, 'info', 'alternates'), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => realOr(resolve(dir, line)));
}

function realOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}
