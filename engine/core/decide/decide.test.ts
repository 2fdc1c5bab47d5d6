import { describe, expect, it } from 'vitest';
import type { BodyOf, EventBody } from '../events.ts';
import { Driver, sha } from '../../testing/driver.ts';

const requested = (ds: EventBody[]) => ds.flatMap((d) => (d.type === 'worktree.requested' ? [d.block] : []));

describe('the decision step', () => {
  it('fills at most max_parallel slots with ready blocks, by priority then id', () => {
    const d = new Driver();
    const first = d.boot([{ id: 'c' }, { id: 'b', priority: -1 }, { id: 'a' }, { id: 'z', depends_on: ['a'] }], { maxParallel: 2 });
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
      { maxParallel: 2 },
    );
    d.approve('base', sha(2));
    d.landStack({ base: sha(2) });
    expect(requested(d.feed({ type: 'block.wrapped', block: 'base', summary: 's' }))).toEqual(['y', 'z']);
  });

  it('parks a block registered after its dependency was abandoned, naming the dependency (--watch)', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }], { maxParallel: 1, watch: true });
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
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 4, watch: true });
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
    const out = d.observe('a', sha(2), { tests: null });
    const failed = out.find((x) => x.type === 'gate.failed');
    expect(failed).toMatchObject({ facts: expect.arrayContaining([expect.objectContaining({ name: 'tests', ok: false })]) });
    expect(out.some((x) => x.type === 'block.dispatched' && x.kind === 'challenge')).toBe(false);
  });

  /** One DONE of block `a` and the facts the engine observed for it, with `extra` fields. */
  function gateOf(extra: Partial<BodyOf<'facts.observed'>>, ready: Record<string, unknown> = {}): EventBody[] {
    const d = new Driver();
    d.boot([{ id: 'a' }]);
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a', ...ready });
    d.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    return d.observe('a', sha(2), extra);
  }
  const failedNames = (out: EventBody[]) =>
    out.flatMap((x) => (x.type === 'gate.failed' ? x.facts.filter((f) => !f.ok).map((f) => f.name) : []));

  it('fails git_config_untouched when the shared git directory differs from the attempt start, naming the file', () => {
    const out = gateOf({ git_files: { config: '-1', 'hooks/pre-commit': 'x2' } }, { git_files: { config: '-1' } });
    const failed = out.find((x) => x.type === 'gate.failed');
    expect(failedNames(out)).toEqual(['git_config_untouched']);
    expect(JSON.stringify(failed)).toContain('hooks/pre-commit (new)');
    expect(gateOf({ git_files: { config: '-1' } }, { git_files: { config: '-1' } }).some((x) => x.type === 'gate.failed')).toBe(false);
  });

  it("fails main_checkout_untouched when the engine's own files changed, even with a clean git status", () => {
    const out = gateOf({ engine_files: ['.tron/blocks/evil.md (new)'] });
    expect(failedNames(out)).toEqual(['main_checkout_untouched']);
    expect(out.some((x) => x.type === 'block.dispatched' && x.kind === 'build')).toBe(true);
  });

  it('parks a block whose branch changes .tron/ for the operator, with the diff named, instead of sending it back', () => {
    const out = gateOf({ engine_diff: ['M .tron/config.toml'] });
    expect(failedNames(out)).toEqual(['engine_files_untouched']);
    expect(out.find((x) => x.type === 'escalation.raised')).toMatchObject({ trouble: 'engine_files', handler: 'operator' });
    expect(out.find((x) => x.type === 'block.parked')).toMatchObject({ reason: expect.stringContaining('M .tron/config.toml') });
    expect(out.some((x) => x.type === 'block.dispatched')).toBe(false);
  });

  it('fails commits after CHANGES when the new head carries the patch the reviewer rejected', () => {
    // The review asks for changes; the builder amends its commit without changing anything.
    const e = new Driver();
    e.boot([{ id: 'a' }]);
    e.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    e.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    const observed = (head: string, patch: string, turn: number) => {
      e.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn, ok: true, reply: '>>DONE' });
      return e.observe('a', head, { patch_id: patch });
    };
    e.observe('a', sha(2));
    e.feed({
      type: 'reply.received',
      block: 'a',
      role: 'builder',
      session: 'a.1.builder',
      turn: 2,
      ok: true,
      reply: '>>CONFIRMED {"evidence":{"c1":"x"}}',
    });
    e.feed({
      type: 'reply.received',
      block: 'a',
      role: 'reviewer',
      session: 'a.1.reviewer',
      turn: 1,
      ok: true,
      reply: '>>CHANGES {"notes":"rename it"}',
    });
    expect(e.state.blocks.get('a')!.rejected).toEqual({ sha: sha(2), patchId: 'p' });
    const amended = observed(sha(3), 'p', 4);
    expect(failedNames(amended)).toEqual(['commits']);
    const revised = observed(sha(4), 'q', 6);
    expect(revised.find((x) => x.type === 'block.dispatched')).toMatchObject({ kind: 'challenge', sha: sha(4) });
  });

  it('accepts trunk at a sha the engine itself landed while the facts were observed', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }]);
    d.feed({ type: 'worktree.ready', block: 'b', attempt: 1, base: sha(1), path: 'b' });
    d.feed({ type: 'reply.received', block: 'b', role: 'builder', session: 'b.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    d.approve('a', sha(2));
    d.landStack({ a: sha(2) });
    const out = d.observe('b', sha(3), { trunk_sha: sha(2), patch_id: 'q', fast_forward: false });
    expect(out.find((x) => x.type === 'block.dispatched')).toMatchObject({ kind: 'challenge', sha: sha(3) });
  });
});

