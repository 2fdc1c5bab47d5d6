/**
 * A `tron agent`'s side of the channel to the engine (engine/queue/pg-job-control.ts): the
 * engine's asks of the turns this agent holds — stop, probe — read when NOTIFY wakes it
 * and at every heartbeat should a notification be lost; and the notes of its turns — the
 * turn started, a worker process spawned or exited — sent as the attempt that holds the job.
 *
 * Each held turn has its own turn table (`HeldTurn.turns`): a stop aborts every turn it
 * holds, now or when one registers later (a stop that came while the agent was still
 * fetching), so the adapter kills the worker's process tree as it does for the engine.
 */
import type { Clock } from '../os/clock.ts';
import type { EventBody } from '../core/events.ts';
import { type Ask, answerAsk, asksFor, type JobNote, lostAttempts, noteJob, serialized } from './pg-job-control.ts';
import { ASKS_CHANNEL } from './pg-job-control.ts';
import { type Caller, connect, isStaleAttempt } from './pg-jobs.ts';
import type { JobKey } from './pg-job-types.ts';
import type { ProbeRequest } from '../runtime/effects/liveness.ts';
import { TurnTable } from '../runtime/effects/turn-table.ts';
import type pg from 'pg';
import { OneLook } from '../os/one-look.ts';

/** A turn table whose turns a stop aborts (including one registered after it: TurnTable.stopAll), and says why. */
export class StoppableTurns extends TurnTable {
  stopped: string | undefined;

  stopWith(reason: string): void {
    this.stopped ??= reason;
    this.stopAll();
  }
}

/** A job this agent holds, as the control sees it. */
export interface HeldTurn {
  readonly turns: StoppableTurns;
  /** Why the engine stopped it, once it did. */
  readonly stopped: string | undefined;
  /** What a probe ask runs (the shared probe effect, against the turn's own context). */
  probeWith(run: (r: ProbeRequest) => Promise<EventBody>): void;
  /** A note of the turn, sent in order as its attempt. */
  note(note: JobNote): void;
  /** Resolves once every note sent so far is recorded (before the result: the engine reads them first). */
  flushed(): Promise<void>;
  /** The job is over here: its asks are no longer this agent's. */
  release(): void;
}

export class AgentControl {
  private readonly held = new Map<
    string,
    { key: JobKey; attempt: number; turns: StoppableTurns; probe?: (r: ProbeRequest) => Promise<EventBody> }
  >();
  /** Asks already taken (their answers may still be on their way). */
  private readonly taken = new Set<number>();
  /** The look for the held jobs' asks: one at a time, another after it if asked meanwhile. */
  private readonly asks = new OneLook(
    () => this.readAsks(),
    () => this.closed,
  );
  /** Stops the periodic look for asks. */
  private stopLooking: (() => void) | undefined;
  private closed = false;
  /** The connection's queries, one at a time. */
  private readonly db: pg.ClientBase;

  private constructor(
    private readonly client: pg.Client,
    private readonly worker: string,
    private readonly clock: Clock,
    private readonly print: (line: string) => void,
    private readonly caller: () => Caller | undefined,
  ) {
    this.db = serialized(client);
  }

  /**
   * Listens for the engine's asks of `worker`'s jobs, and looks every `everyMs` too; each
   * call as `caller()`, the pool's registration now (none yet: nothing is held).
   */
  static async open(
    url: string,
    worker: string,
    everyMs: number,
    clock: Clock,
    print: (line: string) => void,
    caller: () => Caller | undefined,
  ): Promise<AgentControl> {
    const client = await connect(url);
    const control = new AgentControl(client, worker, clock, print, caller);
    client.on('notification', (n) => n.payload === worker && control.look());
    await client.query(`listen ${ASKS_CHANNEL}`);
    control.stopLooking = clock.every(everyMs, () => control.held.size > 0 && control.look());
    return control;
  }

