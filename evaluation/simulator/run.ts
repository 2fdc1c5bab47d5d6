/**
 * One simulated run: the pure decision step (engine/core/decide/) driven by a simulated
 * world that answers every decision the way the real effects could — chosen by the
 * schedule (choices.ts) — with crashes: the engine stopped between any two events (or in
 * the middle of writing a step's decisions) and started again from its log through the
 * real recovery planning (engine/core/recover.ts), fed the world's git. No I/O: a run is
 * a few thousand steps of plain computation.
 *
 * Every step is checked against the named invariants (invariants.ts); the first
 * violation ends the run and is returned with the step and the schedule that led to it.
 */
import { decide as realDecide, type DecideContext } from '../../engine/core/decide/decide.ts';
import { EVENT_VERSION, type BlockInfo, type EventBody, type EventOf, type TronEvent } from '../../engine/core/events.ts';
import { planRecovery as realPlan, recordsLanding } from '../../engine/core/recover.ts';
import { replay } from '../../engine/core/replay.ts';
import { type EngineState, initialState, TERMINAL } from '../../engine/core/state.ts';
import { loadSpine } from '../../engine/spine/load.ts';
import { Chooser, type Point } from './choices.ts';
import { Rng } from './prng.ts';
import { Git } from './world.ts';
import type { Coverage } from './coverage.ts';

export const CTX: DecideContext = { spine: loadSpine(), testCommand: 'npm test' };
const LIVE = CTX.spine.liveness;

/** The parts of the engine a run drives: the real ones, or planted mutations of them (mutations.ts). */
export interface Engine {
  decide: typeof realDecide;
  planRecovery: typeof realPlan;
}
export const REAL: Engine = { decide: realDecide, planRecovery: realPlan };

export interface Violation {
  invariant: string;
  message: string;
  /** The step (input fed) it was found at, counted over the whole run. */
  step: number;
}

export interface RunResult {
  seed: number;
  steps: number;
  crashes: number;
  violation?: Violation;
  /** The schedule drawn: replay it with `script` to reproduce the run. */
  choices: number[];
  points: string[];
  /** How the run ended: its last run.finished, the blocks git says landed, those abandoned. */
  reason?: string;
  landed: string[];
  abandoned: string[];
  /** Every block's phase at the end of the last start. */
  phases: Record<string, string>;
  /** Every log the run wrote, one per start. */
  logs: TronEvent[][];
  config: RunConfig;
}

export interface RunConfig {
  blocks: BlockInfo[];
  maxParallel: number;
  batch: number;
  verifyTrunk: boolean;
  gather: boolean;
  architect: boolean;
  budgets: { block_usd?: number; run_usd?: number };
  teammates: boolean;
}

export interface RunOptions {
  seed: number;
  /** A recorded schedule to follow instead of drawing one (a reproduction, or a shrink candidate). */
  script?: readonly number[];
  engine?: Engine;
  coverage?: Coverage;
  /** Crash at the start of this step, then continue nominally (the crash-convergence check). */
  crashAt?: number;
  /** From this step on, every choice is nominal and every page is answered. */
  nominalFrom?: number;
  /** No crash choices at all. */
  noCrashes?: boolean;
  maxSteps?: number;
}

const MAX_CRASHES = 2;
/** Starts after a run that ended waiting on the operator. */
const MAX_RESTARTS = 4;
const TURN_USD = 0.05;

type Item =
  | { kind: 'effect'; seq: number; run: number; d: TronEvent; stage: number; paused: boolean; hang: number; silent: boolean }
  | { kind: 'answer'; block: string; word: 'RETRY' | 'ABANDON'; after: number }
  | { kind: 'aborted'; d: EventOf<'block.dispatched'> };

export class Failure extends Error {
  constructor(
    readonly invariant: string,
    message: string,
  ) {
    super(message);
  }
}

/** Runs one simulated run to its end, or to its first violated invariant. */
export function simulate(o: RunOptions): RunResult {
  return new Sim(o).run();
}

class Sim {
  readonly c: Chooser;
  readonly engine: Engine;
  readonly git = new Git();
  readonly cfg: RunConfig;
  readonly cov: Coverage | undefined;
  state: EngineState = initialState();
  log: TronEvent[] = [];
  logs: TronEvent[][] = [];
  /** Where the current log's torn batch starts (its decisions were only partly written). */
  tornAt: number | undefined;
  items: Item[] = [];
  step = 0;
  crashes = 0;
  runNo = 0;
  ts = 1_000_000;
  /** Spend the engine's fold counts (per start), for the budget invariant. */
  spend = { run: 0, blocks: new Map<string, number>() };
  /** Blocks whose page the operator never answers (answered all the same once the world turns nominal). */
  unanswered = new Set<string>();
  /** Blocks the world has landed, in landing order. */
  landings: string[] = [];
  cap: number;
  /** The crash-convergence check's crash happened. */
  forced = false;
  restarts = 0;

