/**
 * The engine's side of the turns it hands to `tron agent`s (`[cluster] jobs = "agents"`,
 * docs/cluster.md): each is in the engine's own turn table from its dispatch, as a turn it
 * ran itself would be, so everything that stops or times turns acts on it the same way.
 *
 * - **Stopping.** The table's abort (the engine stops, the block is parked or abandoned,
 *   the run's budget is spent, the turn is re-issued) becomes a stop of the job
 *   (engine/queue/pg-job-control.ts): a queued job is finished at once as an aborted turn; a
 *   running one's agent is asked to kill the turn and reports it stopped. An agent that
 *   does not report within the stop grace (it died meanwhile) has the job finished for it,
 *   so a stopping engine never waits on a host that is gone; its late result is refused.
 * - **Liveness.** When an attempt says the turn started, its overrun timer is armed with
 *   the turn's budget (again, for a new attempt); the timer's firing, the probe's verdict
 *   and the extension are inputs and decisions as for a turn here. A probe is asked of the
 *   agent, which runs the same probe effect against its own process and worktree and
 *   answers; an agent that does not answer in time shows no sign of life.
 * - **Notes.** The attempt's process notes are recorded as the engine's own turns' are
 *   (`worker.spawned`/`worker.exited`, naming the agent: recovery leaves those pids alone).
 */
import type { EventBody, EventOf } from '../core/events.ts';
import {
  askProbe,
  askStop,
  answerOf,
  dropOutputNotes,
  failJob,
  type JobNote,
  jobProgress,
  NOTES_CHANNEL,
  serialized,
} from './pg-job-control.ts';
import { keepAgentOutput, type StreamedOutput, streamAgentOutput } from '../log/turn-log.ts';
import { connect } from './pg-jobs.ts';
import type { JobKey, JobResult } from './pg-job-types.ts';
import type { RunKey } from '../log/pg-log.ts';
import type { AgentTurnsPort, EffectContext, Outcome } from '../runtime/effects/context.ts';
import type { ProbeRequest } from '../runtime/effects/liveness.ts';
import { turnBudget } from '../runtime/effects/turn.ts';
import type { Job } from '../runtime/effects/table.ts';
import type pg from 'pg';
import { OneLook } from '../os/one-look.ts';
import { sleep } from '../os/clock.ts';

/** How long an agent's turn may take to end once stopped, beyond a few heartbeats: the adapter's kill grace and its report. */
const STOP_GRACE_MS = 10_000;
/** How long a worker that exited during a probe may take to end its turn (as effects/liveness.ts waits for one here). */
const SETTLE_MS = 3000;

interface Watched {
  e: EventOf<'block.dispatched'>;
  key: JobKey;
  /** The attempt whose start armed the timer. */
  armed: number;
  /** The id of the last note taken. */
  lastNote: number;
  done: boolean;
  /** How far its output notes brought the turn's file here. */
  output?: StreamedOutput;
  /** Its notes were read to the last once its result came (keepOutput). */
  drained?: boolean;
}

export class AgentTurns implements AgentTurnsPort {
  private readonly watched = new Map<number, Watched>();
  private readonly answers = new Set<() => void>();
  /** The look for the watched jobs' notes: one at a time, another after it if asked meanwhile. */
  private readonly notes = new OneLook(
    () => this.readNotes(),
    () => this.closed || this.watched.size === 0,
  );
  /** Stops the periodic look for notes. */
  private stopLooking: (() => void) | undefined;
  private closed = false;
  /** The connection's queries, one at a time. */
  private readonly db: pg.ClientBase;

  private constructor(
    private readonly client: pg.Client,
    private readonly at: RunKey,
    private readonly fx: EffectContext,
    private readonly heartbeatMs: number,
  ) {
    this.db = serialized(client);
  }

  static async open(url: string, at: RunKey, fx: EffectContext, heartbeatMs: number): Promise<AgentTurns> {
    const client = await connect(url);
    const turns = new AgentTurns(client, at, fx, heartbeatMs);
    client.on('notification', () => turns.look());
    await client.query(`listen ${NOTES_CHANNEL}`);
    turns.stopLooking = fx.clock.every(Math.max(250, heartbeatMs / 2), () => turns.watched.size > 0 && turns.look());
    return turns;
  }

