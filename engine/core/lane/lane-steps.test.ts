/**
 * The merge lane's table: for each step a stack can be at when an input arrives, what each
 * input of the lane decides. An input of another step (a stale test run, a forge's answer
 * while landing) decides nothing. `judging` never waits for an input of its own: it is
 * decided at once, or waits on a verdict (lane-speculate.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import type { StackStep } from '../state.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const X = sha(2);
/** The commit block number `i` (1-based) has in the stack. */
const R = (i: number) => sha(100 + i);
const FORGE = { repo: 'acme/app', land: 'pr' as const, require_human_approval: false, retries: 3, backoff_ms: 100 };

/** A driver whose lane holds a and b as stack 2 on trunk X, rebasing (x was stacked alone first, and landed). */
function rebasing(): Driver {
  const d = new Driver();
  d.boot([{ id: 'x' }, { id: 'a' }, { id: 'b' }], { maxParallel: 3 });
  d.approve('x', X);
  d.approve('a', sha(10));
  d.approve('b', sha(11));
  d.landStack({ x: X });
  return d;
}

/** a and b rebased cleanly onto X: their top R(2) is being tested. */
function testing(): Driver {
  const d = rebasing();
  d.feed({
    type: 'rebase.done',
    stack: 2,
    trunk_sha: X,
    results: [
      { block: 'a', outcome: 'fast_forward', onto: X, sha: R(1), patch_before: 'p', patch_after: 'p' },
      { block: 'b', outcome: 'clean', onto: R(1), sha: R(2), patch_before: 'p', patch_after: 'p' },
    ],
  });
  return d;
}

/** The top tested green: the stack lands at R(2). */
function landing(): Driver {
  const d = testing();
  d.feed({ type: 'candidate.tested', stack: 2, sha: R(2), blocks: ['a', 'b'], ok: true, tests: GREEN });
  return d;
}

/** PR mode: a lone block a, on trunk as it is and green at its gate, waits for the forge's checks on its head (stack 1). */
function forge(): Driver {
  const d = new Driver();
  d.boot([{ id: 'a' }], { forge: FORGE });
  d.approve('a', R(1));
  d.feed({
    type: 'rebase.done',
    stack: 1,
    trunk_sha: sha(1),
    results: [{ block: 'a', outcome: 'fast_forward', onto: sha(1), sha: R(1), patch_before: 'p', patch_after: 'p' }],
  });
  return d;
}

const STEPS: Record<Exclude<StackStep['at'], 'judging'>, () => Driver> = { rebasing, testing, landing, forge };

/** Every input of the lane, for the stack in flight, at the sha its step names. */
function inputs(d: Driver): Record<string, EventBody> {
  const stack = d.state.lane.stack!;
  const id = stack.id;
  const top = stack.step.at === 'forge' ? stack.step.pr.sha : stack.step.at === 'testing' ? stack.step.sha : R(id === 1 ? 1 : 2);
  const blocks = id === 1 ? ['a'] : ['a', 'b'];
  const trunk = d.state.trunkSha!;
  return {
    'rebase.done': {
      type: 'rebase.done',
      stack: id,
      trunk_sha: trunk,
      results: blocks.map((block, i) => ({
        block,
        outcome: i === 0 ? ('fast_forward' as const) : ('clean' as const),
        onto: i === 0 ? trunk : R(i),
        sha: R(i + 1),
        patch_before: 'p',
        patch_after: 'p',
      })),
    },
    'candidate.tested': { type: 'candidate.tested', stack: id, sha: top, blocks, ok: true, tests: GREEN },
    'block.landed': { type: 'block.landed', block: 'a', sha: R(1), from: trunk, top: R(1) },
    'land.refused': { type: 'land.refused', stack: id, blocks, actual: sha(9), detail: 'trunk moved' },
    'remote.moved': { type: 'remote.moved', stack: id, blocks, from: trunk, sha: sha(9), detail: 'someone pushed' },
    'remote.failed': {
      type: 'remote.failed',
      stack: id,
      op: 'push',
      kind: 'transient',
      reason: 'timeout',
      code: 'TRON_REMOTE_TIMEOUT',
      message: 'no answer',
      attempt: 1,
    },
    'remote.waited': { type: 'remote.waited', stack: id, attempt: 1 },
    'pr.observed': {
      type: 'pr.observed',
      stack: id,
      sha: top,
      attempt: 1,
      pulls: [{ block: 'a', number: 2, url: 'u', state: 'open' }],
      checks: [{ name: 'ci', state: 'success' }],
      changes: [],
      approved: [],
    },
    'pr.failed': { type: 'pr.failed', stack: id, attempt: 1, kind: 'transient', message: '502' },
    'pr.waited': { type: 'pr.waited', stack: id, attempt: 1 },
  };
}

