/**
 * Where a run's wall time went, from its events alone: intervals opened by one event
 * and closed by another (a turn from block.dispatched to reply.received, a test run from
 * facts.requested to facts.observed, candidate.requested or bisect.step to
 * candidate.tested, or test.requested to trunk.tested, a wait in the merge lane's queue
 * from merge.queued to lane.stacked, a stack from lane.stacked to lane.closed). Parallel
 * blocks overlap, so busy time is
 * the length of the union of intervals, and the engine's own time is what is left of
 * the wall when no worker and no test run was going.
 */
import type { TronEvent } from '../core/events.ts';

export interface Interval {
  block: string;
  from: number;
  to: number;
}

/** Total length of the union of intervals (overlaps counted once). */
export function unionMs(intervals: readonly Interval[]): number {
  const sorted = [...intervals].sort((a, b) => a.from - b.from);
  let total = 0;
  let start = -Infinity;
  let end = -Infinity;
  for (const i of sorted) {
    if (i.from > end) {
      if (end > start) total += end - start;
      start = i.from;
      end = i.to;
    } else if (i.to > end) {
      end = i.to;
    }
  }
  if (end > start) total += end - start;
  return total;
}

export const sumMs = (intervals: readonly Interval[]) => intervals.reduce((n, i) => n + (i.to - i.from), 0);

/**
 * Pairs opening and closing events by key, in order; an interval still open at the end
 * of the log (a crash, a turn stopped by the run's end) closes at `end`, or at the
 * first event for which `cancels` says so.
 */
function pair(
  events: readonly TronEvent[],
  open: (e: TronEvent) => string | undefined,
  close: (e: TronEvent) => string | readonly string[] | undefined,
  cancels: (e: TronEvent) => string | undefined = () => undefined,
  blockOf: (e: TronEvent) => string = (e) => (e as { block: string }).block,
): Interval[] {
  const pending = new Map<string, { block: string; from: number }>();
  const out: Interval[] = [];
  const end = events.at(-1)?.ts ?? 0;
  for (const e of events) {
    const opened = open(e);
    if (opened !== undefined && !pending.has(opened)) pending.set(opened, { block: blockOf(e), from: e.ts });
    for (const key of [close(e), cancels(e)].flat()) {
      if (key === undefined) continue;
      const p = pending.get(key);
      if (!p) continue;
      pending.delete(key);
      out.push({ block: p.block, from: p.from, to: e.ts });
    }
  }
  for (const p of pending.values()) out.push({ block: p.block, from: p.from, to: end });
  return out;
}

/** Worker turns: block.dispatched → reply.received of the same session and turn. */
export function workerIntervals(events: readonly TronEvent[]): Interval[] {
  const key = (e: TronEvent) => (e.type === 'block.dispatched' || e.type === 'reply.received' ? `${e.session}#${e.turn}` : undefined);
  return pair(
    events,
    (e) => (e.type === 'block.dispatched' ? key(e) : undefined),
    (e) => (e.type === 'reply.received' ? key(e) : undefined),
  );
}

/**
 * The engine's test runs: facts.requested → facts.observed, a stack's candidate.requested
 * or bisect.step → candidate.tested (counted for the top block of what was tested), and
 * test.requested → trunk.tested.
 */
export function testIntervals(events: readonly TronEvent[]): Interval[] {
  const facts = pair(
    events,
    (e) => (e.type === 'facts.requested' ? `${e.block}#${e.purpose}` : undefined),
    (e) => (e.type === 'facts.observed' ? `${e.block}#${e.purpose}` : undefined),
  );
  const lane = pair(
    events,
    (e) => (e.type === 'candidate.requested' || e.type === 'bisect.step' ? `${e.stack}#${e.sha}` : undefined),
    (e) => (e.type === 'candidate.tested' ? `${e.stack}#${e.sha}` : undefined),
    () => undefined,
    (e) => (e as { blocks: string[] }).blocks.at(-1) ?? '',
  );
  const trunk = pair(
    events,
    (e) => (e.type === 'test.requested' ? `${e.block}#${e.sha}` : undefined),
    (e) => (e.type === 'trunk.tested' ? `${e.block}#${e.sha}` : undefined),
  );
  return [...facts, ...lane, ...trunk];
}

/**
 * Waits in the merge lane's queue: merge.queued → lane.stacked (or the block leaving the
 * queue, parked or abandoned). A block stacked before its verdict ([merge] speculate)
 * waited in no queue: its approval joins the stack it is in.
 */
export function mergeWaitIntervals(events: readonly TronEvent[]): Interval[] {
  const awaited = new Set<string>();
  const queued = events.filter((e) => {
    if (e.type === 'lane.stacked') for (const id of e.awaiting ?? []) awaited.add(id);
    else if (e.type === 'lane.closed') awaited.clear();
    else if (e.type === 'merge.queued' && awaited.delete(e.block)) return false;
    return true;
  });
  return pair(
    queued,
    (e) => (e.type === 'merge.queued' ? e.block : undefined),
    (e) => (e.type === 'lane.stacked' ? e.blocks.map((b) => b.block) : undefined),
    (e) => (e.type === 'block.parked' || e.type === 'block.abandoned' ? e.block : undefined),
  );
}

/** The merge lane at work: each stack from lane.stacked to lane.closed (the interval's block is its bottom block). */
export function laneIntervals(events: readonly TronEvent[]): Interval[] {
  return pair(
    events,
    (e) => (e.type === 'lane.stacked' ? String(e.stack) : undefined),
    (e) => (e.type === 'lane.closed' ? String(e.stack) : undefined),
    () => undefined,
    (e) => (e as { blocks: Array<{ block: string }> }).blocks[0]?.block ?? '',
  );
}
