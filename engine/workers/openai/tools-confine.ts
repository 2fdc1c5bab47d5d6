/**
 * Path confinement for the built-in agent's tools, by name. A model is not trusted with
 * the filesystem: every path it names must be relative and stay inside the turn's
 * worktree, or the tool refuses with a message the model can read. What the name leads
 * to is the business of tools-fs.ts, which opens it without following a single link —
 * so a name that passes here still cannot reach outside through a link, a swapped
 * folder or a hard link.
 */
import path from 'node:path';

export type Confined = { ok: true; rel: string } | { ok: false; error: string };

/**
 * The worktree-relative path `requested` names. Refuses a path that is not a non-empty
 * string, holds NUL, is absolute (or `~`), climbs out with `..`, and — for writes —
 * anything under `.git`.
 */
export function confine(requested: unknown, mode: 'read' | 'write'): Confined {
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
  const rel = path.normalize(requested).replace(/[/\\]+$/, '') || '.';
  if (rel === '..' || rel.startsWith(`..${path.sep}`)) {
    return { ok: false, error: `refused ${requested}: it leads outside the worktree` };
  }
  if (mode === 'write' && rel.split(path.sep).includes('.git')) {
    return { ok: false, error: `refused ${requested}: .git is managed by the engine; git internals are not writable` };
  }
  return { ok: true, rel };
}
