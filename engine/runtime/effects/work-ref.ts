/**
 * A block's work on the remote, `refs/tron/work/<id>` (`[cluster] jobs = "agents"`,
 * docs/cluster.md): where a builder's turn on an agent pushes its commits and the next
 * turn, on whichever agent, starts from. It lives as long as the block's attempt: the
 * engine deletes it when the block lands or is abandoned, and when it begins a new attempt
 * (a fresh worktree at the block's base) — so a new attempt starts from the base, as the
 * engine decided, never silently from an earlier attempt's work. The engine's own copy of
 * that work is its block branch, kept as an orphan when it is retired (effects/worktree.ts).
 */
import type { EventOf } from '../../core/events.ts';
import { deleteRemoteRef } from '../../git/remote.ts';
import { type EffectContext, effect } from './context.ts';

/** The remote ref where a block's work travels between agents and the engine. */
export const workRefOf = (block: string): string => `refs/tron/work/${block}`;

/**
 * Deletes the block's work ref on the remote when turns run on agents. Never throws: a
 * ref left behind is only clutter (the next attempt's deletion, or `git push :ref`, takes it).
 */
export async function dropWorkRef(c: Pick<EffectContext, 'repo' | 'config' | 'remote' | 'print'>, block: string): Promise<void> {
  if (c.config.cluster?.jobs !== 'agents' || !c.remote) return;
  try {
    const gone = await deleteRemoteRef(c.repo, c.remote, workRefOf(block));
    if (!gone.ok) c.print(`tron: could not delete ${workRefOf(block)} on ${c.remote.name}: ${gone.message.split('\n')[0]}`);
  } catch (err) {
    c.print(`tron: could not delete ${workRefOf(block)} on ${c.remote.name}: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** An abandoned block: its turns stop now, and its work on the remote goes. */
export const abandonBlock = effect({
  run: async (c, e: EventOf<'block.abandoned'>) => {
    c.turns.stopBlock(e.block, e.seq);
    await dropWorkRef(c, e.block);
    return undefined;
  },
});
