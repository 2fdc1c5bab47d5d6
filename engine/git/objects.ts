/**
 * Bringing a sandboxed builder's objects into the repository (docs/SECURITY.md, "The
 * object store"). Inside the sandbox the repository's object store is read-only and the
 * builder's git writes to a private store of its own, reading the shared one as an
 * alternate (engine/workers/private-store.ts). When the process has ended the engine
 * copies what is worth keeping — what the branch, a detached HEAD and the index reach —
 * from the private store into the shared one, and the private store is thrown away with
 * everything else it holds (amended commits, `gc` leftovers, whatever the worker wrote).
 *
 * The copy is `git pack-objects | git unpack-objects --strict` (or `index-pack --strict`
 * for many objects, as `git fetch` chooses): the receiving git hashes every object it is
 * given, so a file named for one object but holding another cannot slip in, and checks
 * that every object a new one names exists, in the pack or in the repository, so what
 * lands is connected. Nothing in the private store is believed: its alternates file is
 * removed first (the engine names the shared store itself), and its commit-graph,
 * multi-pack index and bitmaps — which would answer for the objects — are not read.
 *
 * A fetch from the private store (what the issue first proposed) would need a repository
 * around it with refs to fetch, and cannot carry the index's objects; this pipe is the
 * same two processes a local fetch runs, without the negotiation around them.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pipeGit, type Sha } from './run.ts';

/** What a private store holds: loose objects and packs, counted from its folders. */
export interface StoreCount {
  loose: number;
  packs: number;
}

/** Loose objects and packs in the object store at `dir` (no git). */
export function countObjects(dir: string): StoreCount {
  let loose = 0;
  let packs = 0;
  for (const name of list(dir)) {
    if (/^[0-9a-f]{2}$/.test(name)) loose += list(join(dir, name)).length;
  }
  for (const name of list(join(dir, 'pack'))) if (name.endsWith('.pack')) packs += 1;
  return { loose, packs };
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** At most this many objects arrive as loose objects; more, as one pack (git's transfer.unpackLimit). */
const UNPACK_LIMIT = 100;

/** Config for reading the private store: none of its own indexes answers for its objects. */
const DISTRUST = ['-c', 'core.commitGraph=false', '-c', 'core.multiPackIndex=false', '-c', 'pack.useBitmaps=false'] as const;

export interface ObjectImport {
  /** The private object store the worker wrote. */
  store: string;
  /** The repository's own object store (`<common>/objects`). */
  shared: string;
  /** The worker's worktree, whose index is read (`index`). */
  worktree: string;
  /** Commits whose history must be in the repository afterwards: the branch first, then a detached HEAD and the like. */
  tips: readonly Sha[];
  /** Commits already in the repository: the walk stops there (the branch before the turn). */
  known: readonly Sha[];
  /** Whether the trees and blobs the worktree's index names are brought in too. */
  index: boolean;
}

export type ImportResult = { ok: true } | { ok: false; problem: string };

/**
 * Copies what `tips` (and the index) reach from the private store into the repository
 * at `repo`, checked as described above. Nothing to do — an empty private store — costs
 * no process. Should the index or a later tip name an object the worker removed, the
 * first tip alone is tried: the branch is what the engine needs.
 */
export async function importObjects(repo: string, o: ObjectImport): Promise<ImportResult> {
  const count = countObjects(o.store);
  if (count.loose === 0 && count.packs === 0) return { ok: true };
  if (o.tips.length === 0 && !o.index) return { ok: true };
  // The worker could write this file: the engine says where the shared store is.
  for (const file of ['alternates', 'http-alternates']) rmSync(join(o.store, 'info', file), { force: true });
  const receive =
    count.packs === 0 && count.loose <= UNPACK_LIMIT ? ['unpack-objects', '-q', '--strict'] : ['index-pack', '--stdin', '--strict'];
  const attempt = (tips: readonly Sha[], index: boolean) =>
    pipeGit(
      {
        cwd: o.worktree,
        args: [...DISTRUST, 'pack-objects', '--revs', '--local', '--stdout', '-q', ...(index ? ['--indexed-objects'] : [])],
        env: { GIT_OBJECT_DIRECTORY: o.store, GIT_ALTERNATE_OBJECT_DIRECTORIES: o.shared },
        input: [...tips, '--not', ...o.known].map((line) => `${line}\n`).join(''),
      },
      { cwd: repo, args: receive },
    );
  let piped = await attempt(o.tips, o.index);
  const narrower = (o.index || o.tips.length > 1) && o.tips.length > 0;
  if (narrower && (piped.from.exitCode !== 0 || piped.to.exitCode !== 0)) piped = await attempt(o.tips.slice(0, 1), false);
  const failed = [piped.from, piped.to].find((r) => r.exitCode !== 0);
  if (failed) {
    const detail = (failed.stderr.trim() || `exit ${failed.exitCode}`).split('\n').slice(-3).join('; ');
    return { ok: false, problem: `the worker's objects could not be brought into the repository (${detail})` };
  }
  return { ok: true };
}
