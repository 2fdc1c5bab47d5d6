import { describe, expect, it } from 'vitest';
import { systemClock } from '../../os/clock.ts';
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
});
