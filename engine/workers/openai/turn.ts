/**
 * The time budget of one openai turn: one signal that fires when the turn's timeout
 * passes or the engine aborts it, shared by model calls, retry waits and tool commands,
 * so a turn ends promptly whatever it is doing at that instant.
 */
import { type Clock, systemClock } from '../../os/clock.ts';
import { formatDuration } from '../../core/duration.ts';
import type { TurnOutcome } from '../adapter.ts';

export class TurnBudget {
  private readonly controller = new AbortController();
  /** Cancels the budget's timer. */
  private readonly disarm: () => void;
  private reason: 'timeout' | 'aborted' | undefined;
  private readonly onAbort = () => this.end('aborted');

  constructor(
    private readonly timeoutMs: number,
    private readonly engineSignal: AbortSignal,
    private readonly sleeper: (ms: number) => Promise<void>,
    clock: Clock = systemClock,
  ) {
    // Ref'd: the turn's budget ends it even if nothing else waits.
    this.disarm = clock.after(timeoutMs, () => this.end('timeout'), { keepAlive: true });
    engineSignal.addEventListener('abort', this.onAbort, { once: true });
    if (engineSignal.aborted) this.end('aborted');
  }

  /** Fires when the turn is over, for whatever reason. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get ended(): boolean {
    return this.reason !== undefined;
  }

  /** The outcome of a turn ended by its budget or by the engine. */
  outcome(): TurnOutcome {
    if (this.reason === 'timeout') {
      return { ok: false, failure: 'timeout', detail: `the turn ran past its budget of ${formatDuration(this.timeoutMs)}` };
    }
    return { ok: false, failure: 'aborted', detail: 'the engine stopped the turn' };
  }

  /** Waits `ms`, or less if the turn ends first. */
  sleep(ms: number): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.signal.removeEventListener('abort', done);
        resolve();
      };
      this.signal.addEventListener('abort', done, { once: true });
      this.sleeper(ms).then(done, done);
    });
  }

  dispose(): void {
    this.disarm();
    this.engineSignal.removeEventListener('abort', this.onAbort);
  }

  private end(reason: 'timeout' | 'aborted'): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller.abort();
  }
}