  /** Holds a claimed job: its asks reach its turn table; its notes go out as `attempt`. */
  hold(key: JobKey, attempt: number): HeldTurn {
    const id = `${key.run}/${key.seq}`;
    const entry: { key: JobKey; attempt: number; turns: StoppableTurns; probe?: (r: ProbeRequest) => Promise<EventBody> } = {
      key,
      attempt,
      turns: new StoppableTurns(this.clock, () => undefined),
    };
    this.held.set(id, entry);
    let notes: Promise<unknown> = Promise.resolve();
    // A stop may have come before the claim (the engine stopped a job while it was being delivered).
    this.look();
    return {
      turns: entry.turns,
      get stopped() {
        return entry.turns.stopped;
      },
      probeWith: (run) => {
        entry.probe = run;
      },
      note: (note) => {
        const said = note.kind === 'started' ? note : { ...note, agent: this.worker };
        notes = notes.then(() => this.as((c) => noteJob(this.db, c, key, attempt, said))).catch(() => undefined);
      },
      flushed: () => notes.then(() => undefined),
      release: () => {
        if (this.held.get(id) === entry) this.held.delete(id);
      },
    };
  }

  /** Reads the open asks of the held jobs: one look at a time, another after it if asked meanwhile. */
  private look(): void {
    this.asks.ask();
  }

  private async readAsks(): Promise<void> {
    const held = [...this.held.values()];
    await this.as((c) => asksFor(this.db, c)).then(async (asks) => {
      for (const ask of asks) this.take(ask);
      // An attempt whose job was given to another (this host was cut off, or paused) or finished for it: its turn stops.
      for (const lost of await this.as((c) =>
        lostAttempts(
          this.db,
          c,
          held.map((h) => ({ ...h.key, attempt: h.attempt })),
        ),
      )) {
        const entry = this.held.get(`${lost.run}/${lost.seq}`);
        if (!entry || entry.attempt !== lost.attempt || entry.turns.stopped !== undefined) continue;
        this.print(`tron agent: job ${lost.seq} attempt ${lost.attempt} no longer holds its job; its turn is stopped`);
        entry.turns.stopWith('the job was given to another attempt, or finished');
      }
    });
  }

  private take(ask: Ask): void {
    const entry = this.held.get(`${ask.run}/${ask.seq}`);
    // Not (or no longer) held here, or taken already.
    if (!entry || entry.attempt !== ask.attempt || this.taken.has(ask.id)) return;
    this.taken.add(ask.id);
    if (ask.kind === 'stop') {
      const reason = String((ask.body as { reason?: unknown })?.reason ?? 'stopped by the engine');
      this.print(`tron agent: job ${ask.seq}: ${reason}; its turn is stopped`);
      entry.turns.stopWith(reason);
      void this.answer(entry, ask, { stopped: true });
      return;
    }
    const probe = entry.probe;
    const r = ask.body as ProbeRequest;
    if (!probe) {
      void this.answer(entry, ask, { probed: null });
      return;
    }
    void probe(r)
      .then((probed) => this.answer(entry, ask, { probed, ended: !entry.turns.isRunning(r.decision.session, r.decision.turn) }))
      .catch(() => undefined);
  }

  private async answer(entry: { key: JobKey; attempt: number }, ask: Ask, answer: unknown): Promise<void> {
    try {
      await this.as((c) => answerAsk(this.db, c, entry.key, entry.attempt, ask.id, answer));
    } catch (err) {
      // The attempt was given to another meanwhile: its answer is not wanted.
      if (!isStaleAttempt(err)) this.taken.delete(ask.id);
    }
  }

  /** A call as the pool's registration; refused here when it has none yet. */
  private as<T>(call: (c: Caller) => Promise<T>): Promise<T> {
    const c = this.caller();
    return c ? call(c) : Promise.reject(new Error('the pool has not registered yet'));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopLooking?.();
    await this.asks.current;
    await this.client.end().catch(() => undefined);
  }
}
