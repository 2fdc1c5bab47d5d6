/**
 * A block's worktree (see engine/core/decide/turns.ts: a build attempt begins with one).
 * Made from the base the decision names, on branch tron/<id>; a folder or branch left
 * from before — an earlier attempt, a crash, or planted — is retired first, its work kept
 * as orphan/<id>-<n> when it holds commits not on trunk.
 */
import { existsSync } from 'node:fs';
import { relative } from 'node:path';
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import { type EffectContext, effect, errorLine } from './context.ts';
import { dropWorkRef } from './work-ref.ts';

export const prepareWorktree = effect({
  run: async (c, e: EventOf<'worktree.requested'>): Promise<EventBody> => {
    // Only the worktree commands wait for each other; reading the admin files does not.
    // A new attempt starts at its base: an earlier attempt's work on the remote is not where agents build (effects/work-ref.ts).
    const [{ made, orphan }] = await Promise.all([c.queues.worktrees.run(() => prepareWorktreeNow(c, e)), dropWorkRef(c, e.block)]);
    return {
      type: 'worktree.ready',
      block: e.block,
      attempt: e.attempt,
      base: e.base,
      path: relative(c.repo, made.path),
      ...(orphan ? { orphan } : {}),
      git_files: await git.adminDigests(c.repo),
    };
  },
  // What stands in the way of a block's worktree or branch is in its own namespace: the block's trouble.
  onFailure: (e, error): EventBody => ({ type: 'worktree.failed', block: e.block, attempt: e.attempt, detail: errorLine(error) }),
});

async function prepareWorktreeNow(c: EffectContext, e: EventOf<'worktree.requested'>) {
  const path = git.worktreePath(c.repo, e.block);
  const branch = `tron/${e.block}`;
  // The common case, a block's first worktree, is one `worktree add`; a folder or branch
  // left from before makes it refuse, changing nothing, and is retired first, then made again.
  if (!existsSync(path)) {
    try {
      return { made: await git.createWorktree(c.repo, { id: e.block, base: e.base }), orphan: undefined };
    } catch (error) {
      if (!(error instanceof git.GitStateError && error.code === 'TRON_WORKTREE_EXISTS')) throw error;
    }
  }
  const orphan = await retireBranch(c, e.block, branch);
  if (existsSync(path)) await git.removeWorktree(c.repo, path);
  const made = await git.createWorktree(c.repo, { id: e.block, base: e.base });
  return { made, orphan };
}

/** Deletes tron/<id>, first preserving it as orphan/<id>-<n> when it holds commits not on trunk. */
async function retireBranch(c: EffectContext, id: string, branch: string): Promise<string | undefined> {
  const sha = await git.revParse(c.repo, `refs/heads/${branch}`);
  if (!sha) return undefined;
  await git.removeWorktree(c.repo, git.worktreePath(c.repo, id));
  return dropBranch(c, id, branch, sha);
}

/** Deletes tron/<id> at `sha` (its worktree already gone), first preserving it as orphan/<id>-<n> when that holds commits not on trunk. */
export async function dropBranch(c: EffectContext, id: string, branch: string, sha: string): Promise<string | undefined> {
  let orphan: string | undefined;
  if (!(await git.allOnTrunk(c.repo, sha, c.config.trunk))) orphan = await git.preserveOrphan(c.repo, id, sha);
  await git.deleteBranch(c.repo, branch, sha);
  return orphan;
}
