import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const SPECULATE = { batch: 8, verify_trunk: false, gather: true, speculate: true };
const T = sha(1);
/** The commit block number `i` (1-based) has in the stack. */
const R = (i: number) => sha(100 + i);
const RED = { exit: 1, timed_out: false, log: 'tests/red.log', tail: 'AssertionError: 1 !== 2' };

const only = <K extends EventBody['type']>(out: EventBody[], type: K) =>
  out.filter((e): e is Extract<EventBody, { type: K }> => e.type === type);

/** Blocks `ids` built (DONE); `judge` of them then observed green, block number i at sha(10 + i). */
function built(
  ids: string[],
  judge = ids,
  merge: typeof SPECULATE | { batch: number; verify_trunk: boolean; gather: boolean } = SPECULATE,
) {
  const d = new Driver();
  d.boot(
    ids.map((id) => ({ id })),
    { maxParallel: ids.length, merge },
  );
  for (const id of ids) {
    d.feed({ type: 'worktree.ready', block: id, attempt: 1, base: T, path: id });
    d.feed({ type: 'reply.received', block: id, role: 'builder', session: `${id}.1.builder`, turn: 1, ok: true, reply: '>>DONE' });
  }
  for (const id of judge) d.observe(id, sha(10 + ids.indexOf(id)));
  return d;
}

/** rebase.done for stack 1: each block replayed onto the one before, at R(i). */
function rebased(d: Driver, ids: string[], outcomes: Record<string, 'conflict'> = {}): EventBody[] {
  let onto = T;
  const results = ids.map((id, i) => {
    if (outcomes[id] === 'conflict') return { block: id, outcome: 'conflict' as const, onto, patch_before: 'p', files: ['notes.txt'] };
    const r = {
      block: id,
      outcome: i === 0 ? ('fast_forward' as const) : ('clean' as const),
      onto,
      sha: R(i + 1),
      patch_before: 'p',
      patch_after: 'p',
    };
    onto = R(i + 1);
    return r;
  });
  return d.feed({ type: 'rebase.done', stack: 1, trunk_sha: T, results });
}

const confirmAndApprove = (d: Driver, id: string) => [
  ...d.answer(id, '>>CONFIRMED {"evidence":{"c1":"here"}}'),
  ...d.answer(id, '>>APPROVE'),
];

/** a and b as the lane stacks them, at the heads their gates observed. */
const A_AND_B = [
  { block: 'a', sha: sha(10), patch_id: 'p' },
  { block: 'b', sha: sha(11), patch_id: 'p' },
];

/** a and b both being judged, then a approved: the speculative stack [a, b]; its decisions. */
function stackedWhileJudged(): { d: Driver; out: EventBody[] } {
  const d = built(['a', 'b']);
  return { d, out: confirmAndApprove(d, 'a') };
}

