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
 * Puts block head `sha` on top of `onto`, in checkout `dir` (the engine's own, made from
 * the repository's object store). `trunk` is where the block's own commits start from.
 * When `onto` is already an ancestor of `sha` by a history without merges, `sha` itself is
 * the answer (fast_forward); otherwise its own commits are cherry-picked onto `onto`, and
 * a conflict is abandoned (`cherry-pick --abort`) and reported with its paths.
 */
export async function replayOnto(dir: string, opts: { sha: Sha; onto: Sha; trunk: Sha }): Promise<Replayed> {
  const upstream = await mergeBase(dir, opts.trunk, opts.sha);
  const patchBefore = await patchId(dir, upstream, opts.sha);
  if (
    (await isAncestor(dir, opts.onto, opts.sha)) &&
    (await gitOut(dir, ['rev-list', '--min-parents=2', `${opts.onto}..${opts.sha}`])) === ''
  ) {
    return { outcome: 'fast_forward', sha: opts.sha, upstream, patchBefore, patchAfter: await patchId(dir, opts.onto, opts.sha) };
  }
  const commits = (await gitOut(dir, ['rev-list', '--reverse', '--topo-order', '--no-merges', `${upstream}..${opts.sha}`]))
    .split('\n')
    .filter(Boolean);
  await gitOut(dir, ['checkout', '--quiet', '--detach', '--force', opts.onto]);
  if (commits.length > 0) {
    const picked = await runGit(dir, ['cherry-pick', '--allow-empty', '--keep-redundant-commits', ...commits]);
    if (picked.exitCode !== 0) {
      const files = (await gitOut(dir, ['diff', '--name-only', '--diff-filter=U'])).split('\n').filter(Boolean);
      await runGit(dir, ['cherry-pick', '--abort']);
      await runGit(dir, ['checkout', '--quiet', '--detach', '--force', opts.onto]);
      return {
        outcome: 'conflict',
        upstream,
        patchBefore,
        files: files.length > 0 ? files : [picked.stderr.trim().split('\n')[0] ?? 'cherry-pick failed'],
      };
    }
  }
  const sha = (await gitOut(dir, ['rev-parse', 'HEAD'])).trim();
  return { outcome: 'rebased', sha, upstream, patchBefore, patchAfter: await patchId(dir, opts.onto, sha) };
}