/** What each input decides at each step: `—` nothing. A landed block moves on (wrap) wherever the lane is: it is on trunk. */
const TABLE: Record<keyof typeof STEPS, Record<string, string>> = {
  rebasing: {
    'rebase.done': 'candidate.requested',
    'candidate.tested': '—',
    'block.landed': 'block.phase wrap.requested',
    // With a remote, the stack is refused before its rebase when a worker pushed to the remote's trunk.
    'land.refused': 'escalation.raised block.parked lane.closed',
    'remote.moved': '—',
    'remote.failed': '—',
    'remote.waited': '—',
    'pr.observed': '—',
    'pr.failed': '—',
    'pr.waited': '—',
  },
  testing: {
    'rebase.done': '—',
    'candidate.tested': 'land.intent',
    'block.landed': 'block.phase wrap.requested',
    'land.refused': '—',
    'remote.moved': '—',
    'remote.failed': '—',
    'remote.waited': '—',
    'pr.observed': '—',
    'pr.failed': '—',
    'pr.waited': '—',
  },
  landing: {
    'rebase.done': '—',
    'candidate.tested': '—',
    'block.landed': 'block.phase wrap.requested',
    'land.refused': 'escalation.raised block.parked lane.closed',
    'remote.moved': 'lane.closed lane.stacked',
    'remote.failed': 'escalation.raised block.parked lane.closed',
    'remote.waited': 'land.intent',
    'pr.observed': '—',
    'pr.failed': '—',
    'pr.waited': '—',
  },
  forge: {
    'rebase.done': '—',
    'candidate.tested': '—',
    'block.landed': 'block.phase wrap.requested',
    'land.refused': '—',
    'remote.moved': '—',
    'remote.failed': '—',
    'remote.waited': '—',
    'pr.observed': 'land.intent',
    'pr.failed': 'pr.wait',
    'pr.waited': 'pr.requested',
  },
};

describe('the merge lane, step by step', () => {
  for (const [name, at] of Object.entries(STEPS) as [keyof typeof STEPS, () => Driver][]) {
    it(`takes at ${name} only the inputs of that step, and decides what the table says`, () => {
      const decided: Record<string, string> = {};
      for (const [input, body] of Object.entries(inputs(at()))) {
        const d = at();
        expect(d.state.lane.stack!.step.at).toBe(name);
        decided[input] =
          d
            .feed(body)
            .map((e) => e.type)
            .join(' ') || '—';
      }
      expect(decided).toEqual(TABLE[name]);
    });
  }

  it('closes the stack when the last block of its landing is on trunk, and not before', () => {
    const d = landing();
    const inputsOf = inputs(d);
    expect(d.feed(inputsOf['block.landed']!).map((e) => e.type)).toEqual(['block.phase', 'wrap.requested']);
    const last = d.feed({ type: 'block.landed', block: 'b', sha: R(2), from: R(1), top: R(2) });
    expect(last.map((e) => e.type)).toEqual(['block.phase', 'wrap.requested', 'lane.closed']);
    expect(last.at(-1)).toMatchObject({ landed: ['a', 'b'], returned: [] });
  });
});