  constructor(readonly o: RunOptions) {
    this.c = new Chooser(o.script ? undefined : new Rng(o.seed), o.script);
    this.engine = o.engine ?? REAL;
    this.cov = o.coverage;
    this.cap = o.maxSteps ?? 20_000;
    this.cfg = this.configure();
  }

  private pick<P extends Point>(p: P) {
    return this.c.pick(p);
  }

  private configure(): RunConfig {
    const n = Number(this.pick('blocks'));
    const blocks: BlockInfo[] = [];
    for (let i = 0; i < n; i += 1) {
      const dep = i === 0 ? 'none' : this.pick('dep');
      const depends_on = dep === 'previous' ? [`b${i - 1}`] : dep === 'earlier' ? [`b${this.c.amount('dep-on', i)}`] : [];
      blocks.push({ id: `b${i}`, title: `block ${i}`, depends_on, priority: 0, criteria: ['it works', 'it is tested'], digest: `d${i}` });
    }
    const budgets = this.pick('budgets');
    return {
      blocks,
      maxParallel: Number(this.pick('parallel')),
      batch: Number(this.pick('batch')),
      verifyTrunk: this.pick('verify') === 'yes',
      gather: this.pick('gather') === 'yes',
      architect: this.pick('has-architect') === 'yes',
      budgets: {
        ...(budgets === 'block' || budgets === 'both' ? { block_usd: 1 } : {}),
        ...(budgets === 'run' || budgets === 'both' ? { run_usd: 3 } : {}),
      },
      teammates: this.pick('teammates') === 'yes',
    };
  }

  run(): RunResult {
    let violation: Violation | undefined;
    try {
      this.start(undefined);
      this.loop();
      this.endOfLog();
    } catch (err) {
      if (!(err instanceof Failure)) throw err;
      violation = { invariant: err.invariant, message: err.message, step: this.step };
    }
    if (!this.logs.includes(this.log)) this.logs.push(this.log);
    this.cov?.merge(this.c.faults);
    const finished = this.log.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished');
    return {
      seed: this.o.seed,
      steps: this.step,
      crashes: this.crashes,
      ...(violation ? { violation } : {}),
      choices: this.c.values,
      points: this.c.points,
      ...(finished ? { reason: finished.reason } : {}),
      landed: [...this.git.landed.keys()].sort(),
      abandoned: this.state.order.filter((id) => this.state.blocks.get(id)!.phase === 'abandoned'),
      phases: Object.fromEntries(this.state.order.map((id) => [id, this.state.blocks.get(id)!.phase])),
      logs: this.logs,
      config: this.cfg,
    };
  }

  // ---- the engine: feeding inputs, appending decisions ----

  private feed(body: EventBody): EventBody[] {
    this.account(body);
    this.step += 1;
    this.ts += 1000;
    const input = { ...body, v: EVENT_VERSION, seq: this.log.length + 1, ts: this.ts } as TronEvent;
    this.log.push(input);
    const { state, decisions } = this.engine.decide(this.state, input, CTX);
    this.state = state;
    this.cov?.input(input);
    for (const d of decisions) {
      const e = { ...d, v: EVENT_VERSION, seq: this.log.length + 1, ts: this.ts } as TronEvent;
      this.log.push(e);
      this.cov?.decision(e);
      this.check(e);
    }
    return decisions;
  }

  /** After the decisions of one input are written: their effects start. */
  private perform(from: number): void {
    for (let i = from; i < this.log.length; i += 1) this.react(this.log[i]!);
  }

  private input(body: EventBody): void {
    this.feedAndPerform(body, () => {});
  }

  private feedAndPerform(body: EventBody, then: () => void): void {
    const at = this.log.length + 1;
    this.feed(body);
    this.perform(at);
    then();
    this.checkStall();
  }

