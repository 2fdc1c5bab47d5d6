/**
 * The merge lane's rebase: a block's own commits replayed onto another commit (trunk, or
 * the block below it in a stack) in a checkout the engine owns, by cherry-pick, with no
 * worker. Like every engine git call it runs no hook, filter, merge driver or signing
 * program (run.ts); commits are made by `tron <tron@localhost>` from the environment, never
 * HOME's config, and keep their author. Nothing here moves a ref: the stack's commits are
 * objects until a landing points refs at them.
 *
 * A block's own commits are those its head adds over where it left trunk: upstream =
 * merge-base(trunk, head), replayed oldest first, merge commits skipped (as `git rebase`
 * does). Whether the rebase changed the patch is told by patch ids (query.ts), computed
 * over the whole of the block's change before and after.
 */
import { gitOut, runGit, type Sha } from './run.ts';
import { isAncestor, mergeBase, patchId } from './query.ts';

export type Replayed =
  | { outcome: 'fast_forward' | 'rebased'; sha: Sha; upstream: Sha; patchBefore: string; patchAfter: string }
  | { outcome: 'conflict'; upstream: Sha; patchBefore: string; files: string[] };

/**
 * Puts block head `sha` on top of `onto`. `trunk` is where the block's own commits start
 * from. When `onto` is already an ancestor of `sha` by a history without merges, `sha`
 * itself is the answer (fast_forward), and no checkout is needed; otherwise its own
 * commits are cherry-picked onto `onto` in the checkout `workdir(onto)` gives (the
 * engine's own, clean, at `onto`), and a conflict is abandoned (`cherry-pick --abort`,
 * which leaves the checkout at `onto`) and reported with its paths.
 *
 * `patch` is the patch id the caller already holds for the block: it is computed afresh
 * only when the replayed patch differs from it, which does not change the answer.
 */
export async function replayOnto(
  repo: string,
  workdir: (onto: Sha) => Promise<string>,
  opts: { sha: Sha; onto: Sha; trunk: Sha; patch?: string },
): Promise<Replayed> {
  const fastForward =
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
  const dir = await workdir(opts.onto);
  if (commits.length > 0) {
    const picked = await runGit(dir, ['cherry-pick', '--allow-empty', '--keep-redundant-commits', ...commits]);
    if (picked.exitCode !== 0) {
      const files = (await gitOut(dir, ['diff', '--name-only', '--diff-filter=U'])).split('\n').filter(Boolean);
      await runGit(dir, ['cherry-pick', '--abort']);
      const why = files.length > 0 ? files : [picked.stderr.trim().split('\n')[0] ?? 'cherry-pick failed'];
      return { outcome: 'conflict', upstream, patchBefore: await before(), files: why };
    }
  }
  const sha = (await gitOut(dir, ['rev-parse', 'HEAD'])).trim();
  const patchAfter = await patchId(repo, opts.onto, sha);
  return { outcome: 'rebased', sha, upstream, patchBefore: await before(patchAfter), patchAfter };
}
