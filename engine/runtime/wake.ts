/**
 * WAKE: the loop's queue of inputs. The loop sleeps on `next()` until an input arrives —
 * a worker reply, a finished test run, a timer, an answer — never on an interval. A
 * failure of something the loop started (an effect, a watcher, a flush) wakes it too, and
 * comes out as the input `run.failed`, so that decide ends the run and the run replays.
 */
import type { EventBody } from '../core/events.ts';
import { RunDirGoneError } from '../log/eventlog.ts';
import { codedLine } from './failure.ts';

export class Wake {
  private readonly queue: EventBody[] = [];
  private wake: (() => void) | undefined;
  private failure: Error | undefined;
  /** What failed, for run.failed's `after`. */
  failedAfter: string | undefined;
  private failed = false;

  /** Whether something the loop started failed (the run ended, or ends, with run.failed). */
  get failing(): boolean {
    return this.failed;
  }

  /** An input for the loop: it wakes at once. */
  push(body: EventBody): void {
    this.queue.push(body);
    this.wake?.();
  }

  /** Something the loop started failed: the loop wakes and reports it as run.failed. */
  fail(err: Error, after?: string): void {
    this.failure = err;
    if (after !== undefined) this.failedAfter = after;
    this.wake?.();
  }

  /** Runs a callback of a timer or watcher: a failure in it ends the run like an effect's. */
  guard(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.fail(err as Error);
    }
  }

  /** The next input, once there is one. */
  next(): Promise<EventBody> {
    const ready = this.queue.shift();
    if (ready) return Promise.resolve(ready);
    if (this.failure) return Promise.resolve(this.fatal(this.failure));
    return new Promise((resolve, reject) => {
      this.wake = () => {
        this.wake = undefined;
        try {
          resolve(this.queue.shift() ?? this.fatal(this.failure!));
        } catch (err) {
          reject(err);
        }
      };
    });
  }

  /** A failure, as the input that ends the run; a log that cannot be written is no input: the loop stops on it. */
  private fatal(err: Error): EventBody {
    this.failure = undefined;
    this.failed = true;
    if (err instanceof RunDirGoneError) throw err;
    const after = this.failedAfter ?? 'an effect';
    return { type: 'run.failed', detail: codedLine(err, `the effect of ${after}`), after };
  }
}