describe('the merge lane with [merge] speculate', () => {
  it('waits while a block is in its gate, then stacks those being judged behind the queue and tests the stack during their turns', () => {
    const d = built(['a', 'b'], ['a']);
    expect(only(confirmAndApprove(d, 'a'), 'lane.stacked')).toEqual([]);
    expect(only(d.observe('b', sha(11)), 'lane.stacked')).toEqual([
      {
        type: 'lane.stacked',
        stack: 1,
        trunk_sha: T,
        blocks: A_AND_B,
        awaiting: ['b'],
      },
    ]);
    // b's challenge is still out, and the stack's test is asked for already.
    expect(d.state.blocks.get('b')!.waiting).toMatchObject({ on: 'turn', turn: { kind: 'challenge' } });
    expect(rebased(d, ['a', 'b'])).toEqual([{ type: 'candidate.requested', stack: 1, sha: R(2), blocks: ['a', 'b'] }]);
  });

  it('stacks nothing before a block is approved: a lone block lands on its gate run, as without speculate', () => {
    const d = built(['a']);
    expect(d.state.lane.stack).toBeUndefined();
    expect(only(confirmAndApprove(d, 'a'), 'lane.stacked')).toEqual([
      { type: 'lane.stacked', stack: 1, trunk_sha: T, blocks: [{ block: 'a', sha: sha(10), patch_id: 'p' }] },
    ]);
  });

  it('lands a green stack only once every block is approved at the sha stacked', () => {
    const { d } = stackedWhileJudged();
    rebased(d, ['a', 'b']);
    expect(d.feed({ type: 'candidate.tested', stack: 1, sha: R(2), blocks: ['a', 'b'], ok: true, tests: GREEN })).toEqual([]);
    d.answer('b', '>>CONFIRMED {"evidence":{"c1":"here"}}');
    expect(d.state.lane.stack).toMatchObject({ step: { at: 'judging' } });
    const approved = d.answer('b', '>>APPROVE');
    expect(d.state.lane.queue).toEqual([]);
    expect(only(approved, 'land.intent')).toEqual([
      {
        type: 'land.intent',
        stack: 1,
        sha: R(2),
        from: T,
        blocks: [
          { block: 'a', sha: R(1) },
          { block: 'b', sha: R(2) },
        ],
        tested: 'lane',
      },
    ]);
  });

  it('gives the stack up, once its test is in, when a review asks for changes, and stacks the approved blocks without that one', () => {
    const { d } = stackedWhileJudged();
    rebased(d, ['a', 'b']);
    d.answer('b', '>>CONFIRMED {"evidence":{"c1":"here"}}');
    // The test runs in the lane's checkout: the stack is not given up under it.
    expect(only(d.answer('b', '>>CHANGES {"notes":"rename it"}'), 'lane.closed')).toEqual([]);
    const after = d.feed({ type: 'candidate.tested', stack: 1, sha: R(2), blocks: ['a', 'b'], ok: true, tests: GREEN });
    expect(only(after, 'land.intent')).toEqual([]);
    expect(only(after, 'lane.closed')).toEqual([expect.objectContaining({ stack: 1, landed: [], returned: ['a'] })]);
    expect(only(after, 'lane.stacked')).toEqual([
      { type: 'lane.stacked', stack: 2, trunk_sha: T, blocks: [{ block: 'a', sha: sha(10), patch_id: 'p' }] },
    ]);
  });

  it('gives the stack up at once, between its effects, when a block is parked before its verdict', () => {
    const { d } = stackedWhileJudged();
    rebased(d, ['a', 'b']);
    d.feed({ type: 'candidate.tested', stack: 1, sha: R(2), blocks: ['a', 'b'], ok: true, tests: GREEN });
    const out = d.feed({ type: 'block.parked', block: 'b', reason: 'the operator parked it' });
    expect(only(out, 'lane.closed')).toEqual([expect.objectContaining({ stack: 1, returned: ['a'] })]);
    expect(only(out, 'land.intent')).toEqual([]);
  });

  it('keeps a red result until every block is approved, then bisects the stack as any other', () => {
    const { d } = stackedWhileJudged();
    rebased(d, ['a', 'b']);
    expect(d.feed({ type: 'candidate.tested', stack: 1, sha: R(2), blocks: ['a', 'b'], ok: false, tests: RED })).toEqual([]);
    const out = confirmAndApprove(d, 'b');
    expect(only(out, 'bisect.step')).toEqual([{ type: 'bisect.step', stack: 1, sha: R(1), blocks: ['a'], green: 0, red: 2 }]);
    expect(only(out, 'block.dispatched').filter((e) => e.role === 'builder')).toEqual([]);
  });

  it('sends a merge turn to the approved block whose rebase conflicts with trunk, not to the one still being judged', () => {
    const { d } = stackedWhileJudged();
    const conflict = (block: string) => ({ block, outcome: 'conflict' as const, onto: T, patch_before: 'p', files: ['notes.txt'] });
    const out = d.feed({ type: 'rebase.done', stack: 1, trunk_sha: T, results: [conflict('a'), conflict('b')] });
    expect(only(out, 'block.dispatched').map((e) => [e.block, e.kind])).toEqual([['a', 'merge']]);
    expect(d.state.blocks.get('b')!.waiting).toMatchObject({ on: 'turn', turn: { kind: 'challenge' } });
    expect(only(out, 'lane.closed')).toHaveLength(1);
  });

  it('without speculate, gather waits for every block being judged to be approved, as before', () => {
    const d = built(['a', 'b'], ['a', 'b'], { batch: 8, verify_trunk: false, gather: true });
    expect(only(confirmAndApprove(d, 'a'), 'lane.stacked')).toEqual([]);
    expect(only(confirmAndApprove(d, 'b'), 'lane.stacked')).toEqual([
      {
        type: 'lane.stacked',
        stack: 1,
        trunk_sha: T,
        blocks: A_AND_B,
      },
    ]);
  });
});
