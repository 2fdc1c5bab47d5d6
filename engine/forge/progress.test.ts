import { describe, expect, it, vi } from 'vitest';
import type { EventBody } from '../core/events.ts';
import { ManualClock } from '../os/clock.ts';
import { ForgeError, type IssueTracker } from './forge.ts';
import { ForgeProgress } from './progress.ts';

describe('telling an issue how its block goes', () => {
  it("waits out a transient failure for the backoff on the engine's clock, doubling it, then tells the issue once", async () => {
    const clock = new ManualClock(0);
    const tries: number[] = [];
    const tracker = {
      self: async () => 'tron',
      comments: async () => [],
      comment: async () => {
        tries.push(clock.now());
        if (tries.length < 3) throw new ForgeError('transient', 'the forge answered 502');
        return { id: 41, url: 'https://forge.example/issues/7#41', author: 'tron', body: '' };
      },
    } as unknown as IssueTracker;
    const recorded: EventBody[] = [];
    const progress = new ForgeProgress({
      forge: tracker,
      issues: { alpha: { number: 7, url: 'https://forge.example/issues/7' } },
      trunk: 'main',
      repoArg: '.',
      retries: 3,
      backoffMs: 1_000,
      record: (body) => recorded.push(body) > 0,
      clock,
    });
    progress.event({ type: 'block.dispatched', block: 'alpha', kind: 'build', attempt: 1, turn: 1 } as never);
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    await clock.pass(999);
    expect(tries).toEqual([0]);
    await clock.pass(1);
    // The second wait is twice the first.
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    expect(tries).toEqual([0, 1_000]);
    await clock.pass(1_999);
    expect(tries).toHaveLength(2);
    await clock.pass(1);
    await progress.close();
    expect(tries).toEqual([0, 1_000, 3_000]);
    expect(recorded).toEqual([
      {
        type: 'forge.commented',
        block: 'alpha',
        issue: 7,
        about: 'started',
        comment: 41,
        posted: true,
        issue_url: 'https://forge.example/issues/7',
      },
    ]);
  });
});