  /** A start: run.started, the register, recovery from the previous log and from git. */
  private start(previous: TronEvent[] | undefined): void {
    this.runNo += 1;
    this.state = initialState();
    this.log = [];
    this.tornAt = undefined;
    this.spend = { run: 0, blocks: new Map() };
    const cfg = this.cfg;
    this.feed({
      type: 'run.started',
      run: `sim-${this.runNo}`,
      version: '0',
      trunk: 'main',
      trunk_sha: this.git.trunk,
      main_status: '',
      max_parallel: cfg.maxParallel,
      architect: cfg.architect,
      liveness: {
        probe_wait_ms: LIVE.probeWaitMs,
        extension_ms: LIVE.extensionMs,
        max_extensions: LIVE.maxExtensions,
        reissues: LIVE.reissues,
      },
      watch: false,
      pid: this.runNo,
      budgets: cfg.budgets,
      merge: { batch: cfg.batch, verify_trunk: cfg.verifyTrunk, gather: cfg.gather },
    });
    this.feed({ type: 'register.loaded', blocks: cfg.blocks });
    const boot: EventBody[] = [{ type: 'recovery.started', previous: previous ? `sim-${this.runNo - 1}` : null, torn: false }];
    if (previous) {
      const older = this.logs.slice(0, -1);
      const plan = this.engine.planRecovery(previous, cfg.blocks, {
        landedRefs: this.git.landed,
        onTrunk: this.git.onTrunk,
        trunk: 'main',
        olderRecords: (id, sha) => older.some((l) => recordsLanding(l, id, sha)),
      });
      for (const u of plan.untrusted) {
        this.git.landed.delete(u.block);
        boot.push({ type: 'landed.untrusted', ...u, kept: `refs/tron/untrusted/${u.block}-1` });
      }
      for (const r of plan.recovered) {
        if ((r.phase === 'review' || r.phase === 'merge') && this.git.worktrees.has(r.block)) {
          this.git.worktrees.set(r.block, { dirty: false });
        }
        boot.push(r);
      }
    }
    for (const b of boot) this.feed(b);
    // Answers waiting in the inbox are read before dispatching starts.
    const waiting = this.items.filter((x): x is Extract<Item, { kind: 'answer' }> => x.kind === 'answer' && x.after <= this.step);
    this.items = this.items.filter((x) => !waiting.includes(x as never));
    for (const a of waiting) this.feed(this.execute(a)[0]!);
    this.feed({ type: 'recovery.finished', answers: waiting.length });
    this.perform(1);
    this.checkStall();
  }

  // ---- the world's main loop ----

  private loop(): void {
    for (;;) {
      if (this.state.finished) {
        // A run that ended waiting on the operator, whose answers are on their way: the
        // operator answers and starts tron again (the answers are read at that start).
        const f = this.log.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished');
        if (f?.reason !== 'done' || f.exit !== 3 || !this.items.some((x) => x.kind === 'answer') || this.restarts >= MAX_RESTARTS) return;
        this.restarts += 1;
        this.cov?.fault('world:start-again');
        const late = this.items.filter((x): x is Extract<Item, { kind: 'answer' }> => x.kind === 'answer');
        this.step = Math.max(this.step, Math.min(...late.map((x) => x.after)));
        this.endOfLog();
        this.logs.push(this.log);
        this.start(this.log);
        continue;
      }
      if (this.step >= this.cap) throw new Failure('terminates', `the run did not finish within ${this.cap} steps`);
      if (this.o.nominalFrom !== undefined && this.step >= this.o.nominalFrom && !this.c.nominal) this.turnNominal();
      if (this.o.crashAt !== undefined && this.step >= this.o.crashAt && !this.forced) {
        this.forced = true;
        this.crash('forced');
        continue;
      }
      const crash = this.o.noCrashes || this.crashes >= MAX_CRASHES ? 'none' : this.pick('crash');
      if (crash === 'before-effect') {
        this.crash(crash);
        continue;
      }
      const external = this.pick('external');
      if (external === 'teammate-push' && this.cfg.teammates) {
        this.teammatePush();
        continue;
      }
      if (external === 'signal' && this.state.stopping === undefined) {
        // As the engine's stop(): the signal is an input, and every running turn is stopped.
        this.feedAndPerform({ type: 'run.stopping', signal: 'SIGTERM' }, () => this.abort(() => true));
        continue;
      }
      if (external === 'effect-fails') {
        this.input({ type: 'run.failed', detail: 'an effect failed (simulated)', after: 'an effect' });
        continue;
      }
      const ready = this.items.filter((x) => !(x.kind === 'effect' && x.paused) && !(x.kind === 'answer' && x.after > this.step));
      if (ready.length === 0) {
        // Only late answers remain: the world waits for them.
        const late = this.items.filter((x) => x.kind === 'answer');
        if (late.length > 0) {
          this.step = Math.max(this.step, Math.min(...late.map((x) => (x as { after: number }).after)));
          continue;
        }
        throw new Failure('no-silent-stall', `nothing is pending in the world and the run has not finished\n${this.describe()}`);
      }
      const item = ready[this.c.index('next', ready.length)]!;
      this.items.splice(this.items.indexOf(item), 1);
      const inputs = this.execute(item);
      if (crash === 'after-effect') {
        this.crash(crash);
        continue;
      }
      if (crash === 'torn-write' && inputs.length > 0) {
        const at = this.log.length;
        const decisions = this.feed(inputs[0]!);
        const kept = this.c.amount('torn-kept', decisions.length + 1);
        this.log.length = at + 1 + kept;
        this.tornAt = at;
        this.crash(crash);
        continue;
      }
      for (const body of inputs) {
        if (this.state.finished) break;
        this.input(body);
      }
    }
  }

