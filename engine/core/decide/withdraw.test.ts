/** A person withdrawing a block on the forge, decided purely: what stops, and what does not. */
import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const withdrawn = (block: string, extra: Partial<Extract<EventBody, { type: 'issue.withdrawn' }>> = {}): EventBody => ({
  type: 'issue.withdrawn',
  block,
  issue: 7,
  action: 'closed',
  by: 'ada',
  words: 'ada: Not needed any more.',
  ...extra,
});

describe('a block withdrawn on the forge', () => {
  it('is abandoned mid-turn with the person and their words as the reason, and its stale reply is not acted on', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b', depends_on: ['a'] }]);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    const out = d.feed(withdrawn('a'));
    expect(out).toContainEqual(
      expect.objectContaining({
        type: 'block.abandoned',
        block: 'a',
        reason: 'ada closed its issue #7 (the last comment there, ada: Not needed any more.)',
      }),
    );
    // Its dependent cannot go on without it.
    expect(out).toContainEqual(expect.objectContaining({ type: 'block.parked', block: 'b' }));
    expect(d.state.blocks.get('a')!.phase).toBe('abandoned');
    const late = d.feed({
      type: 'reply.received',
      block: 'a',
      role: 'builder',
      session: 'a.1.builder',
      turn: 1,
      ok: true,
      reply: '>>DONE',
    });
    expect(late.filter((e) => e.type !== 'run.finished')).toEqual([]);
  });

  it('says the label was taken off when it was, and stays given up when its worktree or facts arrive afterwards', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'c' }]);
    const out = d.feed(withdrawn('a', { action: 'unlabelled', by: undefined, words: undefined }));
    expect(out).toContainEqual(
      expect.objectContaining({
        type: 'block.abandoned',
        block: 'a',
        reason: 'the intake label was taken off its issue #7',
      }),
    );
    expect(d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' })).not.toContainEqual(
      expect.objectContaining({ type: 'block.dispatched', block: 'a' }),
    );
    expect(d.observe('a', sha(5)).filter((e) => 'block' in e && e.block === 'a')).toEqual([]);
  });

  it('gives up the stack it is in once the stack’s rebase has reported, so nothing of it lands, and the others go back to the queue', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2 });
    d.approve('a', sha(10));
    d.approve('b', sha(11));
    const stack = d.state.lane.stack!;
    expect(stack.asked).toEqual(['a']);
    d.landStack({ a: sha(10) });
    const next = d.state.lane.stack!;
    expect(next.asked).toEqual(['b']);
    // Its rebase is under way in the lane's checkout: no other stack may start there before it reports.
    const out = d.feed(withdrawn('b'));
    expect(out.map((e) => e.type)).toContain('block.abandoned');
    expect(out.map((e) => e.type)).not.toContain('lane.closed');
    const late = d.feed({
      type: 'rebase.done',
      stack: next.id,
      trunk_sha: sha(10),
      results: [{ block: 'b', outcome: 'fast_forward', onto: sha(10), sha: sha(11), patch_before: 'p', patch_after: 'p' }],
    });
    expect(late.some((e) => e.type === 'land.intent' || e.type === 'candidate.requested')).toBe(false);
    expect(late).toContainEqual(expect.objectContaining({ type: 'lane.closed', stack: next.id, landed: [], returned: [] }));
    expect(d.state.lane.stack).toBeUndefined();
  });

  it('gives up a stack whose test was running when one of its blocks was withdrawn, whatever the test says', () => {
    const d = new Driver();
    d.boot([{ id: 'x' }, { id: 'a' }, { id: 'b' }], { maxParallel: 3 });
    d.approve('x', sha(9));
    d.approve('a', sha(10));
    d.approve('b', sha(11));
    d.landStack({ x: sha(9) });
    const stack = d.state.lane.stack!;
    expect(stack.asked).toEqual(['a', 'b']);
    const rebased = d.feed({
      type: 'rebase.done',
      stack: stack.id,
      trunk_sha: sha(9),
      results: [
        { block: 'a', outcome: 'fast_forward', onto: sha(9), sha: sha(10), patch_before: 'p', patch_after: 'p' },
        { block: 'b', outcome: 'clean', onto: sha(10), sha: sha(21), patch_before: 'p', patch_after: 'p' },
      ],
    });
    expect(rebased).toContainEqual(expect.objectContaining({ type: 'candidate.requested', sha: sha(21) }));
    expect(d.feed(withdrawn('b')).map((e) => e.type)).not.toContain('lane.closed');
    const tested = d.feed({ type: 'candidate.tested', stack: stack.id, sha: sha(21), blocks: ['a', 'b'], ok: true, tests: GREEN });
    expect(tested.some((e) => e.type === 'land.intent')).toBe(false);
    expect(tested).toContainEqual(expect.objectContaining({ type: 'lane.closed', returned: ['a'] }));
    // a goes on alone.
    expect(tested).toContainEqual(expect.objectContaining({ type: 'lane.stacked', blocks: [expect.objectContaining({ block: 'a' })] }));
  });

  it('changes nothing for a landed block, nor for one whose landing is under way', () => {
    const landed = new Driver();
    landed.boot([{ id: 'a' }]);
    landed.approve('a', sha(10));
    landed.landStack({ a: sha(10) });
    expect(landed.feed(withdrawn('a'))).toEqual([]);

    const landing = new Driver();
    landing.boot([{ id: 'a' }]);
    landing.approve('a', sha(10));
    const stack = landing.state.lane.stack!;
    const rebased = landing.feed({
      type: 'rebase.done',
      stack: stack.id,
      trunk_sha: sha(1),
      results: [{ block: 'a', outcome: 'fast_forward', onto: sha(1), sha: sha(10), patch_before: 'p', patch_after: 'p' }],
    });
    if (rebased.some((e) => e.type === 'candidate.requested'))
      landing.feed({ type: 'candidate.tested', stack: stack.id, sha: sha(10), blocks: ['a'], ok: true, tests: GREEN });
    expect(landing.decisions.some((e) => e.type === 'land.intent')).toBe(true);
    expect(landing.feed(withdrawn('a'))).toEqual([]);
    expect(landing.state.blocks.get('a')!.phase).toBe('merge');
  });
});
