/**
 * Time enters the engine only through a Clock, so the decision path never reads
 * `Date.now()` itself and tests and replay control it.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to: for tests. */
export class ManualClock implements Clock {
  constructor(private ms = Date.UTC(2026, 0, 1)) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A clock that the engine pins to an input's time while it appends that input's decisions. */
export class PinnedClock implements Clock {
  pinned: number | undefined;
  constructor(private readonly base: Clock) {}
  now(): number {
    return this.pinned ?? this.base.now();
  }
}
