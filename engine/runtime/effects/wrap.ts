/**
 * Wrap (see engine/core/lane/lane.ts: a landed block is wrapped): the block's review
 * checkout and worktree go (in the worktree queue), then its branch (outside it: blocks
 * landed together wrap side by side), kept as an orphan only if it holds work not on trunk.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readdirSync } from 'node:fs';
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import { type EffectContext, effect, errorLine } from './context.ts';
import { dropBranch } from './worktree.ts';
import { dropWorkRef } from './work-ref.ts';

export const wrapBlock = effect({
  run: async (c, e: EventOf<'wrap.requested'>): Promise<EventBody> => {
    const branch = `tron/${e.block}`;
    // Landed: its work ref on the remote (turns on agents) goes too — asked first, so the
    // blocks of one landing go in one push while their worktrees are removed one by one.
    const dropped = dropWorkRef(c, e.block);
    const sha = await c.queues.worktrees.run(async () => {
      for (const path of [git.reviewPath(c.repo, e.block), git.worktreePath(c.repo, e.block)]) {
        if (existsSync(path)) await git.removeWorktree(c.repo, path);
      }
      return git.revParse(c.repo, `refs/heads/${branch}`);
    });
    const orphan = sha === undefined ? undefined : await dropBranch(c, e.block, branch, sha);
    await dropped;
    return { type: 'block.wrapped', block: e.block, summary: e.summary, ...(orphan ? { orphan } : {}) };
  },
  // The block has landed; what its worker left that git will not remove stays for `tron clean`.
  onFailure: (e, error): EventBody => ({ type: 'block.wrapped', block: e.block, summary: e.summary, leftover: errorLine(error) }),
});

/** At the end of a run: the engine's own checkouts (`_lane`, `_check-<n>`, `_trunk`) go; the next run makes them again. */
export function removeEngineCheckouts(c: Pick<EffectContext, 'repo' | 'queues'>): Promise<void> {
  return c.queues.worktrees.run(async () => {
    const root = join(c.repo, git.WORKTREES_DIR);
    if (!existsSync(root)) return;
    for (const name of readdirSync(root).filter((n) => n.startsWith('_'))) await git.removeWorktree(c.repo, join(root, name));
  });
}