  owns(session: string, turn: number): boolean {
    for (const w of this.watched.values()) if (w.e.session === session && w.e.turn === turn) return true;
    return false;
  }

  /**
   * Follows a turn dispatched to the agents until `outcome` (its result, the builder's work
   * adopted) settles: in the turn table meanwhile, stopped through the database.
   */
  watch(job: Job, outcome: Promise<Outcome>): Promise<Outcome> {
    const e = job.decision as EventOf<'block.dispatched'>;
    const key = { ...this.at, seq: e.seq };
    const w: Watched = { e, key, armed: 0, lastNote: 0, done: false };
    this.watched.set(e.seq, w);
    // A turn decided before the run's stop or its block's park starts stopped (TurnTable.start).
    const signal = this.fx.turns.start(e.block, e.session, e.turn, e.seq);
    if (signal.aborted) void this.stop(w);
    else signal.addEventListener('abort', () => void this.stop(w), { once: true });
    this.look();
    const ended = async (): Promise<void> => {
      w.done = true;
      // Read to the last already when its output was kept (no note comes after a result).
      if (!w.drained) await this.drain(w).catch(() => undefined);
      this.watched.delete(e.seq);
      this.fx.turns.end(e.session, e.turn);
    };
    return outcome.then(
      async (out) => {
        await ended();
        return out;
      },
      async (err: unknown) => {
        await ended();
        throw err;
      },
    );
  }

  /** Stops the job: finished at once while queued, else its agent asked; finished for it after the grace. */
  private async stop(w: Watched): Promise<void> {
    const { e, key } = w;
    const reply = (detail: string): JobResult => ({
      ok: true,
      inputs: [
        {
          type: 'reply.received',
          block: e.block,
          role: e.role,
          session: e.session,
          turn: e.turn,
          ok: false,
          failure: 'aborted',
          detail,
        } satisfies EventBody,
      ],
    });
    try {
      const how = await askStop(this.db, key, 'stopped by the engine', reply('stopped by the engine before an agent ran it'));
      if (how !== 'asked') return;
      await sleep(this.fx.clock, STOP_GRACE_MS + 3 * this.heartbeatMs);
      if (w.done || this.closed) return;
      // Gone with its host: the engine finishes the job itself, and a late result is refused.
      await failJob(this.db, key, reply('stopped by the engine; the agent running it did not report within the stop grace'));
    } catch {
      // The database is gone: the engine's own failure (TRON_DB_LOST) ends the run.
    }
  }

  /** Asks the agent running the turn to probe it; its verdict, or silence when it does not answer in time. */
  async probe(r: ProbeRequest): Promise<EventBody> {
    const e = r.decision;
    const w = [...this.watched.values()].find((x) => x.e.session === e.session && x.e.turn === e.turn);
    const silent = (sign: string): EventBody => ({
      type: 'worker.probed',
      block: e.block,
      session: e.session,
      turn: e.turn,
      alive: false,
      signs: [sign],
    });
    if (!w) return silent('the turn is no longer on an agent');
    const id = await askProbe(this.db, w.key, r);
    if (id === undefined) return silent('no agent runs the turn: it waits in the queue');
    const bound = r.probeWaitMs + SETTLE_MS + 3 * this.heartbeatMs + 2000;
    const answer = (await this.answerWithin(id, bound)) as { probed?: EventBody | null; ended?: boolean } | undefined;
    if (!answer?.probed) return silent(`the agent running it did not answer the probe within ${Math.round(bound / 1000)} s`);
    // Its worker exited during the probe: let the turn's reply reach the engine first (as effects/liveness.ts does).
    if (answer.ended && (await this.fx.turns.ended(e.session, e.turn, SETTLE_MS + 3 * this.heartbeatMs + 2000)))
      await new Promise((done) => setImmediate(done));
    return answer.probed;
  }

  private async answerWithin(id: number, ms: number): Promise<unknown | undefined> {
    const clock = this.fx.clock;
    const until = clock.now() + ms;
    for (;;) {
      const answer = await answerOf(this.db, id);
      if (answer !== undefined || this.closed || clock.now() >= until) return answer;
      await new Promise<void>((resolve) => {
        const wake = () => {
          cancel();
          this.answers.delete(wake);
          resolve();
        };
        const cancel = clock.after(Math.min(500, Math.max(1, until - clock.now())), wake);
        this.answers.add(wake);
      });
    }
  }

