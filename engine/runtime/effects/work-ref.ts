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
import { deleteRemoteRef, type PushResult, type Remote } from '../../git/remote.ts';
import { Coalesced } from './coalesce.ts';
import { type EffectContext, effect, errorLine } from './context.ts';

/** Where blocks' work refs live on the remote. */
export const WORK_PREFIX = 'refs/tron/work/';

/** The remote ref where a block's work travels between agents and the engine. */
export const workRefOf = (block: string): string => `${WORK_PREFIX}${block}`;

/** Every block's work ref: what an agent's fetch brings along, so its next job of any block finds the sha here. */
export const ALL_WORK_REFS = `${WORK_PREFIX}*`;

/** Deletions asked for together, or while one is in flight, go in one push (coalesce.ts): blocks start and wrap together. */
const drops = new WeakMap<Remote, Coalesced<string, PushResult>>();

/**
 * Deletes the block's work ref on the remote when turns run on agents. Never throws: a
 * ref left behind is only clutter (the next attempt's deletion, or `git push :ref`, takes it).
 */
export async function dropWorkRef(c: Pick<EffectContext, 'repo' | 'config' | 'remote' | 'print'>, block: string): Promise<void> {
  const remote = c.remote;
  if (c.config.cluster?.jobs !== 'agents' || !remote) return;
  let batch = drops.get(remote);
  if (!batch) {
    const all = async (blocks: string[]) => {
      const gone = await deleteRemoteRef(c.repo, remote, ...(blocks.map(workRefOf) as [string, ...string[]]));
      return new Map(blocks.map((b) => [b, gone]));
    };
    batch = new Coalesced(all, (error): PushResult => ({ ok: false, kind: 'transient', reason: 'failed', message: errorLine(error) }));
    drops.set(remote, batch);
  }
  const gone = await batch.ask(block);
  if (!gone.ok) c.print(`tron: could not delete ${workRefOf(block)} on ${remote.name}: ${gone.message.split('\n')[0]}`);
}

/** An abandoned block: its turns stop now, and its work on the remote goes. */
export const abandonBlock = effect({
  run: async (c, e: EventOf<'block.abandoned'>) => {
    c.turns.stopBlock(e.block, e.seq);
    await dropWorkRef(c, e.block);
    return undefined;
  },
});
