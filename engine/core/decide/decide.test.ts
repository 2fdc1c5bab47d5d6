import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, sha } from '../../testing/driver.ts';

const requested = (ds: EventBody[]) => ds.flatMap((d) => (d.type === 'worktree.requested' ? [d.block] : []));

describe('the decision step', () => {
  it('fills at most max_parallel slots with ready blocks, by priority then id', () => {
    const d = new Driver();
    const first = d.boot([{ id: 'c' }, { id: 'b', priority: -1 }, { id: 'a' }, { id: 'z', depends_on: ['a'] }], 2);
    expect(requested(first)).toEqual(['b', 'a']);
  });

  it('dispatches a dependent only once its dependency has landed', () => {
    const d = new Driver();
    expect(requested(d.boot([{ id: 'base' }, { id: 'top', depends_on: ['base'] }]))).toEqual(['base']);
    d.approve('base', sha(2));
    d.landStack({ base: sha(2) });
    expect(requested(d.feed({ type: 'block.wrapped', block: 'base', summary: 's' }))).toEqual(['top']);
  });

  it('gives the slots a landing frees to the blocks it made ready, by priority then id', () => {
    const d = new Driver();
    d.boot(
      [
        { id: 'base' },
        { id: 'v', depends_on: ['base'], priority: 1 },
        { id: 'z', depends_on: ['base'] },
        { id: 'y', depends_on: ['base'] },
        { id: 'x', depends_on: ['y'] },
      ],
      2,
    );
    d.approve('base', sha(2));
    d.landStack({ base: sha(2) });
    expect(requested(d.feed({ type: 'block.wrapped', block: 'base', summary: 's' }))).toEqual(['y', 'z']);
  });

  it('parks a block registered after its dependency was abandoned, naming the dependency (--watch)', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }], 1, true);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    d.feed({
      type: 'reply.received',
      block: 'a',
      role: 'builder',
      session: 'a.1.builder',
      turn: 1,
      ok: true,
      reply: '>>BLOCKED {"reason":"stuck"}',
    });
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    const gone = d.feed({
      type: 'operator.answered',
      block: 'a',
      word: 'ABANDON',
      payload: { reason: 'no' },
      file: 'f',
      trunk_sha: sha(1),
    });
    expect(gone).toContainEqual({ type: 'block.abandoned', block: 'a', reason: 'no' });
    const info = (id: string, depends_on: string[]) => ({ id, title: id, depends_on, priority: 0, criteria: ['works'], digest: id });
    const out = d.feed({ type: 'register.loaded', blocks: [info('a', []), info('b', []), info('c', ['a'])] });
    expect(out).toEqual([
      { type: 'block.parked', block: 'c', reason: 'it depends on a, which was abandoned' },
      { type: 'worktree.requested', block: 'b', attempt: 1, base: sha(1) },
    ]);
  });

  it('stacks the blocks that queued while the lane was busy together, in queue order, on the trunk the last stack left', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    const a = d.approve('a', sha(2));
    expect(a.filter((x) => x.type === 'lane.stacked')).toEqual([
      { type: 'lane.stacked', stack: 1, trunk_sha: sha(1), blocks: [{ block: 'a', sha: sha(2), patch_id: 'p' }] },
    ]);
    expect(d.approve('c', sha(4)).some((x) => x.type === 'lane.stacked')).toBe(false);
    expect(d.approve('b', sha(3)).some((x) => x.type === 'lane.stacked')).toBe(false);
    expect(d.state.lane.queue).toEqual(['c', 'b']);
    const landed = d.landStack({ a: sha(2) });
    expect(landed.map((x) => x.type)).toEqual(['block.phase', 'wrap.requested', 'lane.closed', 'lane.stacked']);
    expect(landed.at(-1)).toEqual({
      type: 'lane.stacked',
      stack: 2,
      trunk_sha: sha(2),
      blocks: [
        { block: 'c', sha: sha(4), patch_id: 'p' },
        { block: 'b', sha: sha(3), patch_id: 'p' },
      ],
    });
  });

  it('ends a run whose only remaining merge waits behind a trunk touch, with exit 3', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }]);
    d.approve('a', sha(2));
    d.feed({ type: 'rebase.done', stack: 1, trunk_sha: sha(9), results: [] });
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    const b = d.approve('b', sha(3), sha(1));
    expect(b.at(-1)).toMatchObject({ type: 'run.finished', exit: 3, landed: [], parked: ['a', 'b'] });
  });

  it('halts the lane once trunk was touched, until the operator answers (--watch)', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], 4, true);
    d.approve('a', sha(2));
    const touched = d.feed({ type: 'rebase.done', stack: 1, trunk_sha: sha(9), results: [] });
    expect(touched).toContainEqual(expect.objectContaining({ type: 'escalation.raised', trouble: 'trunk_touched', sha: sha(9) }));
    expect(touched).toContainEqual(expect.objectContaining({ type: 'lane.closed', stack: 1, returned: [] }));
    const b = d.approve('b', sha(3), sha(1));
    expect(b.some((x) => x.type === 'lane.stacked')).toBe(false);
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    const answered = d.feed({
      type: 'operator.answered',
      block: 'a',
      word: 'RETRY',
      payload: { guidance: 'g' },
      file: 'f',
      trunk_sha: sha(9),
    });
    expect(answered).toContainEqual({
      type: 'lane.stacked',
      stack: 2,
      trunk_sha: sha(9),
      blocks: [{ block: 'b', sha: sha(3), patch_id: 'p' }],
    });
    expect(d.state.trunkSha).toBe(sha(9));
  });

  it('never acts on a reply with two >> lines: it asks the same session to restate', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }]);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    const out = d.feed({
      type: 'reply.received',
      block: 'a',
      role: 'builder',
      session: 'a.1.builder',
      turn: 1,
      ok: true,
      reply: '>>DONE\n>>DONE',
    });
    expect(out.map((x) => x.type)).toEqual(['reply.refused', 'escalation.raised', 'block.dispatched']);
    expect(out[2]).toMatchObject({ kind: 'restate', session: 'a.1.builder', turn: 2, restating: 'build', expect: ['DONE', 'BLOCKED'] });
  });

  it('ignores a reply to a turn that is no longer pending', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }]);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    expect(
      d.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 7, ok: true, reply: '>>DONE' }),
    ).toEqual([]);
  });
});

