/**
 * A block's work on the remote, `refs/tron/work/<id>` (`[cluster] jobs = "agents"`,
 * docs/cluster.md): where a builder's turn on an agent pushes its commits and the next
 * turn, on whichever agent, starts from. It lives as long as the block's attempt: the
 * engine deletes it when the block lands or is abandoned, and when it begins a new attempt
 * (a fresh worktree at the block's base) — so a new attempt starts from the base, as the
 * engine decided, never silently from an earlier attempt's work. The engine's own copy of
 * that work is its block branch, kept as an orphan when it is retired (effects/worktree.ts).
 * With turns run in the engine's process (a database and a remote, no agents) the engine
 * puts each block's verified work there itself (`keepWork`), for a standby in another clone.
 */
import type { EventOf } from '../../core/events.ts';
import { deleteRemoteRef, listRemoteRefs, type PushResult, pushRef, type Remote } from '../../git/remote.ts';
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
 * Deletes the block's work ref on the remote when turns run on agents, or the engine keeps
 * verified work there (`keepWork`). Never throws: a ref left behind is only clutter (the
 * next attempt's deletion, or `git push :ref`, takes it).
 */
export async function dropWorkRef(
  c: Pick<EffectContext, 'repo' | 'config' | 'remote' | 'print' | 'keepWork'>,
  block: string,
): Promise<void> {
  const remote = c.remote;
  if ((c.config.cluster?.jobs !== 'agents' && !c.keepWork) || !remote) return;
  // A push of the block's verified work still under way goes first: else it would put the ref back after its deletion.
  await kept.get(remote)?.get(block);
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

/**
 * A block that passed its gate, with turns run here and a standby possible (`keepWork`):
 * its attested head goes to its work ref, by lease against what is there — a standby in
 * another clone resumes it from there (runtime/remote-recovery.ts restoreWork) instead of
 * building it again. Never throws: a push that fails only leaves the standby less to find.
 */
export function keepWork(c: Pick<EffectContext, 'repo' | 'remote' | 'print' | 'keepWork'>, block: string, sha: string): Promise<void> {
  const remote = c.remote;
  if (!c.keepWork || !remote) return Promise.resolve();
  const pushes = kept.get(remote) ?? new Map<string, Promise<void>>();
  kept.set(remote, pushes);
  const before = pushes.get(block) ?? Promise.resolve();
  const now = before.then(() => pushWork(c, remote, block, sha));
  pushes.set(block, now);
  void now.finally(() => pushes.get(block) === now && pushes.delete(block));
  return now;
}

/** The pushes of verified work under way, by remote and block: a deletion of the block's ref waits for its push. */
const kept = new WeakMap<Remote, Map<string, Promise<void>>>();

async function pushWork(c: Pick<EffectContext, 'repo' | 'print'>, remote: Remote, block: string, sha: string): Promise<void> {
  try {
    const listed = await listRemoteRefs(c.repo, remote, [workRefOf(block)]);
    if (!listed.ok) throw new Error(listed.message);
    const there = listed.refs.get(workRefOf(block));
    if (there === sha) return;
    const pushed = await pushRef(c.repo, remote, workRefOf(block), sha, there);
    if (!pushed.ok) throw new Error(pushed.message);
  } catch (error) {
    c.print(`tron: could not keep ${block}'s verified work as ${workRefOf(block)} on ${remote.name}: ${errorLine(error).split('\n')[0]}`);
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
