import { describe, expect, it } from 'vitest';
import { ManualClock, sleep, systemClock } from './clock.ts';

describe('a manual clock', () => {
  it('calls what runs every period at each period it passes, in time order with its waits, until cancelled', () => {
    const clock = new ManualClock(0);
    const seen: string[] = [];
    const stop = clock.every(100, () => seen.push(`every ${clock.now()}`));
    clock.after(250, () => seen.push(`after ${clock.now()}`));
    clock.advance(99);
    expect(seen).toEqual([]);
    clock.advance(201);
    expect(seen).toEqual(['every 100', 'every 200', 'after 250', 'every 300']);
    stop();
    clock.advance(1_000);
    expect(seen).toHaveLength(4);
    expect(clock.pending).toBe(0);
  });

  it('ends a sleep when its time passes, or at once when its signal aborts, leaving no wait behind', async () => {
    const clock = new ManualClock(0);
    let slept = false;
    void sleep(clock, 1_000).then(() => (slept = true));
    await clock.pass(999);
    expect(slept).toBe(false);
    await clock.pass(1);
    expect(slept).toBe(true);
    const stop = new AbortController();
    const stopped = sleep(clock, 60_000, { signal: stop.signal });
    stop.abort();
    await stopped;
    expect(clock.pending).toBe(0);
    await sleep(clock, 60_000, { signal: stop.signal });
    expect(clock.pending).toBe(0);
  });
});

describe('the system clock', () => {
  it('runs what runs every period until cancelled', async () => {
    let n = 0;
    const stop = systemClock.every(5, () => (n += 1), { keepAlive: true });
    await sleep(systemClock, 40, { keepAlive: true });
    stop();
    const seen = n;
    expect(seen).toBeGreaterThan(0);
    await sleep(systemClock, 20);
    expect(n).toBe(seen);
  });
});