  private turnNominal(): void {
    this.c.nominal = true;
    // Turns under way go on nominally too: what they were going to answer was never seen
    // by the engine, and a crash would have killed them (the convergence pair must share only what was seen).
    for (const x of this.items) {
      if (x.kind !== 'effect' || x.d.type !== 'block.dispatched' || x.stage === 0) continue;
      const kind = x.d.kind === 'restate' ? x.d.restating! : x.d.kind;
      (x as { outcome?: string }).outcome = nominalOf(kind);
      x.hang = 0;
      x.silent = false;
    }
    for (const block of this.unanswered) this.items.push({ kind: 'answer', block, word: 'RETRY', after: 0 });
    this.unanswered.clear();
  }

  /** The engine dies: its processes with it; git, the inbox and the log stay. */
  private crash(kind: string): void {
    this.crashes += 1;
    this.cov?.fault(`crash:${kind}`);
    this.endOfLog();
    const previous = this.log;
    this.logs.push(previous);
    this.items = this.items.filter((x) => x.kind === 'answer');
    this.start(previous);
  }

  /** The recorded log replays to the same decisions (up to a torn batch, which no replay reads whole). */
  private endOfLog(): void {
    const events = this.tornAt === undefined ? this.log : this.log.slice(0, this.tornAt);
    const r = replay(events, CTX, this.engine.decide);
    if (!r.ok) {
      const d = r.divergence;
      throw new Failure(
        'replays',
        `start ${this.runNo}: replay diverged at seq ${d.seq} (input ${d.input.type}): recorded ${JSON.stringify(d.recorded)}, derived ${JSON.stringify(d.derived)}`,
      );
    }
  }

  private teammatePush(): void {
    const sha = this.git.commit({ parent: this.git.trunk, patch: 'teammate', bad: false, engine: false });
    this.linear(sha, 'a teammate');
    this.git.moveTrunk(sha);
    this.cov?.fault('world:teammate-push');
  }

  // ---- decisions → effects ----

  private react(d: TronEvent): void {
    const effect = (): void => {
      this.items.push({ kind: 'effect', seq: d.seq, run: this.runNo, d, stage: 0, paused: false, hang: 0, silent: false });
    };
    switch (d.type) {
      case 'worktree.requested':
      case 'block.dispatched':
      case 'facts.requested':
      case 'lane.stacked':
      case 'candidate.requested':
      case 'bisect.step':
      case 'land.intent':
      case 'test.requested':
      case 'wrap.requested':
      case 'worker.overran':
        return effect();
      case 'escalation.raised':
        if (d.handler === 'operator') effect();
        return;
      case 'block.parked':
      case 'block.abandoned':
        return this.abort((t) => t.block === d.block);
      case 'budget.exceeded':
        if (d.scope === 'run') this.abort(() => true);
        return;
      case 'turn.reissued':
        return this.abort((t) => t.session === d.session && t.turn === d.turn);
      case 'worker.extended': {
        const t = this.turnItem(d.session, d.turn);
        if (t) {
          t.paused = false;
          t.hang -= 1;
        }
        return;
      }
      case 'run.finished':
        return;
      default:
        return;
    }
  }

  private turnItem(session: string, turn: number) {
    return this.items.find(
      (x): x is Extract<Item, { kind: 'effect' }> =>
        x.kind === 'effect' && x.d.type === 'block.dispatched' && x.d.session === session && x.d.turn === turn,
    );
  }

