/**
 * What every reducer of the fold uses (engine/core/state.ts, and the lane's in
 * engine/core/lane/fold.ts): the reducer's type, `patch` for a block, and the small
 * reducers many event types share.
 */
import type { EventOf, EventType } from './events.ts';
import { reindex } from './block-index.ts';
import type { BlockState, EngineState } from './engine-state.ts';
import type { Waiting } from './waiting.ts';

/** Changes the block `id`, if there is one, by the fields `change` returns, and moves the index with it. */
export function patch(s: EngineState, id: string, change: (b: BlockState) => Partial<BlockState>): void {
  const was = s.blocks.get(id);
  if (!was) return;
  const b = { ...was, ...change(was) };
  s.blocks = s.blocks.set(id, b);
  s.index = reindex(s.index, s.blocks, was, b);
}

/**
 * How one event type changes the state. `s` is a fresh shallow copy that the reducer owns:
 * it assigns `s`'s fields (blocks through `patch`) and never changes what they point to,
 * which earlier states share.
 */
export type Reducer<T extends EventType> = (s: EngineState, e: EventOf<T>) => void;

export const nothing = (): void => {};
export const waitFor =
  (waiting: Waiting) =>
  (s: EngineState, e: { block: string }): void =>
    patch(s, e.block, () => ({ waiting }));
export const NOTHING: Waiting = { on: 'nothing' };

/** Trunk moved to `sha` by a fetch of the remote's (someone else's push, which the engine took in). */
export function followTrunk(s: EngineState, sha: string): void {
  if (s.trunkSha === sha) return;
  s.trunkSha = sha;
  s.trunkHistory = s.trunkHistory.push(sha);
}