describe('the truth gate', () => {
  it('never passes a head whose tests the engine did not run', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }]);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    d.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    const out = d.feed({
      type: 'facts.observed',
      block: 'a',
      purpose: 'gate',
      base: sha(1),
      head: sha(2),
      commits: 1,
      trunk_sha: sha(1),
      main_status: '',
      clean: true,
      status: '',
      tests: null,
      patch_id: 'p',
      fast_forward: true,
    });
    const failed = out.find((x) => x.type === 'gate.failed');
    expect(failed).toMatchObject({ facts: expect.arrayContaining([expect.objectContaining({ name: 'tests', ok: false })]) });
    expect(out.some((x) => x.type === 'block.dispatched' && x.kind === 'challenge')).toBe(false);
  });

  it('accepts trunk at a sha the engine itself landed while the facts were observed', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }]);
    d.feed({ type: 'worktree.ready', block: 'b', attempt: 1, base: sha(1), path: 'b' });
    d.feed({ type: 'reply.received', block: 'b', role: 'builder', session: 'b.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    d.approve('a', sha(2));
    d.landStack({ a: sha(2) });
    const tests = { exit: 0, timed_out: false, log: 'l', tail: '' };
    const out = d.feed({
      type: 'facts.observed',
      block: 'b',
      purpose: 'gate',
      base: sha(1),
      head: sha(3),
      commits: 1,
      trunk_sha: sha(2),
      main_status: '',
      clean: true,
      status: '',
      tests,
      patch_id: 'q',
      fast_forward: false,
    });
    expect(out.find((x) => x.type === 'block.dispatched')).toMatchObject({ kind: 'challenge', sha: sha(3) });
  });
});
