/**
 * The block index: what scheduling asks of the blocks after every input — slots taken,
 * blocks ready to dispatch, blocks to park, whether the run may have settled — kept in
 * the state by the fold. A block's change moves only its own entries (and, when it lands
 * or is abandoned, its dependents'), so the decision step never scans the register and
 * an event costs the same in a run of 10 blocks or 10,000.
 */
import type { BlockInfo } from './events.ts';
import type { Waiting } from './waiting.ts';

/** What the index reads of a block's state (state.ts's IndexedBlock has it all). */
export interface IndexedBlock {
  readonly id: string;
  readonly phase: string;
  readonly info: BlockInfo;
  readonly waiting: Waiting;
}
import { byNumber, byString, SortedMap } from './sorted-map.ts';

/** Phases that take one of the `max_parallel` slots. */
export const ACTIVE_PHASES: ReadonlySet<string> = new Set(['build', 'review']);
export const TERMINAL: ReadonlySet<string> = new Set(['landed', 'abandoned']);

/**
 * Waiting on something the engine started for this block (a turn, git, tests) rather than on
 * a person, a slot, a held worker or the merge lane (whose effects the lane's own state counts).
 */
export function inFlight(b: IndexedBlock): boolean {
  return !['nothing', 'operator', 'slot', 'lane', 'stack', 'worker'].includes(b.waiting.on);
}

/** A pending block's place in the dispatch order: by priority, then id. */
export interface ReadyKey {
  priority: number;
  id: string;
}
const byReadiness = (a: ReadyKey, b: ReadyKey): number => a.priority - b.priority || byString(a.id, b.id);

/**
 * Derived from the blocks, and changed by the fold only where a block's change moves it,
 * so the decision step never scans the register to schedule. `indexBlocks` computes it
 * from scratch (on a register change, which lists every block anyway).
 */
export interface BlockIndex {
  /** Each block's place in register order. */
  position: ReadonlyMap<string, number>;
  /** The blocks that name an id in `depends_on` (registered or not), in register order. */
  dependents: ReadonlyMap<string, readonly string[]>;
  /** Blocks in an active phase: the slots taken. */
  active: number;
  /** Blocks waiting on an effect in flight (see `inFlight`). */
  inFlight: number;
  /** Blocks that keep the run from settling whatever else holds: not landed, abandoned, parked or pending, nor queued for the lane. */
  busy: number;
  /** Blocks (not pending) queued for the merge lane: the run settles around them only while trunk is halted. */
  queued: number;
  /** Blocks past their build and on their way to the lane: their gate or their review is under way (see `approaching`). */
  approaching: number;
  /** The same blocks, by register position: what a speculative stack ([merge] speculate) takes. */
  onTheirWay: SortedMap<number, string>;
  /** Pending blocks whose dependencies have all landed, in dispatch order. */
  ready: SortedMap<ReadyKey, string>;
  /** Pending blocks with an abandoned dependency, by register position: they are to be parked. */
  orphaned: SortedMap<number, string>;
}

const isReady = (blocks: SortedMap<string, IndexedBlock>, b: IndexedBlock): boolean =>
  b.phase === 'pending' && b.info.depends_on.every((d) => blocks.get(d)?.phase === 'landed');

const isOrphaned = (blocks: SortedMap<string, IndexedBlock>, b: IndexedBlock): boolean =>
  b.phase === 'pending' && b.info.depends_on.some((d) => blocks.get(d)?.phase === 'abandoned');

/** Work going on: a turn held for an unavailable worker is not, it waits for the operator. */
const isBusy = (b: IndexedBlock): boolean =>
  !TERMINAL.has(b.phase) && b.phase !== 'parked' && b.phase !== 'pending' && b.waiting.on !== 'lane' && b.waiting.on !== 'worker';

/**
 * On its way to the merge lane: the builder's turn is over and the engine is checking it
 * (its gate) or it is being challenged or reviewed. What the lane may wait for, as it
 * will soon be approved (or sent back, which ends the wait as surely).
 */
export function approaching(b: IndexedBlock): boolean {
  if (b.phase !== 'build' && b.phase !== 'review') return false;
  const w = b.waiting;
  if (w.on === 'facts') return w.purpose === 'gate';
  if (w.on !== 'turn') return false;
  const kind = w.turn.kind === 'restate' ? w.turn.restating : w.turn.kind;
  return kind === 'challenge' || kind === 'review';
}

const isQueued = (b: IndexedBlock): boolean =>
  !TERMINAL.has(b.phase) && b.phase !== 'parked' && b.phase !== 'pending' && b.waiting.on === 'lane';

