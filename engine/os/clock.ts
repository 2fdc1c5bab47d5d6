/**
 * Time enters the engine only through a Clock, so the decision path never reads
 * `Date.now()` itself and tests and replay control it: the time now, and every wait the
 * runtime keeps (an overrun timer, a push's backoff, a forge's wait, a probe's pause, a
 * lease's renewal, a heartbeat, a poll, a debounce, a timeout) — which a test's ManualClock
 * passes by advancing, instead of sleeping through them. No file under engine/ outside this
 * one, engine/testing/ and the tests sets a timer itself unless engine/os/timers.test.ts
 * lists it, with why it is not a wait of tron's.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /**
   * Calls `fn` once `ms` have passed on this clock; the function returned cancels it. On the
   * system clock such a wait never keeps the process alive by itself, unless `keepAlive`.
   */
  after(ms: number, fn: () => void, o?: Hold): () => void;
  /**
   * Calls `fn` every `ms` on this clock, the first time `ms` from now, until the function
   * returned is called. On the system clock it never keeps the process alive by itself,
   * unless `keepAlive`.
   */
  every(ms: number, fn: () => void, o?: Hold): () => void;
}

export interface Hold {
  /**
   * The process stays alive for this wait (a system clock's timer is ref'd): a wait the
   * process itself awaits with nothing else pending, as a sleep in a loop is.
   */
  keepAlive?: boolean;
}

const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  after: (ms, fn, o) => {
    // Timers hold at most 2^31-1 ms; a longer wait would end at once.
    const timer = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
    if (!o?.keepAlive) timer.unref();
    return () => clearTimeout(timer);
  },
  every: (ms, fn, o) => {
    const timer = setInterval(fn, Math.min(ms, MAX_TIMER_MS));
    if (!o?.keepAlive) timer.unref();
    return () => clearInterval(timer);
  },
};

/**
 * Resolves once `ms` have passed on `clock`, or at once when `signal` aborts (it was, or it
 * does during the wait). `keepAlive` as for `Clock.after`.
 */
export function sleep(clock: Clock, ms: number, o: Hold & { signal?: AbortSignal } = {}): Promise<void> {
  return new Promise((done) => {
    if (o.signal?.aborted) return done();
    const end = () => {
      cancel();
      o.signal?.removeEventListener('abort', end);
      done();
    };
    const cancel = clock.after(ms, end, o.keepAlive ? { keepAlive: true } : undefined);
    o.signal?.addEventListener('abort', end);
  });
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
  every(ms: number, fn: () => void): () => void {
    let cancel = () => {};
    const tick = () => {
      cancel = this.after(Math.max(1, ms), tick);
      fn();
    };
    cancel = this.after(Math.max(1, ms), tick);
    return () => cancel();
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
  /**
   * Moves time on by `ms` in steps of `stepMs`, letting what each wait's end started (a query,
   * a promise's chain) run before the next step: for the waits whose work is asynchronous.
   */
  async pass(ms: number, stepMs = ms): Promise<void> {
    for (let left = ms; left > 0; left -= stepMs) {
      this.advance(Math.min(stepMs, left));
      await new Promise<void>((r) => setImmediate(r));
    }
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
  after(ms: number, fn: () => void, o?: Hold): () => void {
    return this.base.after(ms, fn, o);
  }
  every(ms: number, fn: () => void, o?: Hold): () => void {
    return this.base.every(ms, fn, o);
  }
}