  /** Stops running turns: each reports back as aborted. */
  private abort(which: (t: EventOf<'block.dispatched'>) => boolean): void {
    const aborted: Item[] = [];
    this.items = this.items.filter((x) => {
      if (x.kind !== 'effect' || x.d.type !== 'block.dispatched' || !which(x.d)) return true;
      aborted.push({ kind: 'aborted', d: x.d });
      return false;
    });
    this.items.push(...aborted);
  }

  // ---- the world answers ----

  private execute(item: Item): EventBody[] {
    if (item.kind === 'answer') {
      return [
        {
          type: 'operator.answered',
          block: item.block,
          word: item.word,
          payload: item.word === 'RETRY' ? { guidance: 'try again' } : { reason: 'not worth it' },
          file: `answer-${this.step}.json`,
          trunk_sha: this.git.trunk,
          written_at: this.ts,
        },
      ];
    }
    if (item.kind === 'aborted') {
      const d = item.d;
      return [
        {
          type: 'reply.received',
          block: d.block,
          role: d.role,
          session: d.session,
          turn: d.turn,
          ok: false,
          failure: 'aborted',
          detail: 'stopped',
        },
      ];
    }
    // no-effect-without-intent: the decision that asked for this effect is in the log.
    const logged = item.run === this.runNo ? this.log[item.seq - 1] : undefined;
    if (logged !== item.d) {
      throw new Failure('intent-before-effect', `an effect of ${item.d.type} (seq ${item.seq}) started with no intent in the current log`);
    }
    const d = item.d;
    switch (d.type) {
      case 'worktree.requested':
        return [this.worktree(d)];
      case 'block.dispatched':
        return this.turn(item, d);
      case 'facts.requested':
        return [this.facts(d)];
      case 'lane.stacked':
        return [this.rebase(d)];
      case 'candidate.requested':
      case 'bisect.step':
        return [this.testCandidate(d)];
      case 'land.intent':
        return this.land(d);
      case 'test.requested': {
        const run = this.testRun(d.sha);
        return [{ type: 'trunk.tested', block: d.block, sha: d.sha, ok: run.exit === 0, tests: run }];
      }
      case 'wrap.requested':
        this.git.worktrees.delete(d.block);
        this.git.branches.delete(d.block);
        return [{ type: 'block.wrapped', block: d.block, summary: d.summary }];
      case 'escalation.raised': {
        const how = this.pick('operator');
        const word = this.pick('answer');
        if (how === 'never') this.unanswered.add(d.block);
        else
          this.items.push({
            kind: 'answer',
            block: d.block,
            word,
            after: how === 'late' ? this.step + 20 + this.c.amount('delay', 200) : 0,
          });
        return [{ type: 'page.sent', block: d.block, page: `page-${this.step}`, reason: d.detail }];
      }
      case 'worker.overran': {
        const t = this.turnItem(d.session, d.turn);
        const alive = t !== undefined && !t.silent;
        return [{ type: 'worker.probed', block: d.block, session: d.session, turn: d.turn, alive, signs: alive ? ['output'] : [] }];
      }
      default:
        throw new Error(`no effect for ${d.type}`);
    }
  }

  private worktree(d: EventOf<'worktree.requested'>): EventBody {
    const old = this.git.branches.get(d.block);
    const orphan = old !== undefined && !this.git.onTrunk.has(old) ? `orphan/${d.block}-${d.attempt}` : undefined;
    this.git.branches.set(d.block, d.base);
    this.git.worktrees.set(d.block, { dirty: false });
    return {
      type: 'worktree.ready',
      block: d.block,
      attempt: d.attempt,
      base: d.base,
      path: `.tron/worktrees/${d.block}`,
      ...(orphan ? { orphan } : {}),
    };
  }

