import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const RED = { exit: 1, timed_out: false, log: 'tests/red.log', tail: 'AssertionError: 1 !== 2' };
const X = sha(2);
/** The commit block number `i` (1-based) has in the stack. */
const R = (i: number) => sha(100 + i);

/**
 * A driver whose lane holds `ids` as one stack (stack 2) on trunk at X: block `x` was
 * stacked alone first, the others queued behind it, and `x` landed.
 */
function stacked(ids: string[], merge?: { batch: number; verify_trunk: boolean; gather?: boolean }): { d: Driver; out: EventBody[] } {
  const d = new Driver();
  d.boot([{ id: 'x' }, ...ids.map((id) => ({ id }))], { maxParallel: ids.length + 1, merge });
  d.approve('x', X);
  for (const [i, id] of ids.entries()) d.approve(id, sha(10 + i));
  const out = d.landStack({ x: X });
  return { d, out };
}

/** rebase.done for stack 2: every block replayed cleanly, each on the one before. */
function rebased(d: Driver, ids: string[], outcomes: Record<string, 'changed' | 'conflict'> = {}): EventBody[] {
  let onto = X;
  const results = ids.map((id, i) => {
    const outcome: 'fast_forward' | 'clean' | 'changed' | 'conflict' = outcomes[id] ?? (i === 0 ? 'fast_forward' : 'clean');
    if (outcome === 'conflict') return { block: id, outcome, onto, patch_before: 'p', files: ['notes.txt'] };
    const r = { block: id, outcome, onto, sha: R(i + 1), patch_before: 'p', patch_after: outcome === 'changed' ? 'q' : 'p' };
    if (outcome !== 'changed') onto = R(i + 1);
    return r;
  });
  return d.feed({ type: 'rebase.done', stack: 2, trunk_sha: X, results });
}

const only = <T extends EventBody['type']>(out: EventBody[], type: T) =>
  out.filter((e): e is Extract<EventBody, { type: T }> => e.type === type);

