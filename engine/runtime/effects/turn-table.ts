/**
 * The turns running now, by `session#turn`: each with its block, an abort controller,
 * its start time and its overrun timer, plus signs of life from workers without a
 * process (model steps, sim progress). The turn effect registers a turn here; the
 * decisions that stop turns (a parked block, a spent budget, a re-issued turn) and the
 * liveness effects act through it. The engine owns one per run.
 */
import type { Clock } from '../../os/clock.ts';
import type { EventBody } from '../../core/events.ts';

interface Running {
  block: string;
  controller: AbortController;
  startedAt: number;
  /** Cancels its overrun timer. */
  disarm?: () => void;
}

export class TurnTable {
  private readonly running = new Map<string, Running>();
  private readonly progress = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();
  /** Every turn stops, those still being prepared too (the run is stopping). */
  private stoppedAll = false;
  /** A block's turns decided before this seq stop, those still being prepared too (the block parked or was abandoned). */
  private readonly stoppedBefore = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    /** Where an overrun timer's input goes (the engine's queue). */
    private readonly input: (body: EventBody) => void,
  ) {}

  get size(): number {
    return this.running.size;
  }

  /**
   * Registers a running turn; its abort signal stops the worker. `decided` is the seq of
   * the decision that asked for it: a stop that came while the turn's folder was being
   * made (after the decision, before this) leaves its signal aborted from the start.
   */
  start(block: string, session: string, turn: number, decided = 0): AbortSignal {
    const controller = new AbortController();
    this.running.set(key(session, turn), { block, controller, startedAt: this.clock.now() });
    if (this.stoppedAll || decided < (this.stoppedBefore.get(block) ?? 0)) controller.abort();
    return controller.signal;
  }

  /** The turn (re)starts now: a turn queued for an agent, once an attempt runs it; its elapsed time counts from here. */
  restart(session: string, turn: number): void {
    const t = this.running.get(key(session, turn));
    if (t) t.startedAt = this.clock.now();
  }

  /** The turn ended: its timer goes with it. */
  end(session: string, turn: number): void {
    this.running.get(key(session, turn))?.disarm?.();
    this.running.delete(key(session, turn));
    for (const wake of this.waiting.get(key(session, turn)) ?? []) wake();
    this.waiting.delete(key(session, turn));
  }

  /** Resolves true once the turn has ended (at once if it is not running), false if it still runs after `ms`. */
  ended(session: string, turn: number, ms: number): Promise<boolean> {
    if (!this.isRunning(session, turn)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const cancel = this.clock.after(ms, () => resolve(false));
      const wakes = this.waiting.get(key(session, turn)) ?? [];
      wakes.push(() => {
        cancel();
        resolve(true);
      });
      this.waiting.set(key(session, turn), wakes);
    });
  }

  isRunning(session: string, turn: number): boolean {
    return this.running.has(key(session, turn));
  }

  /** After `ms`, a still-running turn reports itself overrun (an input; decide takes it from there). */
  arm(session: string, turn: number, ms: number): void {
    const t = this.running.get(key(session, turn));
    if (!t) return;
    t.disarm?.();
    t.disarm = this.clock.after(ms, () => {
      if (!this.running.has(key(session, turn))) return;
      this.input({ type: 'timer.fired', block: t.block, session, turn, timer: 'overrun', elapsed_ms: this.clock.now() - t.startedAt });
    });
  }

  /** Aborts every running turn `which` picks. */
  stop(which: (t: { block: string; session: string; turn: number }) => boolean): void {
    for (const [k, t] of this.running) {
      const [session, turn] = splitKey(k);
      if (!which({ block: t.block, session, turn })) continue;
      t.disarm?.();
      t.controller.abort();
    }
  }

  /** The run is stopping: every turn stops, and any turn registered from now on starts stopped. */
  stopAll(): void {
    this.stoppedAll = true;
    this.stop(() => true);
  }

  /** A block parked or was abandoned at `seq`: its turns stop, and its turns decided before `seq` start stopped. */
  stopBlock(block: string, seq: number): void {
    this.stoppedBefore.set(block, seq);
    this.stop((t) => t.block === block);
  }

  /** A sign of life from a worker without a process (a model step, sim progress). */
  tick(session: string): void {
    this.progress.set(session, (this.progress.get(session) ?? 0) + 1);
  }

  ticks(session: string): number {
    return this.progress.get(session) ?? 0;
  }
}

const key = (session: string, turn: number) => `${session}#${turn}`;

function splitKey(k: string): [string, number] {
  const at = k.lastIndexOf('#');
  return [k.slice(0, at), Number(k.slice(at + 1))];
}
