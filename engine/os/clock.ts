/**
 * Time enters the engine only through a Clock, so the decision path never reads
 * `Date.now()` itself and tests and replay control it: the time now, and the waits the
 * effects keep (an overrun timer, a push's backoff, a forge's wait, a probe's pause) —
 * which a test's ManualClock passes by advancing, instead of sleeping through them.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Calls `fn` once `ms` have passed on this clock; the function returned cancels it. On the
   * system clock such a wait never keeps the process alive by itself.
   */
  after(ms: number, fn: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** Resolves once `ms` have passed on `clock`. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((done) => clock.after(ms, done));
}

/** A clock that only moves when told to: for tests. Its waits end as `advance` passes them, in time order. */
export class ManualClock implements Clock {
  private readonly due: { at: number; n: number; fn: () => void }[] = [];
  private n = 0;
  constructor(private ms = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.ms;
  }
  after(ms: number, fn: () => void): () => void {
    const wait = { at: this.ms + Math.max(0, ms), n: this.n++, fn };
    this.due.push(wait);
    return () => {
      const i = this.due.indexOf(wait);
      if (i >= 0) this.due.splice(i, 1);
    };
  }
  /** Moves time on by `ms`, ending every wait due by then, each at its own time. */
  advance(ms: number): void {
    const to = this.ms + ms;
    for (;;) {
      const next = this.due.filter((w) => w.at <= to).sort((a, b) => a.at - b.at || a.n - b.n)[0];
      if (!next) break;
      this.due.splice(this.due.indexOf(next), 1);
      this.ms = next.at;
      next.fn();
    }
    this.ms = to;
  }
  /** Waits not yet ended. */
  get pending(): number {
    return this.due.length;
  }
}

/** A clock that the engine pins to an input's time while it appends that input's decisions. */
export class PinnedClock implements Clock {
  pinned: number | undefined;
  constructor(private readonly base: Clock) {}
  now(): number {
    return this.pinned ?? this.base.now();
  }
  after(ms: number, fn: () => void): () => void {
    return this.base.after(ms, fn);
  }
}