describe('the merge lane', () => {
  /** a approved while b is still being reviewed; then b approved. */
  function approvedWhileReviewing(merge: { batch: number; verify_trunk: boolean; gather: boolean }) {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2, merge });
    const session = 'b.1.builder';
    d.feed({ type: 'worktree.ready', block: 'b', attempt: 1, base: sha(1), path: 'b' });
    d.feed({ type: 'reply.received', block: 'b', role: 'builder', session, turn: 1, ok: true, reply: '>>DONE' });
    d.observe('b', sha(11));
    d.answer('b', '>>CONFIRMED {"evidence":{"c1":"here"}}');
    expect(d.state.blocks.get('b')!.waiting).toMatchObject({ on: 'turn', turn: { role: 'reviewer' } });
    const first = d.approve('a', sha(10));
    const second = d.answer('b', '>>APPROVE');
    return { first: only(first, 'lane.stacked'), second: only(second, 'lane.stacked') };
  }

  it('with gather, waits for a block under review to join the stack, then tests the two together', () => {
    const { first, second } = approvedWhileReviewing({ batch: 8, verify_trunk: false, gather: true });
    expect(first).toEqual([]);
    expect(second.map((e) => e.blocks.map((b) => b.block))).toEqual([['a', 'b']]);
  });

  it('with gather, does not wait once the queue holds a whole batch', () => {
    const { first } = approvedWhileReviewing({ batch: 1, verify_trunk: false, gather: true });
    expect(first.map((e) => e.blocks.map((b) => b.block))).toEqual([['a']]);
  });

  it('without gather, stacks the first approved block at once, alone', () => {
    const { first, second } = approvedWhileReviewing({ batch: 8, verify_trunk: false, gather: false });
    expect(first.map((e) => e.blocks.map((b) => b.block))).toEqual([['a']]);
    expect(second).toEqual([]);
  });

  it('stacks the waiting blocks in queue order and tests only the top', () => {
    const { d, out } = stacked(['a', 'b', 'c', 'd']);
    expect(out.at(-1)).toEqual({
      type: 'lane.stacked',
      stack: 2,
      trunk_sha: X,
      blocks: ['a', 'b', 'c', 'd'].map((block, i) => ({ block, sha: sha(10 + i), patch_id: 'p' })),
    });
    expect(rebased(d, ['a', 'b', 'c', 'd'])).toEqual([{ type: 'candidate.requested', stack: 2, sha: R(4), blocks: ['a', 'b', 'c', 'd'] }]);
  });

  it('lands a green stack in one intent, each block at its own commit, and wraps each', () => {
    const { d } = stacked(['a', 'b', 'c']);
    rebased(d, ['a', 'b', 'c']);
    const green = d.feed({ type: 'candidate.tested', stack: 2, sha: R(3), blocks: ['a', 'b', 'c'], ok: true, tests: GREEN });
    expect(green).toEqual([
      {
        type: 'land.intent',
        stack: 2,
        sha: R(3),
        from: X,
        blocks: [
          { block: 'a', sha: R(1) },
          { block: 'b', sha: R(2) },
          { block: 'c', sha: R(3) },
        ],
        tested: 'lane',
      },
    ]);
    const landed = ['a', 'b', 'c'].flatMap((id, i) => d.feed({ type: 'block.landed', block: id, sha: R(i + 1), from: X, top: R(3) }));
    expect(only(landed, 'block.phase').map((e) => [e.block, e.on, e.to])).toEqual([
      ['a', 'landed', 'wrap'],
      ['b', 'landed', 'wrap'],
      ['c', 'landed', 'wrap'],
    ]);
    expect(only(landed, 'wrap.requested').map((e) => e.block)).toEqual(['a', 'b', 'c']);
    expect(only(landed, 'lane.closed')).toEqual([
      { type: 'lane.closed', stack: 2, landed: ['a', 'b', 'c'], returned: [], detail: expect.any(String) },
    ]);
    expect(d.state.trunkSha).toBe(R(3));
    expect(only(landed, 'test.requested')).toEqual([]);
  });

  it('bisects a red stack: the green prefix lands, exactly the first red block goes back to build, the rest are re-stacked', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }).chain((n) => fc.tuple(fc.constant(n), fc.subarray([...Array(n).keys()]))),
        ([n, bad]) => {
          const ids = Array.from({ length: n }, (_, i) => `b${i}`);
          const { d } = stacked(ids);
          const first = bad.length > 0 ? Math.min(...bad) : n;
          let out = rebased(d, ids);
          const green = new Set<string>();
          let tests = 0;
          for (;;) {
            const ask = out.find((e) => e.type === 'candidate.requested' || e.type === 'bisect.step');
            if (!ask || (ask.type !== 'candidate.requested' && ask.type !== 'bisect.step')) break;
            tests += 1;
            const ok = ask.blocks.length <= first;
            if (ok) green.add(ask.sha);
            out = d.feed({ type: 'candidate.tested', stack: 2, sha: ask.sha, blocks: ask.blocks, ok, tests: ok ? GREEN : RED });
          }
          expect(tests).toBeLessThanOrEqual(1 + Math.ceil(Math.log2(n)));
          const intent = only(out, 'land.intent')[0];
          if (first === 0) expect(intent).toBeUndefined();
          else {
            expect(intent!.blocks.map((b) => b.block)).toEqual(ids.slice(0, first));
            // Trunk only moves to a top the engine tested green.
            expect(green.has(intent!.sha)).toBe(true);
          }
          if (first < n) {
            expect(only(out, 'gate.failed')).toEqual([
              {
                type: 'gate.failed',
                block: ids[first],
                sha: R(first + 1),
                purpose: 'lane',
                facts: [expect.objectContaining({ name: 'tests', ok: false })],
              },
            ]);
            expect(only(out, 'block.phase')).toContainEqual({
              type: 'block.phase',
              block: ids[first],
              from: 'merge',
              to: 'build',
              on: 'culprit',
            });
            expect(only(out, 'block.dispatched')).toContainEqual(expect.objectContaining({ block: ids[first], kind: 'build' }));
          }
          for (const b of intent?.blocks ?? [])
            out = [...out, ...d.feed({ type: 'block.landed', block: b.block, sha: b.sha, from: X, top: intent!.sha })];
          const closed = only(out, 'lane.closed')[0]!;
          expect(closed.landed).toEqual(ids.slice(0, first));
          expect(closed.returned).toEqual(ids.slice(first + 1));
          const next = only(out, 'lane.stacked')[0];
          if (first + 1 < n)
            expect(next).toMatchObject({ stack: 3, trunk_sha: intent?.sha ?? X, blocks: ids.slice(first + 1).map((block) => ({ block })) });
          else expect(next).toBeUndefined();
        },
      ),
      { numRuns: 200 },
    );
  });

  it('tells the culprit where it failed and what the tests printed', () => {
    const { d } = stacked(['a', 'b']);
    rebased(d, ['a', 'b']);
    const out = d.feed({ type: 'candidate.tested', stack: 2, sha: R(2), blocks: ['a', 'b'], ok: false, tests: RED });
    expect(out[0]).toMatchObject({ type: 'bisect.step', stack: 2, sha: R(1), blocks: ['a'], green: 0, red: 2 });
    d.feed({ type: 'candidate.tested', stack: 2, sha: R(1), blocks: ['a'], ok: true, tests: GREEN });
    const b = d.state.blocks.get('b')!;
    expect(b.feedback).toContain(`on top of a (${R(2).slice(0, 12)}`);
    expect(b.feedback).toContain('AssertionError: 1 !== 2');
    expect(b.rounds.build).toBe(1);
  });

  it('names setup, not the tests, when setup turned the stack red', () => {
    const { d } = stacked(['a']);
    rebased(d, ['a']);
    const setup = { exit: 2, timed_out: false, log: 'tests/s.setup.log', tail: 'npm ERR! missing' };
    const out = d.feed({ type: 'candidate.tested', stack: 2, sha: R(1), blocks: ['a'], ok: false, setup, tests: null });
    expect(only(out, 'gate.failed')[0]!.facts).toEqual([
      { name: 'setup', ok: false, evidence: expect.stringContaining('npm ERR! missing') },
    ]);
    expect(only(out, 'lane.closed')[0]).toMatchObject({ landed: [], returned: [] });
  });

  it('escalates a block that turns the stack red once its build budget is spent', () => {
    const { d } = stacked(['a']);
    let stack = 2;
    let out: EventBody[] = [];
    for (let round = 1; round <= 3; round += 1) {
      if (round > 1) {
        d.answer('a', '>>DONE');
        d.observe('a', sha(40 + round));
        d.answer('a', '>>CONFIRMED {"evidence":{"c1":"here"}}');
        const approved = d.answer('a', '>>APPROVE');
        stack = only(approved, 'lane.stacked')[0]!.stack;
        const onto = d.state.trunkSha!;
        d.feed({
          type: 'rebase.done',
          stack,
          trunk_sha: onto,
          results: [{ block: 'a', outcome: 'clean', onto, sha: R(round), patch_before: 'p', patch_after: 'p' }],
        });
      } else rebased(d, ['a']);
      out = d.feed({ type: 'candidate.tested', stack, sha: R(round), blocks: ['a'], ok: false, tests: RED });
    }
    expect(only(out, 'escalation.raised')).toEqual([expect.objectContaining({ block: 'a', trouble: 'gate_budget', handler: 'operator' })]);
    expect(d.state.blocks.get('a')!.phase).toBe('parked');
  });

  it('hands a rebase that conflicts with trunk to the builder, and re-stacks one that conflicts only with a block below it', () => {
    const { d } = stacked(['a', 'b', 'c']);
    const out = rebased(d, ['a', 'b', 'c'], { a: 'conflict', c: 'conflict' });
    expect(only(out, 'block.dispatched')).toEqual([expect.objectContaining({ block: 'a', kind: 'merge', phase: 'merge' })]);
    expect(only(out, 'candidate.requested')).toEqual([{ type: 'candidate.requested', stack: 2, sha: R(2), blocks: ['b'] }]);
    expect(d.state.blocks.get('a')!.rebased?.files).toEqual(['notes.txt']);
    d.feed({ type: 'candidate.tested', stack: 2, sha: R(2), blocks: ['b'], ok: true, tests: GREEN });
    const landed = d.feed({ type: 'block.landed', block: 'b', sha: R(2), from: X, top: R(2) });
    expect(only(landed, 'lane.closed')[0]).toMatchObject({ landed: ['b'], returned: ['c'] });
    expect(only(landed, 'lane.stacked')[0]).toEqual({
      type: 'lane.stacked',
      stack: 3,
      trunk_sha: R(2),
      blocks: [{ block: 'c', sha: sha(12), patch_id: 'p' }],
    });
  });

  it('sends a clean rebase onto trunk that changed the patch back to review, pinned to the rebased commit', () => {
    const { d } = stacked(['a', 'b']);
    const out = rebased(d, ['a', 'b'], { a: 'changed' });
    expect(only(out, 'block.phase')).toEqual([{ type: 'block.phase', block: 'a', from: 'merge', to: 'review', on: 'patch.changed' }]);
    expect(only(out, 'block.dispatched')).toEqual([expect.objectContaining({ block: 'a', kind: 'review', sha: R(1) })]);
    expect(d.state.blocks.get('a')).toMatchObject({ attested: R(1), patchId: 'q' });
    // b replays straight onto trunk in its place.
    expect(only(out, 'candidate.requested')).toEqual([{ type: 'candidate.requested', stack: 2, sha: R(2), blocks: ['b'] }]);
  });

  it('lets a MERGED head whose facts hold and whose patch is unchanged enter the lane like any other', () => {
    const { d } = stacked(['a']);
    rebased(d, ['a'], { a: 'conflict' });
    d.answer('a', '>>MERGED');
    const out = d.observe('a', sha(50), { purpose: 'merge' });
    expect(out.map((e) => e.type)).toEqual(['gate.passed', 'merge.queued', 'lane.stacked']);
    expect(d.state.blocks.get('a')!.rounds.merge).toBe(1);
  });

  it('parks the bottom block when trunk moved under the lane, returns the rest and halts', () => {
    const { d } = stacked(['a', 'b']);
    const out = d.feed({ type: 'rebase.done', stack: 2, trunk_sha: sha(9), results: [] });
    expect(out.map((e) => e.type)).toEqual(['escalation.raised', 'block.parked', 'lane.closed']);
    expect(only(out, 'lane.closed')[0]).toMatchObject({ returned: ['b'] });
    expect(d.state.trunkHalt).toEqual({ sha: sha(9), block: 'a' });
    expect(d.state.lane.stack).toBeUndefined();
  });

  it('ends the run, exit 3, when a block waits behind one queued in a lane trunk halted (simulator seed 1527)', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }, { id: 'c', depends_on: ['b'] }], { maxParallel: 4 });
    d.approve('a', sha(10));
    d.feed({ type: 'rebase.done', stack: 1, trunk_sha: sha(9), results: [] });
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'trunk moved' });
    // b is approved while the lane is halted: it waits in the queue, and c waits for b.
    const out = d.approve('b', sha(11));
    expect(d.state.blocks.get('b')!.waiting).toEqual({ on: 'lane' });
    expect(out).toContainEqual(expect.objectContaining({ type: 'run.finished', exit: 3, parked: ['a', 'b', 'c'] }));
  });

  it('treats a refused ref transaction as a trunk touch', () => {
    const { d } = stacked(['a', 'b']);
    rebased(d, ['a', 'b']);
    d.feed({ type: 'candidate.tested', stack: 2, sha: R(2), blocks: ['a', 'b'], ok: true, tests: GREEN });
    const out = d.feed({ type: 'land.refused', stack: 2, blocks: ['a', 'b'], actual: sha(9), detail: 'trunk moved' });
    expect(out.map((e) => e.type)).toEqual(['escalation.raised', 'block.parked', 'lane.closed']);
    expect(only(out, 'lane.closed')[0]).toMatchObject({ landed: [], returned: ['b'] });
  });

  it('checks trunk after a landing when verify_trunk is on, and never exits 0 after a red check', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }], { maxParallel: 1, merge: { batch: 8, verify_trunk: true } });
    d.approve('a', X);
    const landed = d.landStack({ a: X });
    expect(only(landed, 'test.requested')).toEqual([{ type: 'test.requested', block: 'a', sha: X }]);
    expect(d.feed({ type: 'block.wrapped', block: 'a', summary: 's' }).map((e) => e.type)).toEqual(['block.phase']);
    const red = d.feed({ type: 'trunk.tested', block: 'a', sha: X, ok: false, tests: RED });
    expect(red).toEqual([expect.objectContaining({ type: 'escalation.raised', trouble: 'trunk_red', handler: 'operator' })]);
    const end = d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    expect(end).toEqual([expect.objectContaining({ type: 'run.finished', exit: 3, landed: ['a'] })]);
  });

  it('lands a lone block that sits on trunk as it is without testing it again: its gate tested exactly that sha', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }]);
    d.approve('a', X);
    const out = d.feed({
      type: 'rebase.done',
      stack: 1,
      trunk_sha: sha(1),
      results: [{ block: 'a', outcome: 'fast_forward', onto: sha(1), sha: X, patch_before: 'p', patch_after: 'p' }],
    });
    expect(out).toEqual([{ type: 'land.intent', stack: 1, sha: X, from: sha(1), blocks: [{ block: 'a', sha: X }], tested: 'gate' }]);
  });

  it('tests a block again in the lane when it was rebased, or sent to review with a rebased sha', () => {
    const { d } = stacked(['a']);
    const out = rebased(d, ['a'], { a: 'changed' });
    expect(only(out, 'block.dispatched')).toEqual([expect.objectContaining({ kind: 'review', sha: R(1) })]);
    const approved = d.answer('a', '>>APPROVE');
    const stack = only(approved, 'lane.stacked')[0]!;
    const again = d.feed({
      type: 'rebase.done',
      stack: stack.stack,
      trunk_sha: X,
      results: [{ block: 'a', outcome: 'fast_forward', onto: X, sha: R(1), patch_before: 'q', patch_after: 'q' }],
    });
    expect(again).toEqual([{ type: 'candidate.requested', stack: stack.stack, sha: R(1), blocks: ['a'] }]);
  });

  it('ignores a test result nobody awaits', () => {
    const { d } = stacked(['a', 'b']);
    rebased(d, ['a', 'b']);
    expect(d.feed({ type: 'candidate.tested', stack: 2, sha: R(1), blocks: ['a'], ok: true, tests: GREEN })).toEqual([]);
    expect(d.state.lane.stack).toMatchObject({ green: 0, step: { at: 'testing', sha: R(2) } });
  });

  it('takes at most [merge] batch blocks into one stack', () => {
    const { out } = stacked(['a', 'b', 'c'], { batch: 2, verify_trunk: false });
    expect(only(out, 'lane.stacked')[0]!.blocks.map((b) => b.block)).toEqual(['a', 'b']);
  });
});