/** Which of the index's counters a block adds to, one bit each. */
const ACTIVE = 1;
const IN_FLIGHT = 2;
const BUSY = 4;
const QUEUED = 8;
const APPROACHING = 16;
function tally(b: IndexedBlock): number {
  return (
    (ACTIVE_PHASES.has(b.phase) ? ACTIVE : 0) |
    (inFlight(b) ? IN_FLIGHT : 0) |
    (isBusy(b) ? BUSY : 0) |
    (isQueued(b) ? QUEUED : 0) |
    (approaching(b) ? APPROACHING : 0)
  );
}
const bit = (mask: number, flag: number): number => (mask & flag ? 1 : 0);

/** The index computed from scratch: every block, in register order. */
export function indexBlocks(blocks: SortedMap<string, IndexedBlock>, order: readonly string[]): BlockIndex {
  const position = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  const index: BlockIndex = {
    position,
    dependents,
    active: 0,
    inFlight: 0,
    busy: 0,
    queued: 0,
    approaching: 0,
    onTheirWay: SortedMap.empty(byNumber),
    ready: SortedMap.empty(byReadiness),
    orphaned: SortedMap.empty(byNumber),
  };
  order.forEach((id, i) => {
    const b = blocks.get(id)!;
    position.set(id, i);
    for (const d of b.info.depends_on) {
      const list = dependents.get(d);
      if (list) list.push(id);
      else dependents.set(d, [id]);
    }
    const counted = tally(b);
    index.active += bit(counted, ACTIVE);
    index.inFlight += bit(counted, IN_FLIGHT);
    index.busy += bit(counted, BUSY);
    index.queued += bit(counted, QUEUED);
    index.approaching += bit(counted, APPROACHING);
    if (counted & APPROACHING) index.onTheirWay = index.onTheirWay.set(i, id);
    if (isReady(blocks, b)) index.ready = index.ready.set({ priority: b.info.priority, id }, id);
    if (isOrphaned(blocks, b)) index.orphaned = index.orphaned.set(i, id);
  });
  return index;
}

/** Puts `b` in, or takes it out of, the ready and orphaned sets, as its state now says. */
function place(index: BlockIndex, blocks: SortedMap<string, IndexedBlock>, b: IndexedBlock): BlockIndex {
  const key = { priority: b.info.priority, id: b.id };
  const ready = isReady(blocks, b) ? index.ready.set(key, b.id) : index.ready.delete(key);
  const at = index.position.get(b.id)!;
  const orphaned = isOrphaned(blocks, b) ? index.orphaned.set(at, b.id) : index.orphaned.delete(at);
  return ready === index.ready && orphaned === index.orphaned ? index : { ...index, ready, orphaned };
}

/**
 * The index after block `was` became `b` (`blocks` already holds `b`): its own counters
 * and place, and, when it landed or was abandoned (or stopped being either), the places
 * of the blocks that depend on it. Nothing else moves, so nothing else is looked at.
 */
export function reindex(index: BlockIndex, blocks: SortedMap<string, IndexedBlock>, was: IndexedBlock, b: IndexedBlock): BlockIndex {
  const before = tally(was);
  const after = tally(b);
  if (before !== after) {
    index = {
      ...index,
      active: index.active + bit(after, ACTIVE) - bit(before, ACTIVE),
      inFlight: index.inFlight + bit(after, IN_FLIGHT) - bit(before, IN_FLIGHT),
      busy: index.busy + bit(after, BUSY) - bit(before, BUSY),
      queued: index.queued + bit(after, QUEUED) - bit(before, QUEUED),
      approaching: index.approaching + bit(after, APPROACHING) - bit(before, APPROACHING),
    };
    if ((before ^ after) & APPROACHING) {
      const at = index.position.get(b.id)!;
      index = { ...index, onTheirWay: after & APPROACHING ? index.onTheirWay.set(at, b.id) : index.onTheirWay.delete(at) };
    }
  }
  if (was.phase === b.phase && was.info === b.info) return index;
  if (was.info.priority !== b.info.priority) index = { ...index, ready: index.ready.delete({ priority: was.info.priority, id: b.id }) };
  index = place(index, blocks, b);
  const landed = (was.phase === 'landed') !== (b.phase === 'landed');
  const abandoned = (was.phase === 'abandoned') !== (b.phase === 'abandoned');
  if (landed || abandoned) {
    for (const id of index.dependents.get(b.id) ?? []) index = place(index, blocks, blocks.get(id)!);
  }
  return index;
}
