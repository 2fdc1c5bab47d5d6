/** PR mode through the merge queue, purely: queued is never landed; only trunk holding exactly the tested tree is. */
import { describe, expect, it } from 'vitest';
import type { EventBody } from '../events.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';

const HEAD = sha(10);
const QUEUED_COMMIT = sha(11);
type Observed = Extract<EventBody, { type: 'pr.observed' }>;

/** A driver in queue mode whose block `a` tron tested green: its first pr.requested is the last decision. */
function waitingForForge(): Driver {
  const d = new Driver();
  d.boot([{ id: 'a' }], {
    forge: { repo: 'acme/app', land: 'pr', merge: 'queue', require_human_approval: false, retries: 3, backoff_ms: 100 },
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
  return d;
}

/** The forge's answer to the last pr.requested: every check green, and the queue as given. */
function observed(d: Driver, queue?: Observed['queue']): EventBody[] {
  const asked = [...d.decisions].reverse().find((e) => e.type === 'pr.requested') as Extract<EventBody, { type: 'pr.requested' }>;
  return d.feed({
    type: 'pr.observed',
    stack: d.state.lane.stack!.id,
    sha: HEAD,
    attempt: asked.attempt,
    pulls: [{ block: 'a', number: 2, url: 'u', state: 'open' }],
    checks: [{ name: 'ci', state: 'success' }],
    changes: [],
    approved: [],
    ...(queue && { queue }),
  });
}

const lastAsk = (d: Driver) => [...d.decisions].reverse().find((e) => e.type === 'pr.requested');

describe('PR mode through the merge queue', () => {
  it('enqueues at the tested sha once every check is green there, instead of landing', () => {
    const d = waitingForForge();
    expect(lastAsk(d)).not.toHaveProperty('queue');
    const out = observed(d);
    expect(out.map((e) => e.type)).toEqual(['pr.requested']);
    expect(out[0]).toMatchObject({ sha: HEAD, attempt: 2, queue: 'enqueue' });
  });

  it('never lands while the pull request is only queued: it waits, then only watches the queue', () => {
    const d = waitingForForge();
    observed(d);
    const out = observed(d, { state: 'queued' });
    expect(out.map((e) => e.type)).toEqual(['pr.wait']);
    const wait = out[0] as Extract<EventBody, { type: 'pr.wait' }>;
    const again = d.feed({ type: 'pr.waited', stack: wait.stack, attempt: wait.attempt });
    expect(again).toEqual([expect.objectContaining({ type: 'pr.requested', queue: 'watch', attempt: 3 })]);
    expect(d.decisions.some((e) => e.type === 'land.intent')).toBe(false);
  });

  it("lands the queue's commit, recording only refs, once trunk holds exactly the tested tree", () => {
    const d = waitingForForge();
    observed(d);
    const out = observed(d, { state: 'merged', commit: QUEUED_COMMIT, tree: true });
    expect(out).toEqual([
      expect.objectContaining({
        type: 'land.intent',
        sha: QUEUED_COMMIT,
        from: sha(1),
        queued: true,
        blocks: [{ block: 'a', sha: QUEUED_COMMIT }],
      }),
    ]);
    const landed = d.feed({ type: 'block.landed', block: 'a', sha: QUEUED_COMMIT, from: sha(1), top: QUEUED_COMMIT });
    expect(landed.some((e) => e.type === 'lane.closed')).toBe(true);
    expect(d.state.trunkSha).toBe(QUEUED_COMMIT);
  });

  it('pages the operator and lands nothing when the queue moved trunk to another tree', () => {
    const d = waitingForForge();
    observed(d);
    const out = observed(d, { state: 'merged', commit: QUEUED_COMMIT, tree: false });
    expect(out.some((e) => e.type === 'land.intent')).toBe(false);
    expect(out).toContainEqual(
      expect.objectContaining({ type: 'escalation.raised', block: 'a', detail: expect.stringContaining('TRON_FORGE_QUEUE') }),
    );
    expect(d.state.blocks.get('a')!.phase).toBe('parked');
  });

  it('sends the block back to build with the reason when the queue takes the pull request out', () => {
    const d = waitingForForge();
    observed(d);
    observed(d, { state: 'queued' });
    const out = observed(d, { state: 'removed', reason: 'the required check ci failed on the merge group' });
    expect(out.find((e) => e.type === 'gate.failed')).toMatchObject({
      facts: [{ name: 'merge_queue', ok: false, evidence: expect.stringContaining('ci failed on the merge group') }],
    });
    expect(out.some((e) => e.type === 'block.dispatched' && e.kind === 'build')).toBe(true);
    expect(out.some((e) => e.type === 'land.intent')).toBe(false);
  });
});