  /** One note of a watched job, once: a start arms the overrun timer; process notes go to the log. */
  private apply(w: Watched, n: { id: number; attempt: number; body: JobNote; worker: string | null }): void {
    // One agent's notes of a job are committed one after another: in order of id.
    if (n.id <= w.lastNote) return;
    w.lastNote = n.id;
    const at = { block: w.e.block, session: w.e.session, turn: w.e.turn };
    if (n.body.kind === 'started') {
      if (n.attempt <= w.armed || w.done) return;
      w.armed = n.attempt;
      this.fx.turns.restart(w.e.session, w.e.turn);
      this.fx.turns.arm(w.e.session, w.e.turn, turnBudget(this.fx, w.e));
      return;
    }
    if (n.body.kind === 'output') {
      // The agent's words, bounded: a note the database let through (its kind and size checked) that is not text is dropped.
      const { offset, text } = n.body;
      if (!Number.isSafeInteger(offset) || offset < 0 || typeof text !== 'string') return;
      try {
        w.output = streamAgentOutput(this.fx.runDir, at, n.worker ?? 'an agent', w.output, { attempt: n.attempt, offset, text });
      } catch {
        // The turn's file is for reading; never a reason to stop following the turn.
      }
      return;
    }
    if (n.body.kind !== 'spawned' && n.body.kind !== 'exited') return;
    const agent = n.body.agent ?? n.worker ?? 'an agent';
    if (n.body.kind === 'spawned') this.fx.note({ type: 'worker.spawned', ...at, pid: n.body.pid, start_time: n.body.start_time, agent });
    else this.fx.note({ type: 'worker.exited', ...at, pid: n.body.pid, code: n.body.code, signal: n.body.signal, agent });
  }

  /**
   * A finished turn's output, kept as its file here: its notes read to the last, then what
   * they did not bring added from the result (turn-log.ts keepAgentOutput); the job's output
   * notes then go from the database.
   */
  async keepOutput(
    e: EventOf<'block.dispatched'>,
    r: { output?: unknown; outputAt?: unknown; attempt?: number; worker?: string },
  ): Promise<void> {
    const w = this.watched.get(e.seq);
    if (w)
      await this.drain(w).then(
        () => {
          w.drained = true;
        },
        () => undefined,
      );
    if (typeof r.output !== 'string') return;
    const outputAt = Number.isSafeInteger(r.outputAt) && (r.outputAt as number) >= 0 ? (r.outputAt as number) : undefined;
    let streamed = w?.output;
    try {
      // The file holds an earlier attempt's output (its agent died): this attempt's goes under a line of its own.
      if (streamed && r.attempt !== undefined && streamed.attempt < r.attempt)
        streamed = streamAgentOutput(this.fx.runDir, e, r.worker ?? 'an agent', streamed, { attempt: r.attempt, offset: 0, text: '' });
    } catch {
      streamed = undefined;
    }
    keepAgentOutput(this.fx.runDir, e, r.worker ?? 'an agent', r.output, {
      ...(streamed ? { streamed } : {}),
      ...(outputAt !== undefined ? { outputAt } : {}),
    });
    if (w?.output) await dropOutputNotes(this.db, w.key).catch(() => undefined);
  }

  /** The notes of a job that just ended, read to its last (its agent sent them before its result). */
  private async drain(w: Watched): Promise<void> {
    await this.notes.current;
    const { notes } = await jobProgress(this.db, this.at, [w.key.seq], w.lastNote);
    for (const n of notes) this.apply(w, n);
  }

  /** Reads the watched jobs' notes: a start arms the overrun timer; process notes go to the log. */
  private look(): void {
    for (const wake of [...this.answers]) wake();
    this.notes.ask();
  }

  private async readNotes(): Promise<void> {
    const watched = [...this.watched.values()];
    const { notes } = await jobProgress(
      this.db,
      this.at,
      watched.map((w) => w.key.seq),
      Math.min(...watched.map((w) => w.lastNote)),
    );
    for (const n of notes) {
      const w = this.watched.get(n.seq);
      if (w) this.apply(w, n);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopLooking?.();
    for (const wake of [...this.answers]) wake();
    await this.notes.current;
    await this.client.end().catch(() => undefined);
  }
}