  private turn(item: Extract<Item, { kind: 'effect' }>, d: EventOf<'block.dispatched'>): EventBody[] {
    const kind = d.kind === 'restate' ? d.restating! : d.kind;
    if (item.stage === 0) {
      item.stage = 1;
      // How this turn will go is chosen when it first runs.
      const restated = d.kind === 'restate' ? this.pick('restate') : undefined;
      const outcome =
        restated === undefined
          ? this.outcomeOf(kind)
          : restated === 'restated'
            ? nominalOf(kind)
            : restated === 'fails'
              ? 'fails'
              : 'garbage';
      (item as { outcome?: string }).outcome = outcome;
      if (outcome === 'hangs') item.hang = 1 + this.c.amount('hang-length', LIVE.maxExtensions + 1);
      if (outcome === 'silent') item.silent = true;
      const spends = this.cfg.budgets.block_usd !== undefined || this.cfg.budgets.run_usd !== undefined;
      if (spends) {
        this.items.push(item);
        const usd = outcome === 'overspends' ? 5 : TURN_USD;
        return [
          {
            type: 'usage.recorded',
            block: d.block,
            role: d.role,
            session: d.session,
            turn: d.turn,
            model: 'sim',
            input_tokens: 1000,
            cached_tokens: 0,
            output_tokens: 100,
            cost_usd: usd,
          },
        ];
      }
    }
    if (item.hang > 0 || item.silent) {
      item.paused = true;
      this.items.push(item);
      return [{ type: 'timer.fired', block: d.block, session: d.session, turn: d.turn, timer: 'overrun', elapsed_ms: 3_600_000 }];
    }
    return [this.reply(d, kind, (item as { outcome?: string }).outcome!)];
  }

  private outcomeOf(kind: string): string {
    switch (kind) {
      case 'build':
        return this.pick('build');
      case 'challenge':
        return this.pick('challenge');
      case 'review':
        return this.pick('review');
      case 'merge':
        return this.pick('merge');
      case 'architect':
        return this.pick('architect');
      default:
        return nominalOf(kind);
    }
  }

  private reply(d: EventOf<'block.dispatched'>, kind: string, outcome: string): EventBody {
    const base = { type: 'reply.received' as const, block: d.block, role: d.role, session: d.session, turn: d.turn };
    const ok = (reply: string): EventBody => ({ ...base, ok: true, reply: `Working on it.\n${reply}\n` });
    const git = this.git;
    const head = git.branches.get(d.block) ?? git.trunk;
    const work = (bad: boolean, engine: boolean) => {
      const sha = git.commit({ parent: head, patch: `patch-${d.block}-${this.step}`, bad, engine });
      git.branches.set(d.block, sha);
    };
    if (kind === 'build') git.worktrees.set(d.block, { dirty: false });
    if (outcome === 'overspends' || outcome === 'hangs' || outcome === 'silent') outcome = nominalOf(kind);
    switch (outcome) {
      case 'done':
        if (kind === 'build') {
          work(false, false);
          return ok('>>DONE {"summary":"did it"}');
        }
        return ok(nominalReply(kind));
      case 'done-red-tests':
        work(true, false);
        return ok('>>DONE {"summary":"did it"}');
      case 'done-no-commits':
        return ok('>>DONE');
      case 'done-uncommitted':
        git.worktrees.set(d.block, { dirty: true });
        return ok('>>DONE');
      case 'done-engine-files':
        work(false, true);
        return ok('>>DONE');
      case 'blocked':
        return ok('>>BLOCKED {"reason":"the API key is missing"}');
      case 'garbage':
        return ok('I believe this is finished now.');
      case 'two-lines':
        return ok('>>DONE\n>>BLOCKED {"reason":"or not"}');
      case 'illegal-word':
        return ok('>>APPROVE');
      case 'fails':
        return { ...base, ok: false, failure: 'exit', detail: 'exited 1: Segmentation fault' };
      case 'fails-auth':
        return { ...base, ok: false, failure: 'exit', detail: 'Not logged in · Please run /login', cause: 'auth' };
      case 'no-evidence':
        return ok('>>CONFIRMED {"evidence":{"c1":"see the test"}}');
      case 'changes':
        return ok('>>CHANGES {"notes":"name things better"}');
      case 'merged-without-rebase':
        return ok('>>MERGED');
      case 'page':
        return ok('>>PAGE {"reason":"a person should look"}');
      case 'abandon':
        return ok('>>ABANDON {"reason":"cannot be done"}');
      default:
        if (kind === 'merge') {
          const sha = git.commit({ parent: git.trunk, patch: git.commits.get(head)?.patch ?? 'merged', bad: false, engine: false });
          git.branches.set(d.block, sha);
        }
        return ok(nominalReply(kind));
    }
  }

  private testRun(sha: string): EventOf<'trunk.tested'>['tests'] {
    const how = this.pick('test');
    const green = this.git.greenTree(sha) && how === 'as-tree';
    if (green) this.git.green.add(sha);
    if (how === 'timeout') return { exit: null, timed_out: true, log: 'tests.log', tail: 'killed after 10m' };
    return { exit: green ? 0 : 1, timed_out: false, log: 'tests.log', tail: green ? 'ok' : 'not ok 1 - it works' };
  }

