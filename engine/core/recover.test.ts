import { describe, expect, it } from 'vitest';
import type { BlockInfo, EventBody, TronEvent } from './events.ts';
import { planRecovery } from './recover.ts';
import { apply, initialState } from './state.ts';
import { Driver, sha } from '../testing/driver.ts';

/** A Driver that keeps the whole log it was fed: inputs and decisions, as a run writes it. */
function recording(): { d: Driver; log: TronEvent[] } {
  const d = new Driver();
  const log: TronEvent[] = [];
  const feed = d.feed.bind(d);
  d.feed = (body: EventBody) => {
    const at = d.seq + 1;
    const out = feed(body);
    log.push({ ...body, v: 2, seq: at, ts: at * 1000 } as TronEvent);
    log.push(...out.map((x, i) => ({ ...x, v: 2, seq: at + 1 + i, ts: at * 1000 }) as TronEvent));
    return out;
  };
  return { d, log };
}

/** The state of the next start once it has folded the plan. */
function restart(blocks: BlockInfo[], recovered: readonly EventBody[]) {
  const events = [{ type: 'register.loaded', blocks }, ...recovered] as EventBody[];
  return events.reduce((s, e, i) => apply(s, { ...e, v: 2, seq: i + 1, ts: 1 } as TronEvent), initialState());
}

describe('the recovery plan', () => {
  it('does not halt the lane again for a trunk touch the operator answered before the crash (simulator seed 113365)', () => {
    const { d, log } = recording();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2 });
    d.approve('a', sha(10));
    // Someone pushed to trunk: a's stack is given up, a parked, the lane halted on a.
    d.feed({ type: 'rebase.done', stack: 1, trunk_sha: sha(9), results: [] });
    // b's gate sees the same touch: b is parked too, while the halt stays a's.
    d.feed({ type: 'reply.received', block: 'b', role: 'builder', session: 'b.1.builder', turn: 1, ok: true, reply: '>>DONE' });
    d.observe('b', sha(11), { trunk_sha: sha(9) });
    expect(d.state.blocks.get('b')!.phase).toBe('parked');
    d.feed({ type: 'page.sent', block: 'a', page: 'a#1', reason: 'trunk moved' });
    d.feed({ type: 'page.sent', block: 'b', page: 'b#1', reason: 'trunk moved' });
    // The operator answers a: the new trunk is taken, the lane runs again. Then the engine dies.
    d.feed({ type: 'operator.answered', block: 'a', word: 'RETRY', payload: { guidance: 'go on' }, file: 'f', trunk_sha: sha(9) });
    expect(d.state.trunkHalt).toBeUndefined();
    const blocks = ['a', 'b'].map((id) => d.state.blocks.get(id)!.info);
    const plan = planRecovery(log, blocks, { landedRefs: new Map(), onTrunk: new Set([sha(1), sha(9)]), trunk: 'main' });
    const b = plan.recovered.find((r) => r.block === 'b')!;
    expect(b).toMatchObject({ phase: 'parked', trouble: 'trunk_touched' });
    // The next start folds the plan: b waits for its answer, but the lane is not halted on it.
    const s = restart(blocks, plan.recovered);
    expect(s.trunkHalt).toBeUndefined();
  });

  it('keeps the lane halted after a crash while the touch it halted for is unanswered', () => {
    const { d, log } = recording();
    d.boot([{ id: 'a' }, { id: 'b' }], { maxParallel: 2 });
    d.approve('a', sha(10));
    d.feed({ type: 'rebase.done', stack: 1, trunk_sha: sha(9), results: [] });
    const blocks = ['a', 'b'].map((id) => d.state.blocks.get(id)!.info);
    const plan = planRecovery(log, blocks, { landedRefs: new Map(), onTrunk: new Set([sha(1), sha(9)]), trunk: 'main' });
    const s = restart(blocks, plan.recovered);
    expect(s.trunkHalt).toEqual({ sha: '', block: 'a' });
  });

  it('believes a landing that came with the repository only at the sha its source names, and resumes that block landed', () => {
    const blocks: BlockInfo[] = ['add', 'subtract'].map((id) => ({
      id,
      title: id,
      depends_on: [],
      priority: 0,
      criteria: [`${id} works`],
      digest: id,
    }));
    const world = {
      landedRefs: new Map([
        ['add', sha(2)],
        ['subtract', sha(3)],
      ]),
      onTrunk: new Set([sha(1), sha(2), sha(3)]),
      trunk: 'main',
      // The source offered add at sha(2), and subtract at another sha than the ref here.
      travelled: (id: string, at: string) =>
        id === 'add' && at === sha(2) ? "origin's refs/tron/landed/" : id === 'subtract' && at === sha(4) ? 'origin' : undefined,
    };
    const plan = planRecovery([], blocks, world);
    expect(plan.recovered.find((r) => r.block === 'add')).toMatchObject({
      phase: 'landed',
      sha: sha(2),
      detail: "landed before this clone's runs: refs/tron/landed/add from origin's refs/tron/landed/",
    });
    expect(plan.untrusted).toEqual([{ block: 'subtract', sha: sha(3), reason: 'no run log records that tron landed it' }]);
    // subtract is not resumed at all: it is built as a block no run has touched.
    expect(plan.recovered.map((r) => r.block)).toEqual(['add']);
  });
});