describe('a worker that fails the same way twice', () => {
  const failed = (block: string, turn: number, cause?: 'auth' | 'network', role: 'builder' | 'reviewer' = 'builder') =>
    ({
      type: 'reply.received',
      block,
      role,
      session: `${block}.1.${role}`,
      turn,
      ok: false,
      failure: 'exit',
      detail: cause === 'auth' ? 'exited with 1: Not logged in · Please run /login' : 'exited with 1: API Error: Unable to connect to API',
      ...(cause ? { cause } : {}),
    }) as EventBody;
  const types = (ds: EventBody[]) => ds.map((x) => (x.type === 'escalation.raised' ? `${x.type} ${x.trouble}→${x.handler}` : x.type));

  it('pages the operator at once with the reason, without the architect, and starts no other block', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 1 });
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    expect(types(d.feed(failed('a', 1, 'auth')))).toEqual(['reply.refused', 'escalation.raised turn_failed→restate', 'block.dispatched']);
    const second = d.feed(failed('a', 2, 'auth'));
    expect(types(second)).toEqual(['reply.refused', 'worker.unavailable', 'escalation.raised worker_unavailable→operator', 'block.parked']);
    expect(second.find((x) => x.type === 'escalation.raised')).toMatchObject({
      detail: expect.stringContaining('the builder worker failed twice in a row (auth): exited with 1: Not logged in · Please run /login'),
    });
    // The slot a freed is not given to b: b would fail the same way.
    expect(requested(second)).toEqual([]);
    const end = d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    expect(end).toEqual([expect.objectContaining({ type: 'run.finished', exit: 3, parked: ['a', 'b'] })]);
  });

  it('holds a turn of the unavailable worker and issues it unchanged once the operator answers', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2, watch: true });
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    d.feed({ type: 'worktree.ready', block: 'b', attempt: 1, base: sha(1), path: 'b' });
    d.feed(failed('a', 1, 'auth'));
    d.feed(failed('a', 2, 'auth'));
    // b's build turn was already running and answered; its challenge is for the same builder worker.
    d.feed({ type: 'reply.received', block: 'b', role: 'builder', session: 'b.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    const facts = d.observe('b', sha(3));
    const held = facts.find((x) => x.type === 'turn.held');
    expect(held).toMatchObject({ block: 'b', role: 'builder', kind: 'challenge', sha: sha(3), turn: 2 });
    expect(facts.some((x) => x.type === 'block.dispatched')).toBe(false);
    expect(d.state.blocks.get('b')!.waiting.on).toBe('worker');

    const answered = d.feed({
      type: 'operator.answered',
      block: 'a',
      word: 'RETRY',
      payload: { guidance: 'logged in again' },
      file: 'f',
      trunk_sha: sha(1),
    });
    const { type: _type, ...turn } = held as Extract<EventBody, { type: 'turn.held' }>;
    expect(answered).toContainEqual({ ...turn, type: 'block.dispatched' });
    expect(requested(answered)).toEqual(['a']);
    expect(d.state.workers.builder?.held).toBeUndefined();
  });

  it('ends the run, exit 3, when turns held for the worker fill every slot and a block waits for one (simulator seed 354157)', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }], { maxParallel: 2 });
    const toReview = (id: string, head: string) => {
      d.feed({ type: 'worktree.ready', block: id, attempt: 1, base: sha(1), path: id });
      d.answer(id, '>>DONE');
      d.observe(id, head);
      return d.answer(id, '>>CONFIRMED {"evidence":{"c1":"here"}}');
    };
    toReview('a', sha(10));
    d.feed(failed('a', 1, 'auth', 'reviewer'));
    d.feed(failed('a', 2, 'auth', 'reviewer'));
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    // b and c reach review with the reviewer unavailable: their turns are held, in the two slots; d waits for one.
    toReview('b', sha(11));
    const last = toReview('c', sha(12));
    expect(['b', 'c'].map((id) => d.state.blocks.get(id)!.waiting.on)).toEqual(['worker', 'worker']);
    expect(d.state.blocks.get('d')!.phase).toBe('pending');
    expect(last).toContainEqual(expect.objectContaining({ type: 'run.finished', exit: 3, parked: ['a', 'b', 'c', 'd'] }));
  });

  it('climbs the usual row when the causes differ or none is named', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }], { maxParallel: 1 });
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    d.feed(failed('a', 1, 'auth'));
    expect(types(d.feed(failed('a', 2, 'network')))).toEqual(['reply.refused', 'escalation.raised turn_failed→operator', 'block.parked']);
    expect(d.state.workers.builder).toEqual({ cause: 'network', streak: 1 });
    const e = new Driver();
    e.boot([{ id: 'a' }], { maxParallel: 1 });
    e.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    e.feed(failed('a', 1));
    expect(types(e.feed(failed('a', 2)))).not.toContain('worker.unavailable');
  });

  it("counts turns across blocks: another block's failure with the same cause is the second", () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2 });
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    d.feed({ type: 'worktree.ready', block: 'b', attempt: 1, base: sha(1), path: 'b' });
    d.feed(failed('a', 1, 'network'));
    expect(types(d.feed(failed('b', 1, 'network')))).toContain('worker.unavailable');
    // a's restate, already asked for, is answered; a reply resets the streak but not the hold.
    d.feed({ type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 2, ok: true, reply: '>>DONE' });
    expect(d.state.workers.builder).toEqual({ streak: 0, held: { cause: 'network', blocks: ['b'] } });
  });

  describe('budgets', () => {
    const usage = (block: string, tokens: number, cost_usd: number): EventBody => ({
      type: 'usage.recorded',
      block,
      role: 'builder',
      session: `${block}.1.builder`,
      turn: 1,
      model: 'm',
      input_tokens: tokens,
      cached_tokens: 0,
      output_tokens: 0,
      cost_usd,
      priced_by: 'worker',
    });

    it('parks a block past block_tokens for the operator with its spend, and a RETRY gives it a fresh budget', () => {
      const d = new Driver();
      d.boot([{ id: 'a' }], { maxParallel: 1, watch: true, budgets: { block_tokens: 1000 } });
      d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
      expect(d.feed(usage('a', 600, 0.01))).toEqual([]);
      const over = d.feed(usage('a', 600, 0.01));
      expect(over.map((x) => x.type)).toEqual(['budget.exceeded', 'escalation.raised', 'block.parked']);
      expect(over[0]).toMatchObject({ scope: 'block', block: 'a', limit: 'block_tokens = 1000', spent_tokens: 1200 });
      expect(over[1]).toMatchObject({ trouble: 'budget_exceeded', handler: 'operator' });
      d.feed({ type: 'page.sent', block: 'a', page: 'p', reason: 'r' });
      d.feed({ type: 'operator.answered', block: 'a', word: 'RETRY', payload: { guidance: 'go on' }, file: 'f', trunk_sha: sha(1) });
      // The answer starts a new stretch: 600 more tokens are within it.
      expect(d.feed(usage('a', 600, 0.01)).filter((x) => x.type === 'budget.exceeded')).toEqual([]);
    });

    it('stops the run past run_usd: nothing new is scheduled and the run ends with exit 3 naming the budget', () => {
      const d = new Driver();
      d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 1, watch: false, budgets: { run_usd: 0.05 } });
      d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
      const out = d.feed(usage('a', 10, 0.06));
      expect(out.map((x) => x.type)).toEqual(['budget.exceeded']);
      // The build turn is in flight: the run ends when its (stopped) reply is in.
      const end = d.feed({
        type: 'reply.received',
        block: 'a',
        role: 'builder',
        session: 'a.1.builder',
        turn: 1,
        ok: false,
        failure: 'aborted',
      });
      expect(end.filter((x) => x.type === 'worktree.requested')).toEqual([]);
      expect(end.at(-1)).toMatchObject({ type: 'run.finished', reason: 'budget', exit: 3 });
    });
  });

  it('keeps max_parallel for an answered block: a RETRY while every slot is taken waits for one, then starts from trunk', () => {
    const d = new Driver();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 1 });
    d.feed({ type: 'worktree.ready', block: 'a', attempt: 1, base: sha(1), path: 'a' });
    // a is parked for the operator; its slot goes to b.
    const parked = d.answer('a', '>>BLOCKED {"reason":"stuck"}');
    expect(parked).toContainEqual({ type: 'worktree.requested', block: 'b', attempt: 1, base: sha(1) });
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'r' });
    const answered = d.feed({
      type: 'operator.answered',
      block: 'a',
      word: 'RETRY',
      payload: { guidance: 'try the other file' },
      file: 'f',
      trunk_sha: sha(1),
    });
    expect(answered).toEqual([{ type: 'block.phase', block: 'a', from: 'parked', to: 'pending', on: 'RETRY' }]);
    expect(d.state.blocks.get('a')!.guidance).toBe('try the other file');
    // What status shows: it waits for a slot now, no longer on the operator (simulator, waiting-told-true, seed 53).
    expect(d.state.blocks.get('a')!.waiting).toEqual({ on: 'slot' });
    // b goes to the merge lane: its slot is free, and a starts again from trunk.
    const freed = d.approve('b', sha(3));
    expect(freed).toContainEqual({ type: 'worktree.requested', block: 'a', attempt: 2, base: sha(1) });
  });
});
