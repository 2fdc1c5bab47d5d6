/**
 * The flow driver's effect runner and WAKE loop. Inputs are appended to the log, fed to
 * the pure `decide`, and each decision is appended (flushed) before its effect starts;
 * effects report back as new inputs. The loop sleeps on a promise until an input
 * arrives — a worker reply, a finished test run, an inbox answer — never on an interval.
 *
 * One writer: the engine holds `.tron/engine.lock` and the run's `events.lock`.
 */
import { appendFileSync, copyFileSync, mkdirSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../core/clock.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import { EventLog, RunDirGoneError } from '../log/eventlog.ts';
import { codedLine } from './failure.ts';
import { decide, type DecideContext } from '../core/decide/decide.ts';
import { initialState, type EngineState } from '../core/state.ts';
import type { Spine } from '../spine/spine.ts';
import type { TurnObserver, WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../core/roles.ts';
import * as fx from './effects.ts';
import * as lane from './effects/lane.ts';
import { CheckoutPool, warmCheckouts } from './effects/checkouts.ts';
import * as git from '../git/index.ts';
import { renderPrompt } from './effects/prompts.ts';
import { formatDuration } from '../core/duration.ts';
import { promptVars } from './effects/prompt-vars.ts';
import { renderReport } from '../render/report.ts';
import { INBOX_DIR, type Answer, consumeAnswer, readInbox, refuseAnswer } from './inbox.ts';
import { signsOfLife, takeSnapshot, worktreePrint, type LifeSnapshot } from '../workers/liveness-signs.ts';
import { EngineFiles, digestOfFile } from './effects/engine-files.ts';
import { CONFIG_FILE } from '../project/config.ts';
import { TRON_VERSION } from '../root.ts';
import { costOf } from '../workers/prices.ts';
import { boundedTail } from '../workers/output.ts';
import { NO_SANDBOX, type Sandbox } from '../workers/sandbox.ts';
import { TurnLog } from '../log/turn-log.ts';

export { TRON_VERSION };

export interface EngineOptions {
  repo: string;
  runDir: string;
  runId: string;
  config: Config;
  blocks: Block[];
  spine: Spine;
  spineFile: string;
  workers: Partial<Record<WorkerRole, WorkerAdapter>>;
  clock: Clock;
  env: Record<string, string | undefined>;
  /** The repository's key: signs the log, checks inbox answers (engine/log/keys.ts). */
  key: Buffer;
  /** TRON_RUN_MARKER of this run: in `env`, and so in every worker and test process. */
  marker?: string;
  /** Where the engine's test runs are confined; none unless given. */
  sandbox?: Sandbox;
  /** Notices that are not events (a problem with an answer file, a checkout left behind). */
  print: (line: string) => void;
  /** Sees every event right after it is appended: the console reporter, the live board. */
  onAppend?: (event: TronEvent) => void;
  /** Sees a worker's live output (and progress notes) as it arrives, after its turn log has it. */
  onOutput?: (at: { block: string; session: string; turn: number }, text: string) => void;
  watch: boolean;
  /** What boot recovery found (engine/runtime/recovery.ts), fed after the register. */
  boot?: EventBody[];
  /** Inbox files an earlier run already consumed (moved now, never answered twice). */
  consumed?: readonly string[];
  /** Test hook (TRON_CRASH_AFTER_EVENT, read once at start): die abruptly right after appending this seq. */
  crashAfter?: number;
  /** --watch: the interval of run.heartbeat notes. */
  heartbeatMs?: number;
  /** --watch: re-reads the register after a change under .tron/blocks/ (undefined when it has problems). */
  reloadBlocks?: () => Block[] | undefined;
}

/** A clock that the engine pins to an input's time while it appends that input's decisions. */
class PinnedClock implements Clock {
  pinned: number | undefined;
  constructor(private readonly base: Clock) {}
  now(): number {
    return this.pinned ?? this.base.now();
  }
}

export class Engine {
  state: EngineState = initialState();
  readonly log: EventLog;
  private readonly clock: PinnedClock;
  private readonly queue: EventBody[] = [];
  private wake: (() => void) | undefined;
  private readonly running = new Set<Promise<void>>();
  /** Decisions appended, whose effects start once their lines are on disk (performWhenDurable). */
  private readonly awaitingDisk: TronEvent[] = [];
  private flushing: Promise<void> | undefined;
  /** Running turns by `session#turn`, with their block, start time and overrun timer. */
  private readonly turns = new Map<string, { block: string; controller: AbortController; startedAt: number; timer?: NodeJS.Timeout }>();
  /** Signs of life per session from workers without a process (model steps, sim progress). */
  private readonly progress = new Map<string, number>();
  private readonly ctx: DecideContext;
  private readonly fx: fx.EffectContext;
  private failure: Error | undefined;
  private failedAfter: string | undefined;
  private readonly seenAnswers = new Set<string>();
  private inboxWatcher: FSWatcher | undefined;
  private blocksWatcher: FSWatcher | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  /** The config as the engine read it (its digest), for the gate and the next start. */
  private readonly configDigest: string | undefined;
  /** The block files of the register the engine last loaded (at start, or on a change in --watch). */
  private loaded: readonly Block[];

  constructor(private readonly o: EngineOptions) {
    this.clock = new PinnedClock(o.clock);
    this.log = EventLog.open(o.runDir, { clock: this.clock, command: 'tron start', key: o.key });
    this.log.groupCommit = true;
    this.ctx = { spine: o.spine, testCommand: o.config.test };
    const byId = new Map(o.blocks.map((b) => [b.id, b]));
    this.configDigest = digestOfFile(join(o.repo, CONFIG_FILE));
    this.loaded = o.blocks;
    this.fx = {
      repo: o.repo,
      runDir: o.runDir,
      config: o.config,
      blocks: () => byId,
      env: o.env,
      sandbox: o.sandbox ?? NO_SANDBOX,
      print: o.print,
      note: (body) => void this.append(body),
      engineFiles: new EngineFiles(o.repo, this.configDigest, () => this.loaded),
      checkouts: new CheckoutPool(),
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
    return this.shutdown(failed);
  }

  private async drive(): Promise<void> {
    const o = this.o;
    const trunkSha = await git.currentTrunkSha(o.repo, o.config.trunk);
    this.input({
      type: 'run.started',
      run: o.runId,
      version: TRON_VERSION,
      trunk: o.config.trunk,
      trunk_sha: trunkSha,
      main_status: await fx.mainStatus(o.repo, o.config.trunk),
      max_parallel: o.config.maxParallel,
      architect: Boolean(o.workers.architect),
      liveness: livenessNumbers(o.spine, o.config),
      watch: o.watch,
      pid: process.pid,
      ...(this.configDigest ? { config_digest: this.configDigest } : {}),
      ...(o.marker ? { marker: o.marker } : {}),
      budgets: {
        ...(o.config.budgets.blockUsd !== undefined && { block_usd: o.config.budgets.blockUsd }),
        ...(o.config.budgets.blockTokens !== undefined && { block_tokens: o.config.budgets.blockTokens }),
        ...(o.config.budgets.runUsd !== undefined && { run_usd: o.config.budgets.runUsd }),
      },
      merge: { batch: o.config.merge.batch, verify_trunk: o.config.merge.verifyTrunk, gather: o.config.merge.gather },
    });
    this.input({ type: 'register.loaded', blocks: o.blocks.map(infoOf) });
    for (const body of o.boot ?? []) this.input(body);
    for (const file of o.consumed ?? []) {
      this.seenAnswers.add(file);
      consumeAnswer(o.repo, file, o.runDir);
    }
    const waiting = await this.inboxAnswers();
    for (const body of waiting) this.input(body);
    this.input({ type: 'recovery.finished', answers: waiting.length });
    // The gate's checkouts, made while the builders just dispatched work (after their worktrees).
    const warming = warmCheckouts(this.fx, Math.min(o.config.maxParallel, this.state.index.active), trunkSha, fx.serialWorktrees);
    this.running.add(warming);
    void warming.finally(() => this.running.delete(warming));
    this.watchInbox();
    this.heartbeatTimer = o.watch ? setInterval(() => this.guard(() => this.heartbeat()), o.heartbeatMs ?? 60_000) : undefined;
    this.blocksWatcher = o.watch ? this.watchBlocks() : undefined;
    while (!this.state.finished) {
      const body = await this.next();
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
        this.input({ type: 'run.failed', detail: line, after: this.failedAfter ?? 'the engine loop' });
        return;
      } catch {
        // The log cannot take it either: the coded line below is the record.
      }
    }
    this.o.print(`tron: ${line}`);
  }

  /** Stops everything the run started and closes the log; the exit status of the run. */
  private async shutdown(failed: boolean): Promise<number> {
    this.inboxWatcher?.close();
    this.blocksWatcher?.close();
    clearInterval(this.heartbeatTimer);
    for (const t of this.turns.values()) {
      clearTimeout(t.timer);
      t.controller.abort();
    }
    // Effects decided last start once their lines are on disk: then every effect is in `running`.
    while (this.flushing !== undefined) await this.flushing;
    const settled = Promise.allSettled([...this.running]);
    // After a failure, an effect still running (a long test run) is not waited for:
    // its processes carry the run's marker, and the next start's recovery ends them.
    // A landing's move of your checkout goes on after its effect has reported: wait for it too.
    const quiet = settled.then(() => fx.serialMain(async () => undefined));
    if (failed) await Promise.race([quiet, new Promise((r) => setTimeout(r, 5000).unref())]);
    else await quiet;
    // The engine's own checkouts go with the run (a failure may leave one busy: the next start's sweep takes it).
    if (!failed) await fx.removeEngineCheckouts(this.fx);
    try {
      writeFileSync(join(this.o.runDir, 'report.md'), renderReport(this.log.events));
    } catch {
      // No run directory to write it in (removed): the log is gone with it.
    }
    try {
      this.log.close();
    } catch {
      // Its lock file went with the run directory.
    }
    const finished = this.log.events.findLast((e) => e.type === 'run.finished') as EventOf<'run.finished'> | undefined;
    return finished && !failed ? finished.exit : 1;
  }

  /** Runs a callback of a timer or watcher: a failure in it ends the run like an effect's. */
  private guard(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.failure = err as Error;
      this.wake?.();
    }
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
    if (event.type === 'operator.answered') {
      // The answer file goes only once its event is on disk.
      this.log.syncNow();
      consumeAnswer(this.o.repo, event.file, this.o.runDir);
      this.append({ type: 'inbox.consumed', file: event.file });
    }
    this.performWhenDurable(appended);
  }

  /**
   * Starts the decisions' effects, in order, once their lines are on disk: one flush for
   * every line appended meanwhile (group commit), off the main thread — the engine writes
   * thousands of lines a run, and flushing each alone held everything else up.
   */
  private performWhenDurable(decisions: readonly TronEvent[]): void {
    this.awaitingDisk.push(...decisions);
    if (this.flushing || this.awaitingDisk.length === 0) return;
    const flushing = (async () => {
      while (this.awaitingDisk.length > 0) {
        const batch = this.awaitingDisk.splice(0);
        await this.log.sync();
        for (const d of batch) this.perform(d);
      }
    })()
      .catch((err: Error) => {
        this.failure = err;
        this.failedAfter = 'flushing the event log';
        this.wake?.();
      })
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

  /** A stop signal: nothing new starts, running turns are stopped, the run finishes when quiet. */
  stop(signal: string): void {
    if (this.state.finished) return;
    this.push({ type: 'run.stopping', signal });
    this.stopTurns(() => true);
  }

  /** A second signal: kill every worker process group now. */
  abortNow(): void {
    this.stopTurns(() => true);
  }

  /**
   * New answer files in the inbox, as operator.answered inputs (each file once). A file
   * that is no answer of `tron answer`, is stale (written no later than the last answer the
   * block took: a copy of an old one), or names a block this run does not have, is
   * refused with a note and moved aside: it never becomes an input.
   */
  private async inboxAnswers(): Promise<EventBody[]> {
    const { answers, refused } = readInbox(this.o.repo, this.o.key, this.seenAnswers);
    const accepted: Answer[] = [];
    for (const a of answers) {
      const b = this.state.blocks.get(a.block);
      if (!b) refused.push({ file: a.file, block: a.block, reason: `there is no block "${a.block}" in this run` });
      else if (b.answeredAt !== undefined && a.written_at <= b.answeredAt) {
        refused.push({ file: a.file, block: a.block, reason: `stale: ${a.block} already took an answer written at ${b.answeredAt}` });
      } else accepted.push(a);
    }
    for (const r of refused) {
      this.seenAnswers.add(r.file);
      refuseAnswer(this.o.repo, r.file, this.o.runDir);
      this.append({ type: 'inbox.refused', file: r.file, ...(r.block !== undefined ? { block: r.block } : {}), reason: r.reason });
      this.o.print(`tron: ${join(INBOX_DIR, r.file)} refused — ${r.reason}; answer with \`tron answer\``);
    }
    if (accepted.length === 0) return [];
    const trunkSha = await git.currentTrunkSha(this.o.repo, this.o.config.trunk);
    return accepted.map((a) => {
      this.seenAnswers.add(a.file);
      return {
        type: 'operator.answered',
        block: a.block,
        word: a.word,
        payload: a.payload,
        file: a.file,
        trunk_sha: trunkSha,
        written_at: a.written_at,
      };
    });
  }

  private heartbeat(): void {
    if (this.state.finished) return;
    const parked = this.state.order.filter((id) => this.state.blocks.get(id)!.phase === 'parked').length;
    this.append({ type: 'run.heartbeat', running: this.turns.size, parked });
  }

  /** --watch: a new or changed block file wakes the engine at once (a file-system notification). */
  private watchBlocks(): FSWatcher {
    const dir = join(this.o.repo, '.tron', 'blocks');
    mkdirSync(dir, { recursive: true });
    let last = JSON.stringify(this.o.blocks.map((b) => b.digest));
    let pending: NodeJS.Timeout | undefined;
    return watch(dir, () => {
      // Editors write a file in several steps; read the register once they settle.
      clearTimeout(pending);
      pending = setTimeout(
        () =>
          this.guard(() => {
            const blocks = this.o.reloadBlocks?.();
            if (!blocks) return;
            const now = JSON.stringify(blocks.map((b) => b.digest));
            if (now === last) return;
            last = now;
            this.loaded = blocks;
            for (const b of blocks) this.fx.blocks().set(b.id, b);
            this.push({ type: 'register.loaded', blocks: blocks.map(infoOf) });
          }),
        50,
      );
    });
  }

  /** An answer written while the engine runs wakes it at once (a file-system notification, not a poll). */
  private watchInbox(): void {
    const dir = join(this.o.repo, INBOX_DIR);
    mkdirSync(dir, { recursive: true });
    this.inboxWatcher = watch(dir, () => {
      if (this.state.finished) return;
      this.inboxAnswers().then(
        (bodies) => {
          for (const b of bodies) this.push(b);
        },
        (err: Error) => {
          this.failure = err;
          this.failedAfter = 'reading .tron/inbox/';
          this.wake?.();
        },
      );
    });
  }

  private next(): Promise<EventBody> {
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

  private push(body: EventBody): void {
    this.queue.push(body);
    this.wake?.();
  }

  /** An effect failed: reported as an input, so that decide ends the run and the run replays. */
  private fatal(err: Error): EventBody {
    this.failure = undefined;
    // A log that cannot be written is no input: the loop stops on it.
    if (err instanceof RunDirGoneError) throw err;
    const after = this.failedAfter ?? 'an effect';
    return { type: 'run.failed', detail: codedLine(err, `the effect of ${after}`), after };
  }

  /** Starts the effect a decision asks for; its outcome comes back through the queue. */
  private perform(e: TronEvent): void {
    const c = this.fx;
    const start = (work: () => Promise<EventBody | EventBody[] | undefined>) => {
      const p = work()
        .then((out) => {
          // One effect may report several inputs (a stack's landing: one block.landed each), in order.
          for (const body of [out ?? []].flat()) this.push(body);
        })
        .catch((err: Error) => {
          this.failure = err;
          this.failedAfter = `${e.type}${'block' in e ? ` for ${e.block}` : ''}`;
          if (process.env.TRON_DEBUG === '1' && err.stack) this.o.print(err.stack);
          this.wake?.();
        })
        .finally(() => this.running.delete(p));
      this.running.add(p);
    };
    switch (e.type) {
      case 'worktree.requested':
        return start(() => fx.prepareWorktree(c, e));
      case 'block.dispatched':
        return start(() => this.turn(e));
      case 'facts.requested':
        return start(() => fx.observeFacts(c, e));
      case 'lane.stacked':
        return start(() => lane.stackBlocks(c, e));
      case 'candidate.requested':
      case 'bisect.step':
        return start(() => lane.testCandidate(c, e));
      case 'land.intent':
        return start(() => lane.landStack(c, e));
      case 'test.requested':
        return start(() => fx.testTrunk(c, e));
      case 'wrap.requested':
        return start(() => fx.wrapBlock(c, e));
      case 'escalation.raised':
        if (e.handler === 'operator') return start(() => fx.page(c, e));
        return;
      case 'budget.exceeded':
        // The run's budget is spent: no new turn starts; the ones running stop now, and the
        // run ends once nothing is in flight. (A block's own: its block.parked stops its turn.)
        if (e.scope === 'run') this.stopTurns(() => true);
        return;
      case 'block.parked':
      case 'block.abandoned':
        this.stopTurns((t) => t.block === e.block);
        return;
      case 'worker.overran':
        return start(() => this.probe(e));
      case 'worker.extended':
        this.armTimer(e.session, e.turn, e.extension_ms);
        return;
      case 'turn.reissued':
        this.stopTurns((_t, key) => key === `${e.session}#${e.turn}`);
        return;
      default:
        return;
    }
  }

  /** Runs one worker turn and reports its reply (or failure) as `reply.received`. */
  private async turn(e: EventOf<'block.dispatched'>): Promise<EventBody> {
    const o = this.o;
    const s = this.state;
    const b = s.blocks.get(e.block)!;
    const worker = o.workers[e.role as WorkerRole];
    const base = { type: 'reply.received' as const, block: e.block, role: e.role, session: e.session, turn: e.turn };
    if (!worker) return { ...base, ok: false, failure: 'crash', detail: `no [workers.${e.role}] is configured` };
    // The review checkout and the diffstat are independent: made at once.
    const [cwd, diffstat] = await Promise.all([
      e.role === 'builder'
        ? git.worktreePath(o.repo, e.block)
        : e.role === 'reviewer'
          ? fx.serialWorktrees(() => git.createReviewCheckout(o.repo, { id: e.block, sha: e.sha ?? b.attested! }))
          : o.repo,
      e.kind === 'review' && b.base ? git.diffStat(o.repo, b.base, e.sha ?? b.attested!) : '',
    ]);
    const { name, vars } = promptVars(s, e, this.fx.blocks().get(e.block), { diffstat, history: this.log.events });
    const prompt = renderPrompt(name, vars, { role: e.role, phase: e.phase, expect: e.expect as never });
    this.transcript(`## ${e.block} · ${e.role} · ${e.session} · turn ${e.turn} · ${e.kind}\n\n### prompt\n\n${fence(prompt)}\n`);
    const phaseTime = o.spine.phases.find((p) => p.name === e.phase)?.timeMs ?? Infinity;
    const budget = Math.min(o.config.timeouts.turnMs, phaseTime);
    const live = this.state.liveness;
    // The adapter's own timeout is only a backstop: liveness decides before it fires.
    const backstop = budget + live.maxExtensions * live.extensionMs + (live.maxExtensions + 2) * live.probeWaitMs + 60_000;
    const controller = new AbortController();
    const key = `${e.session}#${e.turn}`;
    this.turns.set(key, { block: e.block, controller, startedAt: this.o.clock.now() });
    this.armTimer(e.session, e.turn, budget);
    const log = TurnLog.open(o.runDir, e);
    try {
      const outcome = await worker.runTurn(
        {
          role: e.role as WorkerRole,
          block: e.block,
          session: e.session,
          turn: e.turn,
          phase: e.phase,
          kind: e.kind,
          prompt,
          cwd,
          runDir: o.runDir,
          timeoutMs: backstop,
          signal: controller.signal,
          criteria: b.info.criteria,
          trunk: o.config.trunk,
          repo: o.repo,
          expect: e.expect,
        },
        this.observer(e, log),
      );
      const text = outcome.ok
        ? outcome.reply
        : `(turn failed: ${outcome.failure}) ${outcome.detail}${outcome.output ? `\n${outcome.output}` : ''}${outcome.stderr ? `\n(stderr)\n${outcome.stderr}` : ''}`;
      // A worker without a process printed nothing: its reply ends its log.
      if (!log.sawOutput) log.note(outcome.ok ? `reply:\n${outcome.reply}` : `turn failed: ${outcome.detail}`);
      this.transcript(`### reply (${e.block} · ${e.session} · turn ${e.turn})\n\n${fence(text)}\n`);
      if (outcome.ok) return { ...base, ok: true, reply: outcome.reply };
      return {
        ...base,
        ok: false,
        failure: outcome.failure,
        detail: outcome.detail,
        ...(outcome.cause ? { cause: outcome.cause } : {}),
        ...(outcome.output ? { stdout_tail: boundedTail(outcome.output) } : {}),
        ...(outcome.stderr ? { stderr_tail: boundedTail(outcome.stderr) } : {}),
      };
    } finally {
      log.close();
      clearTimeout(this.turns.get(key)?.timer);
      this.turns.delete(key);
    }
  }

  /** After `ms`, a still-running turn reports itself overrun (an input; decide takes it from there). */
  private armTimer(session: string, turn: number, ms: number): void {
    const t = this.turns.get(`${session}#${turn}`);
    if (!t) return;
    clearTimeout(t.timer);
    t.timer = setTimeout(() => {
      if (!this.turns.has(`${session}#${turn}`)) return;
      this.push({ type: 'timer.fired', block: t.block, session, turn, timer: 'overrun', elapsed_ms: this.o.clock.now() - t.startedAt });
    }, ms);
    t.timer.unref?.();
  }

  private stopTurns(which: (t: { block: string }, key: string) => boolean): void {
    for (const [key, t] of this.turns) {
      if (!which(t, key)) continue;
      clearTimeout(t.timer);
      t.controller.abort();
    }
  }

  /** Signs of life over the probe wait: process CPU and output, worktree changes, model or sim progress. */
  private async probe(e: EventOf<'worker.overran'>): Promise<EventBody> {
    const b = this.state.blocks.get(e.block)!;
    const role = b.waiting.on === 'turn' ? b.waiting.turn.role : 'builder';
    const worker = this.o.workers[role];
    const cwd =
      role === 'builder'
        ? git.worktreePath(this.o.repo, e.block)
        : role === 'reviewer'
          ? git.reviewPath(this.o.repo, e.block)
          : this.o.repo;
    const take = async (): Promise<LifeSnapshot> => {
      const proc = worker?.running?.(e.session);
      const progress = this.progress.get(e.session) ?? 0;
      if (proc) {
        const snap = await takeSnapshot({ pid: proc.pid, startTime: proc.startTime, outputBytes: proc.outputBytes + progress, cwd });
        return snap;
      }
      return { exists: this.turns.has(`${e.session}#${e.turn}`), cpuTicks: 0, outputBytes: progress, worktree: await worktreePrint(cwd) };
    };
    if (worker?.probe && role !== 'architect') {
      // Talk before you page: a conversational worker is asked, in-session, between its steps.
      const elapsed = formatDuration(Math.round(e.elapsed_ms / 1000) * 1000);
      worker.probe(e.session, renderPrompt('probe', { block: e.block, elapsed }, { role, phase: b.phase, expect: ['WORKING'] }));
    }
    const before = await take();
    await new Promise((r) => setTimeout(r, this.state.liveness.probeWaitMs));
    const after = await take();
    const { alive, signs } = signsOfLife(before, after);
    return { type: 'worker.probed', block: e.block, session: e.session, turn: e.turn, alive, signs };
  }

  /** The turn's observer: process facts and usage become events; output and notes go to its log and the reporter. */
  private observer(e: EventOf<'block.dispatched'>, log: TurnLog): TurnObserver {
    const at = { block: e.block, session: e.session };
    const where = { ...at, turn: e.turn };
    const tick = () => this.progress.set(e.session, (this.progress.get(e.session) ?? 0) + 1);
    return {
      progress: (note) => {
        tick();
        log.note(note);
        this.o.onOutput?.(where, note);
      },
      output: (_stream, chunk) => {
        log.output(chunk);
        this.o.onOutput?.(where, chunk.toString('utf8'));
      },
      spawned: (p) => void this.append({ type: 'worker.spawned', ...at, turn: e.turn, pid: p.pid, start_time: p.startTime }),
      exited: (p) => void this.append({ type: 'worker.exited', ...at, turn: e.turn, pid: p.pid, code: p.code, signal: p.signal }),
      usage: (u) => {
        tick();
        const cost = costOf(u, this.o.config.prices ?? {});
        // An input, through the queue: the fold keeps each block's and the run's spend.
        this.push({
          type: 'usage.recorded',
          ...at,
          role: e.role,
          turn: e.turn,
          model: u.model,
          input_tokens: u.inputTokens,
          cached_tokens: u.cachedTokens,
          output_tokens: u.outputTokens,
          ...(cost ? { cost_usd: cost.costUsd, priced_by: cost.by } : {}),
        });
      },
      retry: (r) =>
        void this.append({
          type: 'worker.retry',
          ...at,
          role: e.role,
          attempt: r.attempt,
          ...(r.status !== undefined ? { status: r.status } : {}),
          delay_ms: Math.round(r.delayMs),
          error: r.error,
        }),
    };
  }

  private transcript(text: string): void {
    appendFileSync(join(this.o.runDir, 'transcript.md'), `${text}\n`);
  }
}

/** The spine's liveness numbers with the config's overrides: what this run uses. */
export function livenessNumbers(spine: Spine, config: Config) {
  const l = { ...spine.liveness, ...config.liveness };
  return { probe_wait_ms: l.probeWaitMs, extension_ms: l.extensionMs, max_extensions: l.maxExtensions, reissues: l.reissues };
}

function infoOf(b: Block) {
  return { id: b.id, title: b.title, depends_on: b.dependsOn, priority: b.priority, criteria: b.criteria, digest: b.digest };
}

/** A Markdown fence longer than any backtick run inside `text`, so the text stays verbatim. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const f = '`'.repeat(longest + 1);
  return `${f}text\n${text}\n${f}`;
}

/** Writes the run directory's fixed files: manifest.json and the spine that drives the run. */
export function writeRunFiles(
  o: Pick<EngineOptions, 'runDir' | 'runId' | 'config' | 'spineFile'> & {
    trunkSha: string;
    startedAt: number;
    /** Which sandbox the run uses, and why none when `auto` found none. */
    sandbox?: { kind: Sandbox['kind']; why?: string };
  },
): void {
  mkdirSync(o.runDir, { recursive: true });
  copyFileSync(o.spineFile, join(o.runDir, 'workflow.toml'));
  const manifest = {
    tron: TRON_VERSION,
    run: o.runId,
    started_at: new Date(o.startedAt).toISOString(),
    trunk: o.config.trunk,
    trunk_sha: o.trunkSha,
    config: { ...o.config, workers: undefined },
    workers: o.config.workers,
    ...(o.sandbox
      ? { sandbox: { mode: o.config.sandbox.mode, used: o.sandbox.kind, ...(o.sandbox.why ? { why: o.sandbox.why } : {}) } }
      : {}),
    host: { hostname: hostname(), platform: process.platform, arch: process.arch, node: process.version },
  };
  writeFileSync(join(o.runDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}
