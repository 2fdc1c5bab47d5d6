import { describe, expect, it } from 'vitest';
import type { EventBody } from '../../core/events.ts';
import { ManualClock, systemClock } from '../../os/clock.ts';
import type { EffectContext } from './context.ts';
import { waitRetry } from './remote.ts';
import { TurnTable } from './turn-table.ts';

const table = () => new TurnTable(systemClock, () => {});

describe('the turn table', () => {
  it('stops every running turn when the run stops, and starts stopped a turn whose folder was still being made', () => {
    const turns = table();
    const running = turns.start('a', 'a.1.builder', 1, 5);
    turns.stopAll();
    expect(running.aborted).toBe(true);
    // Decided before the stop; registered after it (its worktree took a while): it never runs.
    expect(turns.start('b', 'b.1.builder', 1, 6).aborted).toBe(true);
  });

  it("stops a parked block's turns, those decided before the park and registered after it too, and not its later turns", () => {
    const turns = table();
    const before = turns.start('a', 'a.1.builder', 1, 5);
    const other = turns.start('b', 'b.1.builder', 1, 6);
    turns.stopBlock('a', 10);
    expect(before.aborted).toBe(true);
    expect(other.aborted).toBe(false);
    expect(turns.start('a', 'a.1.reviewer', 1, 9).aborted).toBe(true);
    // The block answered and dispatched again after the park: that turn runs.
    expect(turns.start('a', 'a.2.builder', 1, 12).aborted).toBe(false);
    expect(turns.start('b', 'b.1.reviewer', 1, 9).aborted).toBe(false);
  });

  it('reports a turn overrun once its clock passes the time given, not before, and never for a turn that ended', () => {
    const clock = new ManualClock(0);
    const inputs: EventBody[] = [];
    const turns = new TurnTable(clock, (body) => inputs.push(body));
    turns.start('a', 'a.1.builder', 1);
    turns.start('b', 'b.1.builder', 1);
    turns.arm('a.1.builder', 1, 60_000);
    turns.arm('b.1.builder', 1, 60_000);
    clock.advance(59_999);
    expect(inputs).toEqual([]);
    turns.end('b.1.builder', 1);
    clock.advance(1);
    expect(inputs).toEqual([{ type: 'timer.fired', block: 'a', session: 'a.1.builder', turn: 1, timer: 'overrun', elapsed_ms: 60_000 }]);
    expect(clock.pending).toBe(0);
  });

  it("tells a wait for a turn's end that it still runs once the clock passes the bound, and at once that it ended", async () => {
    const clock = new ManualClock(0);
    const turns = new TurnTable(clock, () => {});
    turns.start('a', 'a.1.builder', 1);
    turns.start('b', 'b.1.builder', 1);
    const a = turns.ended('a.1.builder', 1, 5_000);
    const b = turns.ended('b.1.builder', 1, 5_000);
    turns.end('b.1.builder', 1);
    clock.advance(5_000);
    expect([await a, await b]).toEqual([false, true]);
  });
});

describe("a push's wait before its next try", () => {
  it('ends when the clock has passed the wait the decision gave, with no sleep', async () => {
    const clock = new ManualClock(0);
    const c = { clock } as unknown as EffectContext;
    let waited: unknown;
    void Promise.resolve(waitRetry.run(c, { type: 'remote.retry', stack: 2, attempt: 2, wait_ms: 200 } as never)).then((r) => {
      waited = r;
    });
    clock.advance(199);
    await Promise.resolve();
    expect(waited).toBeUndefined();
    clock.advance(1);
    await new Promise((r) => setImmediate(r));
    expect(waited).toEqual({ type: 'remote.waited', stack: 2, attempt: 2 });
  });
});
