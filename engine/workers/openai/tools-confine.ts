/**
 * Path confinement for the built-in agent's tools. A model is not trusted with the
 * filesystem: every path it names must stay inside the turn's worktree, by name and by
 * real path, or the tool refuses with a message the model can read. Nothing outside the
 * worktree is ever read or written because a model asked.
 */
import { lstat, realpath } from 'node:fs/promises';
import path from 'node:path';

export type Confined = { ok: true; abs: string; rel: string } | { ok: false; error: string };

/**
 * Resolves `requested` inside `root`. Refuses absolute paths, `..` escapes, symlinks
 * (anywhere along the path) whose real path leaves the worktree, dangling symlinks, and
 * — for writes — anything under `.git`. The check uses the real path of the nearest
 * existing ancestor, so a path that does not exist yet is judged by where it would land.
 */
export async function confine(root: string, requested: unknown, mode: 'read' | 'write'): Promise<Confined> {
  if (typeof requested !== 'string' || requested === '') {
    return { ok: false, error: 'a path is required: give it relative to the worktree, e.g. "src/index.ts"' };
  }
  if (requested.includes('\0')) return { ok: false, error: `refused ${JSON.stringify(requested)}: a path may not hold NUL` };
  if (path.isAbsolute(requested) || /^~(\/|$)/.test(requested)) {
    return {
      ok: false,
      error: `refused ${requested}: absolute paths are not allowed; give the path relative to the worktree`,
    };
  }
  const realRoot = await realpath(root);
  const abs = path.resolve(realRoot, requested);
  const rel = path.relative(realRoot, abs);
  if (escapes(rel)) {
    return { ok: false, error: `refused ${requested}: it leads outside the worktree` };
  }
  const real = await realOfNearestAncestor(abs);
  if (real === undefined) {
    return { ok: false, error: `refused ${requested}: it goes through a dangling symbolic link` };
  }
  const realRel = path.relative(realRoot, real);
  if (escapes(realRel)) {
    return { ok: false, error: `refused ${requested}: a symbolic link leads outside the worktree` };
  }
  if (mode === 'write' && (isGitPath(rel) || isGitPath(realRel))) {
    return { ok: false, error: `refused ${requested}: .git is managed by the engine; git internals are not writable` };
  }
  return { ok: true, abs: real, rel: realRel === '' ? '.' : realRel };
}

function escapes(rel: string): boolean {
  return rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel);
}

function isGitPath(rel: string): boolean {
  return rel.split(path.sep).includes('.git');
}

/**
 * The real path `abs` would have: realpath of the deepest existing ancestor plus the
 * missing tail. Undefined when an existing entry on the way is a symlink that points
 * nowhere (writing through it would create its target, wherever that is).
 */
async function realOfNearestAncestor(abs: string): Promise<string | undefined> {
  const tail: string[] = [];
  let current = abs;
  for (;;) {
    try {
      const real = await realpath(current);
      return path.join(real, ...tail);
    } catch (error) {
      if (!isMissing(error)) throw error;
      try {
        await lstat(current);
        return undefined; // it exists, but resolving it fails: a dangling link
      } catch (inner) {
        if (!isMissing(inner)) throw inner;
      }
    }
    const parent = path.dirname(current);
    if (parent === current) return undefined;
    tail.unshift(path.basename(current));
    current = parent;
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
