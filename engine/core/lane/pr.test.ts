/** PR mode's decisions, purely: what the forge reports decides whether a tested stack lands. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const HEAD = sha(10);
type CheckState = 'success' | 'failure' | 'pending' | 'missing';

/** A driver in PR mode whose block `a` was approved and tested green by tron: its pr.requested is the last decision. */
function waitingForForge(opts: { approval?: boolean; retries?: number } = {}): Driver {
  const d = new Driver();
  d.boot([{ id: 'a' }], {
    forge: { repo: 'acme/app', land: 'pr', require_human_approval: opts.approval ?? false, retries: opts.retries ?? 3, backoff_ms: 100 },
  });
  d.approve('a', HEAD);
  const stack = d.state.lane.stack!;
  const out = d.feed({
    type: 'rebase.done',
    stack: stack.id,
    trunk_sha: sha(1),
    results: [{ block: 'a', outcome: 'fast_forward', onto: sha(1), sha: HEAD, patch_before: 'p', patch_after: 'p' }],
  });
  if (out.some((e) => e.type === 'candidate.requested'))
    d.feed({ type: 'candidate.tested', stack: stack.id, sha: HEAD, blocks: ['a'], ok: true, tests: GREEN });
  expect(d.decisions.at(-1)).toMatchObject({ type: 'pr.requested', sha: HEAD, attempt: 1 });
  return d;
}

function observed(d: Driver, checks: CheckState[], extra: Partial<Extract<EventBody, { type: 'pr.observed' }>> = {}): EventBody[] {
  const stack = d.state.lane.stack!;
  const attempt = [...d.decisions].reverse().find((e) => e.type === 'pr.requested') as { attempt: number };
  return d.feed({
    type: 'pr.observed',
    stack: stack.id,
    sha: HEAD,
    attempt: attempt.attempt,
    pulls: [{ block: 'a', number: 2, url: 'u', state: 'open' }],
    checks: checks.map((state, i) => ({ name: `c${i}`, state, ...(state === 'failure' && { text: `c${i} said no` }) })),
    changes: [],
    approved: [],
    ...extra,
  });
}

describe('PR mode decisions', () => {
  it('asks the forge instead of landing when tron found the stack green', () => {
    expect(waitingForForge().state.lane.stack!.step).toMatchObject({ at: 'forge', running: true });
  });

  it('lands only on every required check green; never on a red, pending or missing one (any mix)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom<CheckState>('success', 'failure', 'pending', 'missing'), { maxLength: 4 }), (checks) => {
        const d = waitingForForge();
        const out = observed(d, checks);
        const lands = out.some((e) => e.type === 'land.intent');
        expect(lands).toBe(checks.every((c) => c === 'success'));
        if (checks.includes('failure')) expect(out.some((e) => e.type === 'gate.failed')).toBe(true);
        else if (!lands) expect(out.map((e) => e.type)).toEqual(['pr.wait']);
      }),
    );
  });

  it("sends a red check's words back to the builder as a failed fact, and builds again", () => {
    const out = observed(waitingForForge(), ['success', 'failure']);
    const failed = out.find((e) => e.type === 'gate.failed') as Extract<EventBody, { type: 'gate.failed' }>;
    expect(failed.facts[0]).toMatchObject({ name: 'hosted_checks', ok: false, evidence: expect.stringContaining('c1 said no') });
    expect(out.some((e) => e.type === 'block.dispatched' && e.kind === 'build')).toBe(true);
  });

  it('turns changes a person requested into a build with their notes', () => {
    const out = observed(waitingForForge(), ['success'], { changes: [{ block: 'a', author: 'ada', notes: 'rename it' }] });
    expect(out.find((e) => e.type === 'gate.failed')).toMatchObject({
      facts: [{ name: 'changes_requested', evidence: expect.stringContaining('ada requested changes on the pull request: rename it') }],
    });
    expect(out.some((e) => e.type === 'land.intent')).toBe(false);
  });

  it('abandons a block whose pull request a person closed, with their words', () => {
    const out = observed(waitingForForge(), ['success'], {
      pulls: [{ block: 'a', number: 2, url: 'u', state: 'closed', words: 'maintainer: not needed' }],
    });
    expect(out.find((e) => e.type === 'block.abandoned')).toMatchObject({ block: 'a', reason: expect.stringContaining('not needed') });
    expect(out.some((e) => e.type === 'land.intent')).toBe(false);
  });

  it('with require_human_approval, waits for an approving review before it lands', () => {
    const d = waitingForForge({ approval: true });
    expect(observed(d, ['success']).map((e) => e.type)).toEqual(['pr.wait']);
    d.feed({ type: 'pr.waited', stack: d.state.lane.stack!.id, attempt: 1 });
    expect(observed(d, ['success'], { approved: ['a'] }).some((e) => e.type === 'land.intent')).toBe(true);
  });

  it('waits as long as a rate limit asks, backs off on a 5xx, and pages on a refused token — as timer events', () => {
    const d = waitingForForge({ retries: 1 });
    const id = d.state.lane.stack!.id;
    expect(d.feed({ type: 'pr.failed', stack: id, attempt: 1, kind: 'rate_limited', wait_ms: 42_000, message: '403' })).toEqual([
      { type: 'pr.wait', stack: id, attempt: 1, wait_ms: 42_000, reason: 'rate limited: 403' },
    ]);
    expect(d.feed({ type: 'pr.waited', stack: id, attempt: 1 })).toMatchObject([{ type: 'pr.requested', attempt: 2 }]);
    expect(d.feed({ type: 'pr.failed', stack: id, attempt: 2, kind: 'transient', message: '502' })).toMatchObject([
      { type: 'pr.wait', wait_ms: 100 },
    ]);
    d.feed({ type: 'pr.waited', stack: id, attempt: 2 });
    const out = d.feed({ type: 'pr.failed', stack: id, attempt: 3, kind: 'auth', message: '401: Bad credentials' });
    expect(out.map((e) => e.type)).toEqual(['escalation.raised', 'block.parked', 'lane.closed']);
  });

  it('pages the operator when a required check never reports, once [forge] retries asks after the first found it missing', () => {
    const d = waitingForForge({ retries: 2 });
    for (let i = 1; i <= 2; i++) {
      expect(observed(d, ['missing']).map((e) => e.type)).toEqual(['pr.wait']);
      d.feed({ type: 'pr.waited', stack: d.state.lane.stack!.id, attempt: i });
    }
    expect(observed(d, ['missing']).map((e) => e.type)).toEqual(['escalation.raised', 'block.parked', 'lane.closed']);
  });
});