  private facts(d: EventOf<'facts.requested'>): EventBody {
    const git = this.git;
    const head = git.branches.get(d.block) ?? d.base;
    const wt = git.worktrees.get(d.block);
    const tests = this.testRun(head);
    return {
      type: 'facts.observed',
      block: d.block,
      purpose: d.purpose,
      base: d.base,
      head,
      commits: git.commitsOver(d.base, head),
      trunk_sha: git.trunk,
      main_status: '',
      clean: !wt?.dirty,
      status: wt?.dirty ? ' M src/half-done.js' : '',
      tests,
      patch_id: head === d.base ? '' : git.commits.get(head)!.patch,
      fast_forward: git.isAncestor(git.trunk, head),
      engine_diff: git.touchesEngine(head) ? ['M .tron/config.toml'] : [],
    };
  }

  private rebase(d: EventOf<'lane.stacked'>): EventBody {
    const git = this.git;
    if (git.trunk !== d.trunk_sha) return { type: 'rebase.done', stack: d.stack, trunk_sha: git.trunk, results: [] };
    let top = d.trunk_sha;
    const results: EventOf<'rebase.done'>['results'] = [];
    for (const b of d.blocks) {
      const own = git.commits.get(b.sha)!;
      if (git.isAncestor(top, b.sha)) {
        results.push({ block: b.block, outcome: 'fast_forward', onto: top, sha: b.sha, patch_before: own.patch, patch_after: own.patch });
        top = b.sha;
        continue;
      }
      const how = this.pick('rebase');
      if (how === 'conflict') {
        results.push({ block: b.block, outcome: 'conflict', onto: top, patch_before: own.patch, files: ['src/shared.js'] });
        continue;
      }
      const patch = how === 'changed' ? `${own.patch}'` : own.patch;
      const sha = git.commit({
        parent: top,
        patch,
        bad: !git.greenTree(b.sha) || how === 'red-in-stack',
        engine: git.touchesEngine(b.sha),
      });
      results.push({
        block: b.block,
        outcome: how === 'changed' ? 'changed' : 'clean',
        onto: top,
        sha,
        patch_before: own.patch,
        patch_after: patch,
      });
      if (how !== 'changed') top = sha;
    }
    return { type: 'rebase.done', stack: d.stack, trunk_sha: git.trunk, results };
  }

  private testCandidate(d: EventOf<'candidate.requested' | 'bisect.step'>): EventBody {
    const tests = this.testRun(d.sha);
    return { type: 'candidate.tested', stack: d.stack, sha: d.sha, blocks: d.blocks, ok: tests.exit === 0, tests };
  }

  /** The one ref transaction, compare-and-swap on trunk; git refuses a landed ref that exists. */
  private land(d: EventOf<'land.intent'>): EventBody[] {
    const git = this.git;
    const ids = d.blocks.map((b) => b.block);
    if (git.trunk !== d.from)
      return [{ type: 'land.refused', stack: d.stack, blocks: ids, actual: git.trunk, detail: `trunk is at ${git.trunk}, not ${d.from}` }];
    if (ids.some((id) => git.landed.has(id))) {
      return [
        {
          type: 'land.refused',
          stack: d.stack,
          blocks: ids,
          actual: git.trunk,
          detail: `a landed ref of ${ids.join(', ')} already exists`,
        },
      ];
    }
    // trunk-tested-green, trunk-linear, no-landing-past-dependency: checked as trunk moves.
    if (!git.green.has(d.sha)) {
      throw new Failure(
        'trunk-tested-green',
        `trunk moved to ${d.sha.slice(-8)} (${ids.join(', ')}, tested: ${d.tested}), which no test run found green`,
      );
    }
    this.linear(d.sha, 'the engine');
    for (const [i, id] of ids.entries()) {
      const info = this.cfg.blocks.find((b) => b.id === id)!;
      for (const dep of info.depends_on) {
        if (git.landed.has(dep) || ids.slice(0, i).includes(dep)) continue;
        const phase = this.state.blocks.get(dep)?.phase ?? '?';
        throw new Failure('no-landing-past-dependency', `${id} landed while its dependency ${dep} had not (it is ${phase})`);
      }
    }
    git.moveTrunk(d.sha);
    for (const b of d.blocks) {
      git.landed.set(b.block, b.sha);
      git.branches.set(b.block, b.sha);
      this.landings.push(b.block);
    }
    return d.blocks.map((b) => ({ type: 'block.landed', block: b.block, sha: b.sha, from: d.from, top: d.sha }));
  }

