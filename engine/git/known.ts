/**
 * What git already said about objects, kept for the engine's process: answers that
 * depend on nothing but object ids — a commit's parents (written in the commit, which its
 * id names), the patch id of `base..head` (diff flags fixed: run.ts's DIFF_FLAGS) — are the
 * same however often they are asked, so a block's second question costs no process. The
 * gate's patch id is the lane's patch id before a replay; the commits the lane's replay
 * wrote are the ones the landing walks and the wrap asks about.
 *
 * Only answers are kept, never absences: an object missing now may be fetched later, and
 * whatever is not kept is asked of git as before. Keys carry the repository, so one
 * repository's objects never answer for another's store. Bounded: past `LIMIT` entries
 * the table starts again (a long run asks about its recent commits).
 */
import { resolve } from 'node:path';
import { isFullSha, type Sha } from './run.ts';

const LIMIT = 20_000;

class Kept<V> {
  private readonly table = new Map<string, V>();

  get(repo: string, key: string): V | undefined {
    return this.table.get(`${resolve(repo)}\0${key}`);
  }

  set(repo: string, key: string, value: V): void {
    if (this.table.size >= LIMIT) this.table.clear();
    this.table.set(`${resolve(repo)}\0${key}`, value);
  }
}

const parents = new Kept<readonly Sha[]>();
const patches = new Kept<string>();

/** Records the parents of `commit` as git (or the engine's own fast-import) wrote them. */
export function keepParents(repo: string, commit: Sha, of: readonly Sha[]): void {
  if (isFullSha(commit) && of.every(isFullSha)) parents.set(repo, commit, [...of]);
}

/** The parents of `commit` told before, if any. */
export function knownParents(repo: string, commit: Sha): readonly Sha[] | undefined {
  return parents.get(repo, commit);
}

/** Records `rev-list --parents` output: one `<commit> <parent>…` line each. */
export function keepParentLines(repo: string, listing: string): void {
  for (const line of listing.split('\n')) {
    const [commit, ...of] = line.split(' ');
    if (commit) keepParents(repo, commit, of);
  }
}

/** The patch id of `base..head` told before, if any. */
export function knownPatch(repo: string, base: Sha, head: Sha): string | undefined {
  return isFullSha(base) && isFullSha(head) ? patches.get(repo, `${base} ${head}`) : undefined;
}

export function keepPatch(repo: string, base: Sha, head: Sha, patch: string): void {
  if (isFullSha(base) && isFullSha(head)) patches.set(repo, `${base} ${head}`, patch);
}

/**
 * The commits of `old..top` when the kept parents tell them: a line of one-parent commits
 * from `top` down to `old` (what a stack the lane wrote is). Undefined when they do not —
 * a commit not kept, a merge, a walk longer than `limit` — and git must be asked.
 */
export function knownLine(repo: string, old: Sha, top: Sha, limit = 1000): Set<Sha> | undefined {
  const line = new Set<Sha>();
  let at = top;
  while (at !== old) {
    const of = parents.get(repo, at);
    if (of === undefined || of.length !== 1 || line.size >= limit) return undefined;
    line.add(at);
    at = of[0]!;
  }
  return line;
}

/**
 * Whether `a` is an ancestor of `b` (or `b` itself), when the kept parents show it:
 * true, or undefined — never false, since a commit not kept may still lead to `a`.
 */
export function knownAncestor(repo: string, a: Sha, b: Sha, limit = 1000): true | undefined {
  const seen = new Set<Sha>();
  const queue: Sha[] = [b];
  while (queue.length > 0 && seen.size < limit) {
    const at = queue.shift()!;
    if (at === a) return true;
    if (seen.has(at)) continue;
    seen.add(at);
    queue.push(...(parents.get(repo, at) ?? []));
  }
  return undefined;
}
