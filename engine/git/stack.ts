/**
 * The merge lane's rebase: a block's own commits replayed onto another commit (trunk, or
 * the block below it in a stack) with no worker. A block of one commit (the common case)
 * is replayed in the object store — merged by `git merge-tree --write-tree`, committed by
 * `commit-tree` — with no checkout and no file written; a block of several commits is
 * cherry-picked in a checkout the engine owns (git 2.39's merge-tree cannot take the
 * merge base each later commit needs). Like every engine git call it runs no hook, filter, merge
 * driver or signing program (run.ts); commits are made by `tron <tron@localhost>` from the
 * environment, never HOME's config, and keep their author, date and message. Nothing here
 * moves a ref: the stack's commits are objects until a landing points refs at them.
 *
 * A block's own commits are those its head adds over where it left trunk: upstream =
 * merge-base(trunk, head), replayed oldest first, merge commits skipped (as `git rebase`
 * does). Whether the rebase changed the patch is told by patch ids (query.ts), computed
 * over the whole of the block's change before and after.
 */
import { gitOut, runGit, runGitAs, type Sha } from './run.ts';
import { isAncestor, mergeBase, patchId } from './query.ts';

export type Replayed =
  | { outcome: 'fast_forward' | 'rebased'; sha: Sha; upstream: Sha; patchBefore: string; patchAfter: string }
  | { outcome: 'conflict'; upstream: Sha; patchBefore: string; files: string[] };

/**
 * Puts block head `sha` on top of `onto`. `trunk` is where the block's own commits start
 * from. When `onto` is already an ancestor of `sha` by a history without merges, `sha`
 * itself is the answer (fast_forward); otherwise its own commits are replayed onto `onto`
 * — one commit in the object store, several by cherry-pick in the checkout `workdir(onto)`
 * gives (the engine's own, clean, at `onto`) — and a conflict is reported with its paths
 * (an abandoned cherry-pick leaves the checkout at `onto`; a failed object-store replay
 * leaves only unreachable objects).
 *
 * `patch` is the patch id the caller already holds for the block: it is computed afresh
 * only when the replayed patch differs from it, which does not change the answer.
 */
export async function replayOnto(
  repo: string,
  workdir: (onto: Sha) => Promise<string>,
  opts: { sha: Sha; onto: Sha; trunk: Sha; patch?: string; ontoIsNew?: boolean },
): Promise<Replayed> {
  // A commit the stack has just made (`ontoIsNew`) is in no block's history.
  const fastForward =
    !opts.ontoIsNew &&
    (await isAncestor(repo, opts.onto, opts.sha)) &&
    (await gitOut(repo, ['rev-list', '--min-parents=2', `${opts.onto}..${opts.sha}`])) === '';
  // A head that already sits on trunk: its own commits start at trunk, and its patch cannot have changed.
  if (fastForward && opts.onto === opts.trunk) {
    const patch = opts.patch ?? (await patchId(repo, opts.onto, opts.sha));
    return { outcome: 'fast_forward', sha: opts.sha, upstream: opts.onto, patchBefore: patch, patchAfter: patch };
  }
  const upstream = await mergeBase(repo, opts.trunk, opts.sha);
  const before = async (after?: string): Promise<string> =>
    opts.patch !== undefined && (after === undefined || after === opts.patch) ? opts.patch : patchId(repo, upstream, opts.sha);
  if (fastForward) {
    const patchAfter = await patchId(repo, opts.onto, opts.sha);
    return { outcome: 'fast_forward', sha: opts.sha, upstream, patchBefore: await before(patchAfter), patchAfter };
  }
  const commits = (await gitOut(repo, ['rev-list', '--reverse', '--topo-order', '--no-merges', `${upstream}..${opts.sha}`]))
    .split('\n')
    .filter(Boolean);
  let sha = opts.onto;
  if (commits.length === 1) {
    const replayed = await replayCommit(repo, opts.onto, commits[0]!);
    if ('files' in replayed) return { outcome: 'conflict', upstream, patchBefore: await before(), files: replayed.files };
    sha = replayed.sha;
  } else if (commits.length > 1) {
    const dir = await workdir(opts.onto);
    const picked = await runGit(dir, ['cherry-pick', '--allow-empty', '--keep-redundant-commits', ...commits]);
    if (picked.exitCode !== 0) {
      const files = (await gitOut(dir, ['diff', '--name-only', '--diff-filter=U'])).split('\n').filter(Boolean);
      await runGit(dir, ['cherry-pick', '--abort']);
      const why = files.length > 0 ? files : [picked.stderr.trim().split('\n')[0] ?? 'cherry-pick failed'];
      return { outcome: 'conflict', upstream, patchBefore: await before(), files: why };
    }
    sha = (await gitOut(dir, ['rev-parse', 'HEAD'])).trim();
  }
  const patchAfter = await patchId(repo, opts.onto, sha);
  return { outcome: 'rebased', sha, upstream, patchBefore: await before(patchAfter), patchAfter };
}

/**
 * One commit replayed onto `onto` in the object store: its change merged with `onto`
 * three-way from where the two histories meet — for a block's only commit, its parent,
 * as cherry-pick would — then a commit of that tree on `onto` with the original author,
 * date and message. A conflict: the paths, nothing committed.
 */
async function replayCommit(repo: string, onto: Sha, commit: Sha): Promise<{ sha: Sha } | { files: string[] }> {
  const merged = await runGit(repo, ['merge-tree', '--write-tree', '--name-only', '--no-messages', onto, commit]);
  const [tree, ...conflicted] = merged.stdout.split('\n');
  if (merged.exitCode !== 0 || !tree || !/^[0-9a-f]{40,64}$/.test(tree)) {
    const files = merged.exitCode === 1 ? [...new Set(conflicted.filter(Boolean))] : [];
    return { files: files.length > 0 ? files : [merged.stderr.trim().split('\n')[0] || 'the merge failed'] };
  }
  // Author and message as recorded, read raw (no mailmap, no re-encoding).
  const raw = await gitOut(repo, ['cat-file', 'commit', commit]);
  const split = raw.indexOf('\n\n');
  const header = split < 0 ? raw : raw.slice(0, split);
  const message = split < 0 ? '' : raw.slice(split + 2);
  const author = /^author (.*) <([^>]*)> (\d+ [+-]\d{4})$/m.exec(header);
  const made = await runGitAs(
    repo,
    ['commit-tree', tree, '-p', onto, '-F', '-'],
    message,
    author ? { GIT_AUTHOR_NAME: author[1]!, GIT_AUTHOR_EMAIL: author[2]!, GIT_AUTHOR_DATE: author[3]! } : {},
  );
  if (made.exitCode !== 0) return { files: [made.stderr.trim().split('\n')[0] || 'commit-tree failed'] };
  return { sha: made.stdout.trim() };
}