  private linear(to: string, by: string): void {
    if (!this.git.isAncestor(this.git.trunk, to)) {
      throw new Failure(
        'trunk-linear',
        `${by} moved trunk from ${this.git.trunk.slice(-8)} to ${to.slice(-8)}, which does not descend from it`,
      );
    }
  }

  // ---- invariants over decisions and states ----

  private check(e: TronEvent): void {
    switch (e.type) {
      case 'land.intent':
        for (const b of e.blocks) {
          if (this.git.landed.has(b.block) || this.landings.includes(b.block)) {
            throw new Failure(
              'lands-once',
              `land.intent (seq ${e.seq}) lands ${b.block} again: git already has refs/tron/landed/${b.block}`,
            );
          }
        }
        return;
      case 'block.dispatched': {
        const { block_usd, run_usd } = this.cfg.budgets;
        const spent = this.spend.blocks.get(e.block) ?? 0;
        if (block_usd !== undefined && spent > block_usd + 1e-9) {
          throw new Failure(
            'spend-within-budget',
            `${e.block} was given a new turn with $${spent.toFixed(2)} spent, past block_usd = ${block_usd}`,
          );
        }
        if (run_usd !== undefined && this.spend.run > run_usd + 1e-9) {
          throw new Failure(
            'spend-within-budget',
            `a new turn started with $${this.spend.run.toFixed(2)} spent by the run, past run_usd = ${run_usd}`,
          );
        }
        return;
      }
      default:
        return;
    }
  }

  /** Folds what the budget invariant needs from an input. */
  private account(e: EventBody): void {
    if (e.type === 'usage.recorded') {
      this.spend.run += e.cost_usd ?? 0;
      this.spend.blocks.set(e.block, (this.spend.blocks.get(e.block) ?? 0) + (e.cost_usd ?? 0));
    } else if (e.type === 'operator.answered') this.spend.blocks.set(e.block, 0);
  }

  /** Every block is landed, parked or abandoned, or something in the world will move it. */
  private checkStall(): void {
    const s = this.state;
    if (s.finished) {
      const f = this.log.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished')!;
      if (f.reason !== 'done') return;
      for (const id of s.order) {
        const b = s.blocks.get(id)!;
        if (TERMINAL.has(b.phase) || b.phase === 'parked' || b.phase === 'pending' || b.waiting.on === 'worker' || b.waiting.on === 'lane')
          continue;
        throw new Failure('no-silent-stall', `the run finished with ${id} in ${b.phase}, waiting on ${b.waiting.on}`);
      }
      return;
    }
    if (!s.registered) return;
    for (const id of s.order) {
      const b = s.blocks.get(id)!;
      const w = b.waiting;
      const has = (type: string) => this.items.some((x) => x.kind === 'effect' && x.d.type === type && 'block' in x.d && x.d.block === id);
      const missing =
        (w.on === 'turn' &&
          !this.turnItem(w.turn.session, w.turn.turn) &&
          !this.items.some((x) => x.kind === 'aborted' && x.d.block === id)) ||
        (w.on === 'worktree' && !has('worktree.requested')) ||
        (w.on === 'facts' && !has('facts.requested')) ||
        (w.on === 'wrap' && !has('wrap.requested'));
      if (missing)
        throw new Failure('no-silent-stall', `${id} waits on ${w.on} and nothing in the world will answer it\n${this.describe()}`);
    }
  }

  describe(): string {
    const s = this.state;
    const blocks = s.order.map((id) => `${id}: ${s.blocks.get(id)!.phase}/${s.blocks.get(id)!.waiting.on}`).join(', ');
    const items = this.items.map((x) => (x.kind === 'effect' ? `${x.d.type}${x.paused ? '(paused)' : ''}` : x.kind)).join(', ');
    return `  blocks: ${blocks}\n  lane: queue [${s.lane.queue.join(', ')}], stack ${s.lane.stack ? s.lane.stack.id : 'none'}\n  pending: ${items || 'nothing'}`;
  }
}

function nominalOf(kind: string): string {
  return kind === 'build' ? 'done' : 'nominal';
}

function nominalReply(kind: string): string {
  switch (kind) {
    case 'challenge':
      return '>>CONFIRMED {"evidence":{"c1":"test/works.test.js passes","c2":"test/works.test.js covers it"}}';
    case 'review':
      return '>>APPROVE';
    case 'merge':
      return '>>MERGED';
    case 'architect':
      return '>>RETRY {"guidance":"start again from trunk"}';
    default:
      return '>>DONE {"summary":"did it"}';
  }
}
