import { describe, expect, it } from 'vitest';
import type { EventBody, TronEvent } from '../core/events.ts';
import { mergeWaitIntervals } from './report-time.ts';

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const T = 'c'.repeat(40);

function log(...items: Array<[number, EventBody]>): TronEvent[] {
  return items.map(([ts, body], i) => ({ v: 1, seq: i + 1, ts, ...body }) as TronEvent);
}

/** a (approved) and b (being reviewed) stacked together, b awaiting its verdict. */
const STACKED_AWAITING_B: EventBody = {
  type: 'lane.stacked',
  stack: 1,
  trunk_sha: T,
  blocks: [
    { block: 'a', sha: A },
    { block: 'b', sha: B },
  ],
  awaiting: ['b'],
};

describe('the waits in the merge lane queue', () => {
  it('counts none for a block stacked before its verdict ([merge] speculate): its approval joins its stack', () => {
    const events = log(
      [1000, { type: 'merge.queued', block: 'a' }],
      [1400, STACKED_AWAITING_B],
      [2000, { type: 'merge.queued', block: 'b' }],
      [3000, { type: 'lane.closed', stack: 1, landed: ['a', 'b'], returned: [], detail: 'landed a, b' }],
    );
    expect(mergeWaitIntervals(events)).toEqual([{ block: 'a', from: 1000, to: 1400 }]);
  });

  it('counts the wait of a block approved after the stack that awaited it was given up', () => {
    const events = log(
      [1000, { type: 'merge.queued', block: 'a' }],
      [1400, STACKED_AWAITING_B],
      [1800, { type: 'lane.closed', stack: 1, landed: [], returned: ['a'], detail: 'given up' }],
      [1800, { type: 'lane.stacked', stack: 2, trunk_sha: T, blocks: [{ block: 'a', sha: A }] }],
      [2000, { type: 'merge.queued', block: 'b' }],
      [2600, { type: 'lane.closed', stack: 2, landed: ['a'], returned: [], detail: 'landed a' }],
      [2600, { type: 'lane.stacked', stack: 3, trunk_sha: T, blocks: [{ block: 'b', sha: B }] }],
    );
    expect(mergeWaitIntervals(events)).toEqual([
      { block: 'a', from: 1000, to: 1400 },
      { block: 'b', from: 2000, to: 2600 },
    ]);
  });
});
