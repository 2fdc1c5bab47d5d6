/**
 * The flow driver's effect runner and WAKE loop. Inputs are appended to the log, fed to
 * the pure `decide`, and each decision is appended (flushed) before its effect starts;
 * effects report back as new inputs. The loop sleeps on a promise until an input
 * arrives — a worker reply, a finished test run, an inbox answer — never on an interval.
 *
 * One writer: the engine holds `.tron/engine.lock` and the run's `events.lock`.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Block } from '../project/register.ts';
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import { EventLog, RunDirGoneError } from '../log/eventlog.ts';
import type { RunLog } from '../log/run-log.ts';
import { codedLine } from './failure.ts';
import { decide, type DecideContext } from '../core/decide/decide.ts';
import { initialState, type EngineState } from '../core/state.ts';
import type { DecisionType } from '../core/events.ts';
import { type EffectContext, engineFault, type Moment, type Outcome, Queues } from './effects/context.ts';
import { PinnedClock, sleep } from '../os/clock.ts';
import type { EngineOptions } from './options.ts';
import { EFFECTS, type Job, jobOf } from './effects/table.ts';
import { mainStatus } from './effects/gate.ts';
import { TurnTable } from './effects/turn-table.ts';
import { removeEngineCheckouts } from './effects/wrap.ts';
import { CheckoutPool, warmCheckouts } from './effects/checkouts.ts';
import * as git from '../git/index.ts';
import { InboxReader, consumeAnswer } from './inbox.ts';
import { Wake } from './wake.ts';
import { infoOf, runStarted } from './run-files.ts';
import { watchBlocks, watchInbox } from './watchers.ts';
import { EngineFiles, digestOfFile } from './effects/engine-files.ts';
import { CONFIG_FILE } from '../project/config.ts';
import { TRON_VERSION } from '../root.ts';
import { NO_SANDBOX } from '../workers/sandbox.ts';

export { TRON_VERSION };
export type { EngineOptions } from './options.ts';

export class Engine {
  state: EngineState = initialState();
  readonly log: RunLog;
  private readonly clock: PinnedClock;
  /** The loop's inputs: it sleeps until one arrives. */
  private readonly inputs = new Wake();
  private readonly running = new Set<Promise<void>>();
  /** Decisions appended with their jobs, whose effects start once their lines are on disk (performWhenDurable). */
  private readonly awaitingDisk: Job[] = [];
  private flushing: Promise<void> | undefined;
  /** The turns running now (the turn effects register theirs). */
  private readonly turns: TurnTable;
  /** The register as the engine last loaded it: what a turn's prompt says of a block. */
  private readonly blocks: Map<string, Block>;
  private readonly ctx: DecideContext;
  private readonly fx: EffectContext;
  /** The log is closed (shutdown): nothing more is recorded. */
  private closed = false;
  private readonly inbox: InboxReader;
  /** Watchers and timers, closed at shutdown. */
  private readonly closers: Array<() => void> = [];
  /** The config as the engine read it (its digest), for the gate and the next start. */
  private readonly configDigest: string | undefined;
  /** The block files of the register the engine last loaded (at start, or on a change in --watch). */
  private loaded: readonly Block[];

  constructor(private readonly o: EngineOptions) {
    this.clock = new PinnedClock(o.clock);
    // The database's log when the caller opened one ([cluster] database); else the run's file.
    this.log = o.log?.(this.clock) ?? EventLog.open(o.runDir, { clock: this.clock, command: 'tron start', key: o.key });
    this.log.groupCommit = true;
    this.ctx = { spine: o.spine, testCommand: o.config.test };
    this.blocks = new Map(o.blocks.map((b) => [b.id, b]));
    this.configDigest = digestOfFile(join(o.repo, CONFIG_FILE));
    this.loaded = o.blocks;
    this.turns = new TurnTable(o.clock, (body) => this.inputs.push(body));
    this.inbox = new InboxReader({ ...o, trunk: o.config.trunk, note: (body) => void this.append(body) });
    this.fx = {
      repo: o.repo,
      runDir: o.runDir,
      config: o.config,
      spine: o.spine,
      env: o.env,
      sandbox: o.sandbox ?? NO_SANDBOX,
      clock: o.clock,
      print: o.print,
      note: (body) => this.append(body),
      input: (body) => this.inputs.push(body),
      engineFiles: new EngineFiles(o.repo, this.configDigest, () => this.loaded),
      checkouts: new CheckoutPool(),
      queues: new Queues(),
      ...(o.remote && { remote: o.remote }),
      ...(o.forge && { forge: o.forge }),
      ...(o.jobs?.suites && { suites: o.jobs.suites }),
      ...(o.jobs && o.remote && o.config.cluster?.jobs !== 'agents' && { keepWork: true }),
      workers: o.workers,
      turns: this.turns,
      ...(o.onOutput ? { onOutput: o.onOutput } : {}),
    };
  }

  /**
   * Runs until the run finishes; returns the exit status. Whatever fails inside — an
   * effect, a write, the step itself — ends the run with exit 1, one coded line and
   * `run.failed` in the log (when the log can still be written), never a stack trace
   * (`--debug` prints it) and never a process left hanging.
   */
  async run(): Promise<number> {
    let failed = false;
    try {
      await this.drive();
    } catch (err) {
      failed = true;
      this.failHard(err as Error);
    }
    // A failure that came to the loop as run.failed (an effect's, the database's, a lost lease) is one too:
    // a result that can no longer come (its job dropped by the next leader) is not waited for without end.
    return this.shutdown(failed || this.inputs.failing);
  }

  private async drive(): Promise<void> {
    const o = this.o;
    await o.jobs?.serve(this.fx);
    const trunkSha = await git.currentTrunkSha(o.repo, o.config.trunk);
    this.input(runStarted(o, trunkSha, await mainStatus(o.repo, o.config.trunk, this.fx.queues), this.configDigest));
    this.input({ type: 'register.loaded', blocks: o.blocks.map(infoOf) });
    for (const body of o.boot ?? []) this.input(body);
    this.inbox.consumedEarlier(o.consumed ?? []);
    const waiting = await this.inbox.read(this.state);
    for (const body of waiting) this.input(body);
    this.input({ type: 'recovery.finished', answers: waiting.length });
    // The gate's checkouts, made while the builders just dispatched work: after their
    // worktrees, which join the worktree queue once their lines are durable (the flush);
    // none when agents test.
    const active = this.fx.suites ? 0 : Math.min(o.config.maxParallel, this.state.index.active);
    const warming = (this.flushing ?? Promise.resolve()).then(() => warmCheckouts(this.fx, active, trunkSha));
    this.running.add(warming);
    void warming.finally(() => this.running.delete(warming));
    const inbox = watchInbox(o.repo, () => {
      if (this.state.finished) return;
      this.inbox.read(this.state).then(
        (bodies) => {
          for (const b of bodies) this.inputs.push(b);
        },
        (err: Error) => this.inputs.fail(err, 'reading .tron/inbox/'),
      );
    });
    this.closers.push(() => inbox.close());
    if (o.watch) {
      // A watching engine lives on its heartbeat: it keeps the process alive, as the watch does.
      const stopBeating = o.clock.every(o.heartbeatMs ?? 60_000, () => this.inputs.guard(() => this.heartbeat()), { keepAlive: true });
      const blocks = watchBlocks(o.repo, o.blocks, o.reloadBlocks, (loaded) => this.inputs.guard(() => this.reloaded(loaded)), o.clock);
      this.closers.push(stopBeating, () => blocks.close());
    }
    while (!this.state.finished) {
      const body = await this.inputs.next();
      this.input(body);
    }
  }

  /** A failure the loop could not turn into an ordinary end: said in one coded line, recorded as run.failed if it still can be. */
  private failHard(err: Error): void {
    const line = codedLine(err, 'the engine loop');
    if (process.env.TRON_DEBUG === '1' && err.stack) this.o.print(err.stack);
    if (!(err instanceof RunDirGoneError) && !this.state.finished) {
      try {
        // Recorded, the reporter says it (run.failed, then run.finished).
        this.input({ type: 'run.failed', detail: line, after: this.inputs.failedAfter ?? 'the engine loop' });
        return;
      } catch {
        // The log cannot take it either: the coded line below is the record.
      }
    }
    this.o.print(`tron: ${line}`);
  }

  /** Stops everything the run started and closes the log; the exit status of the run. */
  private async shutdown(failed: boolean): Promise<number> {
    for (const close of this.closers) close();
    this.turns.stopAll();
    // Effects decided last start once their lines are on disk: then every effect is in `running`.
    while (this.flushing !== undefined) await this.flushing;
    const settled = Promise.allSettled([...this.running]);
    // After a failure, an effect still running (a long test run) is not waited for:
    // its processes carry the run's marker, and the next start's recovery ends them.
    // A landing's move of your checkout goes on after its effect has reported: wait for it too.
    const quiet = settled.then(() => this.fx.queues.main.run(async () => undefined));
    if (failed) await Promise.race([quiet, sleep(this.o.clock, 5000)]);
    else await quiet;
    // The queue's pools go too; after a failure a test run still running there is not waited for either.
    const pools = this.o.jobs?.close();
    await (failed ? Promise.race([pools, sleep(this.o.clock, 5000)]) : pools);
    // The engine's own checkouts go with the run (a failure may leave one busy: the next start's sweep takes it).
    if (!failed) await removeEngineCheckouts(this.fx);
    try {
      this.o.report && writeFileSync(join(this.o.runDir, 'report.md'), this.o.report(this.log.events));
    } catch {
      // No run directory to write it in (removed): the log is gone with it.
    }
    this.closed = true;
    try {
      await this.log.close();
    } catch {
      // Its lock file went with the run directory.
    }
    const finished = this.log.events.findLast((e) => e.type === 'run.finished') as EventOf<'run.finished'> | undefined;
    return finished && !failed ? finished.exit : 1;
  }

  /** Appends an input, decides, appends the decisions and starts their effects. */
  input(body: EventBody): void {
    const event = this.append(body);
    const { state, decisions } = decide(this.state, event, this.ctx);
    this.clock.pinned = event.ts;
    const appended: TronEvent[] = [];
    try {
      for (const d of decisions) appended.push(this.append(d));
    } finally {
      this.clock.pinned = undefined;
    }
    this.state = state;
    // Each job's input is made now, from the state as it is when its decision was made, and
    // is JSON: what runs it needs nothing of the engine's memory.
    const moment: Moment = { state, history: this.log.events, blocks: this.blocks };
    const jobs = appended.map((d) => jobOf(d, moment));
    if (event.type === 'operator.answered') {
      // The answer file goes only once its event is durable.
      this.log.whenDurable(() => {
        consumeAnswer(this.o.repo, event.file, this.o.runDir);
        this.append({ type: 'inbox.consumed', file: event.file });
      });
    }
    // [cluster] database: turns and test runs are committed with their lines as jobs on the queue.
    this.o.jobs?.enqueue(jobs);
    this.performWhenDurable(jobs);
  }

  /**
   * Starts the decisions' effects, in order, once their lines are on disk: one flush for
   * every line appended meanwhile (group commit), off the main thread — the engine writes
   * thousands of lines a run, and flushing each alone held everything else up.
   */
  private performWhenDurable(jobs: readonly Job[]): void {
    this.awaitingDisk.push(...jobs);
    if (this.flushing || this.awaitingDisk.length === 0) return;
    const flushing = (async () => {
      while (this.awaitingDisk.length > 0) {
        const batch = this.awaitingDisk.splice(0);
        await this.log.sync();
        for (const job of batch) this.perform(job);
      }
    })()
      .catch((err: Error) => this.inputs.fail(err, 'flushing the event log'))
      .finally(() => {
        this.running.delete(flushing);
        this.flushing = undefined;
        // Decisions that came in between the last check and now.
        if (this.awaitingDisk.length > 0) this.performWhenDurable([]);
      });
    this.flushing = flushing;
    this.running.add(flushing);
  }

  /** Appends one event; the crash hook dies right after the chosen one, as a power cut would. */
  private append(body: EventBody): TronEvent {
    const event = this.log.append(body);
    if (event.seq === this.o.crashAfter) process.kill(process.pid, 'SIGKILL');
    this.o.onAppend?.(event);
    return event;
  }

  /**
   * A note from beside the engine (a notification's delivery, engine/serve/notify.ts):
   * appended like the engine's own, outside any step; false once the log is closed.
   */
  record(body: EventBody): boolean {
    if (this.closed) return false;
    try {
      this.append(body);
      return true;
    } catch {
      return false;
    }
  }

  /** A stop signal: nothing new starts, running turns are stopped, the run finishes when quiet. */
  stop(signal: string): void {
    if (this.state.finished) return;
    this.inputs.push({ type: 'run.stopping', signal });
    this.turns.stopAll();
  }

  /** A failure from outside the loop (the database lost: engine/log/cluster.ts): the run ends with exit 1, naming it. */
  fail(err: Error, after: string): void {
    this.inputs.fail(err, after);
  }

  /** A second signal: kill every worker process group now. */
  abortNow(): void {
    this.turns.stopAll();
  }

  /** An input from beside the loop (a person's action on the forge: engine/forge/watch.ts), decided in its turn. */
  told(body: EventBody): void {
    if (!this.state.finished) this.inputs.push(body);
  }

  /** --watch: the register changed by a source the engine does not watch itself (the forge's issues: engine/forge/watch.ts). */
  registerChanged(blocks: Block[]): void {
    this.inputs.guard(() => this.reloaded(blocks));
  }

  /** --watch: the register changed. */
  private reloaded(blocks: Block[]): void {
    this.loaded = blocks;
    for (const b of blocks) this.blocks.set(b.id, b);
    this.inputs.push({ type: 'register.loaded', blocks: blocks.map(infoOf) });
  }

  private heartbeat(): void {
    if (this.state.finished) return;
    const parked = this.state.order.filter((id) => this.state.blocks.get(id)!.phase === 'parked').length;
    this.append({ type: 'run.heartbeat', running: this.turns.size, parked });
  }

  /** Starts the job a decision asks for (a lookup in EFFECTS); its outcome comes back through the queue. */
  private perform(job: Job): void {
    const e = job.decision;
    const effect = EFFECTS[e.type as DecisionType];
    if (!effect) return;
    // Where it runs is its row's (the queue's placeOf): here, on the engine's own pool, or on the agents.
    const place = this.o.jobs?.placeOf(job) ?? 'process';
    const p = Promise.resolve()
      .then(() =>
        place === 'process' ? (effect.run(this.fx, job.request) as Outcome | Promise<Outcome>) : this.o.jobs!.outcome(job, place),
      )
      .then((out) => {
        // One effect may report several inputs (a stack's landing: one block.landed each), in order.
        for (const body of [out ?? []].flat()) this.inputs.push(body);
      })
      .catch(async (err: Error) => {
        if (process.env.TRON_DEBUG === '1' && err.stack) this.o.print(err.stack);
        // A git failure over a damaged store is reported as the damage (TRON_STORE_DAMAGED), which ends the run;
        // otherwise a job that reaches a worker's state reports its failure as an input about its block.
        const explained = await git.explainFailure(this.o.repo, this.o.config.trunk, err);
        const reported = engineFault(explained, this.o.runDir) ? undefined : effect.onFailure?.(job.request, explained);
        if (reported) for (const body of [reported].flat()) this.inputs.push(body);
        else this.inputs.fail(explained, `${e.type}${'block' in e ? ` for ${e.block}` : ''}`);
      })
      .finally(() => this.running.delete(p));
    this.running.add(p);
  }
}
