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
import { decide as realDecide } from '../../engine/core/decide/decide.ts';
import { EVENT_VERSION, type BlockInfo, type EventBody, type EventOf, type TronEvent } from '../../engine/core/events.ts';
import { planRecovery as realPlan, recordedLandings, recordsLanding } from '../../engine/core/recover.ts';
import { openLanding } from '../../engine/runtime/remote-recovery.ts';
import { replay } from '../../engine/core/replay.ts';
import { apply, type EngineState, initialState } from '../../engine/core/state.ts';
import { Chooser, type Point } from './choices.ts';
import { Rng } from './prng.ts';
import { Git } from './world.ts';
import { CTX, type Item, type RunConfig, type SimWorld } from './sim.ts';

export { CTX, type Item, type RunConfig } from './sim.ts';
import type { Coverage } from './coverage.ts';
import { execute, landLocally, nominalOf } from './answers.ts';
import { isDecision, REACTIONS } from './reactions.ts';
import { account, check, checkStall, describe, Failure, linear } from './invariants.ts';
import { ClusterWorld, type ClusterRules, clusterRun, Database, type Leader, NEIGHBOUR, OURS, RULES } from './cluster.ts';

const LIVE = CTX.spine.liveness;

/** The parts of the engine a run drives: the real ones, or planted mutations of them (mutations.ts). */
export interface Engine {
  decide: typeof realDecide;
  planRecovery: typeof realPlan;
  /** What the database and the processes around the engine do, in a cluster run (cluster.ts RULES): a planted bug reverts one. */
  cluster?: Partial<ClusterRules>;
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
  /** Run on the cluster (cluster.ts) or not, whatever the seed says. */
  cluster?: boolean;
  /** The other repository's engine on a cluster run's database: the schedule and the database it shares, and its name. */
  shared?: { chooser: Chooser; db: Database; repository: string };
  maxSteps?: number;
}

const MAX_CRASHES = 2;
/** The run's [remote], when it has one: two more tries of a push, after 100 ms then 200 ms. */
const REMOTE = { name: 'origin', url: 'git://127.0.0.1/sim.git', push_branches: false, retries: 2, backoff_ms: 100 };
/** The run's [forge] in PR mode: two required checks, asked again twice before a missing one pages. */
const FORGE = { repo: 'sim/sim', land: 'pr' as const, required_checks: ['ci', 'lint'], retries: 2, backoff_ms: 1000 };
/** Starts after a run that ended waiting on the operator. */
const MAX_RESTARTS = 4;

/**
 * The engine's parts as a run drives them: a throw from the decision step or the recovery
 * planning — an input the spine has no transition for, a log it cannot read — breaks
 * `decides-every-input`, and is found, shrunk and written like any other violation rather
 * than ending the search as an error of the tool.
 */
function guarded(e: Engine): Engine {
  const threw = (what: string, err: unknown): Failure =>
    err instanceof Failure ? err : new Failure('decides-every-input', `${what} threw: ${err instanceof Error ? err.message : String(err)}`);
  return {
    decide: (state, input, ctx) => {
      try {
        return e.decide(state, input, ctx);
      } catch (err) {
        throw threw(`the decision step, on ${input.type} (seq ${input.seq}),`, err);
      }
    },
    planRecovery: (events, blocks, world) => {
      try {
        return e.planRecovery(events, blocks, world);
      } catch (err) {
        throw threw(`the recovery planning, on a log of ${events.length} events,`, err);
      }
    },
    ...(e.cluster ? { cluster: e.cluster } : {}),
  };
}

/** Runs one simulated run to its end, or to its first violated invariant. */
export function simulate(o: RunOptions): RunResult {
  return new Sim(o).run();
}

export class Sim implements SimWorld, Leader {
  readonly c: Chooser;
  readonly engine: Engine;
  readonly git = new Git();
  readonly cfg: RunConfig;
  readonly cov: Coverage | undefined;
  /** The database, agents, standbys and the other repository, in a cluster run. */
  readonly cluster: ClusterWorld | undefined;
  /** The other repository's engine on the same database (cluster runs): stepped between ours, from the same schedule. */
  readonly neighbour: Sim | undefined;
  state: EngineState = initialState();
  /** The engine's state before the input being decided on: what `around` folds a decision onto. */
  private before: EngineState = initialState();
  /** Where in the log the input being decided on is. */
  private decidingFrom = 0;
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
  /** The patch each block's reviewer last approved (the world's memory: it outlives a crash). */
  approved = new Map<string, string>();
  cap: number;
  /** The crash-convergence check's crash happened. */
  forced = false;
  restarts = 0;

  constructor(readonly o: RunOptions) {
    this.c = o.shared?.chooser ?? new Chooser(o.script ? undefined : new Rng(o.seed), o.script);
    this.engine = guarded(o.engine ?? REAL);
    this.cov = o.coverage;
    this.cap = o.maxSteps ?? 20_000;
    const db = o.shared?.db ?? ((o.cluster ?? clusterRun(o.seed)) ? new Database({ ...RULES, ...this.engine.cluster }) : undefined);
    const cluster = db ? new ClusterWorld(this, db, o.shared?.repository ?? OURS, this, o.seed) : undefined;
    this.cluster = cluster;
    this.cfg = { ...this.configure(), ...(cluster ? { cluster: { standbys: cluster.standbys } } : {}) };
    // The other repository: an engine of its own on the same database, its run drawn from the same schedule.
    this.neighbour =
      db && !o.shared
        ? new Sim({
            seed: o.seed,
            ...(o.engine ? { engine: o.engine } : {}),
            ...(o.coverage ? { coverage: o.coverage } : {}),
            maxSteps: this.cap,
            shared: { chooser: this.c, db, repository: NEIGHBOUR },
          })
        : undefined;
    if (this.cfg.remote) this.git.remote = { trunk: this.git.trunk, landed: new Map() };
    if (this.cfg.pr) this.git.forge = { pulls: new Map(), green: new Set(), missing: new Map(), changes: new Map(), next: 1 };
  }

  pick<P extends Point>(p: P) {
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
    // (Drawn in this order: a recorded schedule's positions depend on it.)
    const maxParallel = Number(this.pick('parallel'));
    const batch = Number(this.pick('batch'));
    const verifyTrunk = this.pick('verify') === 'yes';
    const gather = this.pick('gather') === 'yes';
    const architect = this.pick('has-architect') === 'yes';
    const others = this.pick('teammates');
    const remote = others === 'remote' || others === 'remote-and-teammates';
    // Drawn last, and only with a remote: schedules recorded before PR mode replay the same runs.
    const forge = remote ? this.pick('forge') : 'push';
    return {
      blocks,
      maxParallel,
      batch,
      verifyTrunk,
      gather,
      speculate: gather && this.o.seed % 2 === 0,
      architect,
      budgets: {
        ...(budgets === 'block' || budgets === 'both' ? { block_usd: 1 } : {}),
        ...(budgets === 'run' || budgets === 'both' ? { run_usd: 3 } : {}),
      },
      teammates: others === 'yes' || others === 'remote-and-teammates',
      remote,
      ...(forge === 'push' ? {} : { pr: { approval: forge === 'pr-approval' } }),
    };
  }

  run(): RunResult {
    let violation: Violation | undefined;
    try {
      this.start(undefined);
      this.neighbour?.start(undefined);
      this.loop();
      this.endOfLog();
      this.neighbour?.endOfLog();
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
    this.cluster?.checkFed(body);
    account(this, body);
    this.step += 1;
    this.ts += 1000;
    const input = { ...body, v: EVENT_VERSION, seq: this.log.length + 1, ts: this.ts } as TronEvent;
    this.log.push(input);
    this.before = this.state;
    this.decidingFrom = this.log.length - 1;
    const { state, decisions } = this.engine.decide(this.state, input, CTX);
    this.state = state;
    this.cov?.input(input);
    for (const d of decisions) {
      const e = { ...d, v: EVENT_VERSION, seq: this.log.length + 1, ts: this.ts } as TronEvent;
      this.log.push(e);
      this.cov?.decision(e);
      check(this, e);
      this.cluster?.committed(e);
    }
    return decisions;
  }

  /** The state before the input being decided on, and the log folded from it through its decision `d`. */
  around(d: TronEvent): { before: EngineState; at: EngineState } {
    let at = this.before;
    for (const e of this.log.slice(this.decidingFrom, d.seq)) at = apply(at, e);
    return { before: this.before, at };
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
    checkStall(this);
  }

  /** A start: run.started, the register, recovery from the previous log and from git. */
  start(previous: TronEvent[] | undefined): void {
    this.runNo += 1;
    // A cluster's start takes the lease first: the next generation (the jobs of earlier ones dropped).
    if (this.cluster) this.items.push(...this.cluster.takeLease());
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
      merge: { batch: cfg.batch, verify_trunk: cfg.verifyTrunk, gather: cfg.gather, speculate: cfg.speculate },
      ...(cfg.remote ? { remote: REMOTE } : {}),
      ...(cfg.pr ? { forge: { ...FORGE, require_human_approval: cfg.pr.approval } } : {}),
    });
    this.feed({ type: 'register.loaded', blocks: cfg.blocks });
    const boot: EventBody[] = [{ type: 'recovery.started', previous: previous ? `sim-${this.runNo - 1}` : null, torn: false }];
    if (previous) {
      const caught = this.catchUpFromRemote(previous);
      if (caught) boot.push(caught);
      const followed = this.followRemote(previous);
      if (followed) boot.push(followed);
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
    for (const a of waiting) this.feed(execute(this, a)[0]!);
    this.feed({ type: 'recovery.finished', answers: waiting.length });
    this.perform(1);
    checkStall(this);
  }

  // ---- the world's main loop ----

  private loop(): void {
    while (this.tick());
  }

  /** One turn of the world: a fault, or the next effect answered and its inputs fed. Whether the run goes on. */
  tick(): boolean {
    if (this.state.finished) {
      // A run that ended waiting on the operator, whose answers are on their way: the
      // operator answers and starts tron again (the answers are read at that start).
      const f = this.log.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished');
      if (f?.reason !== 'done' || f.exit !== 3 || !this.items.some((x) => x.kind === 'answer')) return false;
      // (Bounded while faults come; a nominal world settles by itself.)
      if (this.restarts >= MAX_RESTARTS && !this.c.nominal) return false;
      this.restarts += 1;
      this.cov?.fault('world:start-again');
      const late = this.items.filter((x): x is Extract<Item, { kind: 'answer' }> => x.kind === 'answer');
      this.step = Math.max(this.step, Math.min(...late.map((x) => x.after)));
      this.endOfLog();
      this.logs.push(this.log);
      this.start(this.log);
      return true;
    }
    if (this.step >= this.cap) throw new Failure('terminates', `the run did not finish within ${this.cap} steps`);
    if (this.o.nominalFrom !== undefined && this.step >= this.o.nominalFrom && !this.c.nominal) this.turnNominal();
    if (this.o.crashAt !== undefined && this.step >= this.o.crashAt && !this.forced) {
      this.forced = true;
      this.crash('forced');
      return true;
    }
    if (this.cluster && this.clusterFault()) return true;
    const crash = this.o.noCrashes || this.crashes >= MAX_CRASHES ? 'none' : this.pick('crash');
    if (crash === 'before-effect') {
      this.crash(crash);
      return true;
    }
    const external = this.pick('external');
    if (external === 'teammate-push' && this.cfg.teammates) {
      this.teammatePush();
      return true;
    }
    if (external === 'signal' && this.state.stopping === undefined) {
      // As the engine's stop(): the signal is an input, and every running turn is stopped.
      this.feedAndPerform({ type: 'run.stopping', signal: 'SIGTERM' }, () => this.abort(() => true));
      return true;
    }
    if (external === 'plant-ref') {
      this.plant();
      return true;
    }
    if (external === 'effect-fails') {
      this.input({ type: 'run.failed', detail: 'an effect failed (simulated)', after: 'an effect' });
      return true;
    }
    const ready = this.items.filter((x) => !(x.kind === 'effect' && x.paused) && !(x.kind === 'answer' && x.after > this.step));
    if (ready.length === 0) {
      // Only late answers remain: the world waits for them.
      const late = this.items.filter((x) => x.kind === 'answer');
      if (late.length > 0) {
        this.step = Math.max(this.step, Math.min(...late.map((x) => (x as { after: number }).after)));
        return true;
      }
      throw new Failure('no-silent-stall', `nothing is pending in the world and the run has not finished\n${describe(this)}`);
    }
    const item = ready[this.c.index('next', ready.length)]!;
    this.items.splice(this.items.indexOf(item), 1);
    const inputs = this.cluster ? this.viaCluster(this.cluster, item) : execute(this, item);
    if (crash === 'after-effect') {
      this.crash(crash);
      return true;
    }
    if (crash === 'torn-write' && inputs.length > 0) {
      const at = this.log.length;
      const decisions = this.feed(inputs[0]!);
      // A cluster's log is a database: a step's lines are one commit, lost whole or kept whole with its answer lost.
      const kept = this.cluster
        ? this.pick('commit') === 'lost'
          ? 0
          : decisions.length
        : this.c.amount('torn-kept', decisions.length + 1);
      this.log.length = at + 1 + kept;
      this.cluster?.uncommitted(this.runNo, this.log.length);
      this.tornAt = kept === decisions.length && this.cluster ? undefined : at;
      this.crash(crash);
      return true;
    }
    for (const body of inputs) {
      if (this.state.finished) break;
      this.input(body);
    }
    return true;
  }

  /**
   * A fault of the cluster between steps (cluster runs only): an agent dies, a hostile agent
   * reports, the other repository queues a job or is served, the leader is paused past its
   * lease (a standby takes over), the database restarts or the leader is cut off from it (it
   * stops; a standby takes over). A paused leader wakes when its time comes. Whether it acted.
   */
  private clusterFault(): boolean {
    const cluster = this.cluster!;
    this.items.push(...cluster.wake());
    const fault = this.pick('cluster');
    const stops = !this.o.noCrashes && this.crashes < MAX_CRASHES;
    switch (fault) {
      case 'none':
        return false;
      case 'agent-dies':
        return cluster.agentDies();
      case 'hostile-agent':
        cluster.hostileAgent();
        return true;
      case 'neighbour-steps':
        return this.neighbourSteps();
      case 'pause-leader':
        if (!stops || !cluster.pause(this.items)) return false;
        this.crash('paused-leader');
        return true;
      case 'db-restart':
        if (!stops) return false;
        cluster.db.restart();
        return true;
      case 'cut-off':
        if (!stops) return false;
        this.crash('cut-off');
        return true;
    }
  }

  /** The other repository's engine takes a few steps of its own (its violations are the run's, named as its). */
  private neighbourSteps(): boolean {
    const other = this.neighbour;
    if (!other) return false;
    const n = 1 + this.c.amount('neighbour-steps', 20);
    try {
      for (let i = 0; i < n; i += 1) if (!other.tick()) break;
    } catch (err) {
      if (err instanceof Failure) throw new Failure(err.invariant, `in the other repository's run (${NEIGHBOUR}): ${err.message}`);
      throw err;
    }
    return true;
  }

  /** The database restarted: this engine stops (TRON_DB_LOST) and a standby, which rode the restart, takes over. */
  stopForRestart(): void {
    if (this.state.finished) return;
    this.crash('db-restart');
  }

  /** An item answered in a cluster run: a job's goes through an agent's claim and the engine's reading of its result. */
  private viaCluster(cluster: ClusterWorld, item: Item): EventBody[] {
    if (item.kind === 'late') return cluster.late(item);
    cluster.checkEffect(item);
    if (item.kind !== 'effect' || item.job === undefined) return execute(this, item);
    cluster.claim(item);
    return cluster.complete(item, execute(this, item));
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
  endOfLog(): void {
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

  /** A teammate pushes to trunk: the remote's, when the run has one, else the local one. */
  private teammatePush(): void {
    const remote = this.git.remote;
    const sha = this.git.commit({ parent: remote?.trunk ?? this.git.trunk, patch: 'teammate', red: false, engine: false });
    if (remote) {
      linear(this, sha, 'a teammate', remote.trunk);
      remote.trunk = sha;
      this.cov?.fault('world:teammate-push-to-remote');
      return;
    }
    linear(this, sha, 'a teammate');
    this.git.moveTrunk(sha);
    this.cov?.fault('world:teammate-push');
  }

  /**
   * Something is put in a block's namespace that its worktree cannot be made over (a
   * confused worker's ref `tron/<id>/x`, a stranger's folder): a block that has yet to
   * get its worktree, or whose next attempt will need a new one.
   */
  private plant(): void {
    const open = this.cfg.blocks.filter((b) => {
      const phase = this.state.blocks.get(b.id)?.phase;
      return phase === undefined || phase === 'pending' || phase === 'build' || phase === 'parked';
    });
    if (open.length === 0) return;
    this.git.planted.add(open[this.c.index('planted', open.length)]!.id);
    this.cov?.fault('world:plant-ref');
  }

  /**
   * At a start with a remote (remote-recovery.ts): a landing the previous log announced
   * and never recorded, which the remote holds exactly, is made local before recovery
   * reads the landed refs.
   */
  private catchUpFromRemote(previous: TronEvent[]): EventBody | undefined {
    const remote = this.git.remote;
    const open = remote && openLanding(previous);
    if (!remote || !open) return undefined;
    if (!open.blocks.every((b) => remote.landed.get(b.block) === b.sha) || !this.git.isAncestor(open.sha, remote.trunk)) return undefined;
    if (this.git.trunk !== open.from) return undefined;
    landLocally(this, open);
    this.cov?.fault('world:remote-recovered');
    return {
      type: 'remote.recovered',
      blocks: open.blocks,
      sha: open.sha,
      detail: `the remote origin already had the landing of ${open.blocks.map((b) => b.block).join(', ')}`,
    };
  }

  /**
   * At a start with a remote (remote-recovery.ts `followRemote`): landings the previous log
   * records that this clone lacks — a push whose answer was lost on its last try, paged as
   * nothing landed — and that the remote holds at the recorded sha are made local, local
   * trunk fast-forwarded to the remote's; recovery then finds those blocks landed.
   */
  private followRemote(previous: TronEvent[]): EventBody | undefined {
    const remote = this.git.remote;
    if (!remote) return undefined;
    const blocks = [...recordedLandings(previous)]
      .filter(([id]) => !this.git.landed.has(id))
      .flatMap(([block, shas]) => {
        const sha = remote.landed.get(block);
        return sha !== undefined && shas.has(sha) && this.git.isAncestor(sha, remote.trunk) ? [{ block, sha }] : [];
      });
    const from = this.git.trunk;
    // The real start stops on a remote whose trunk does not descend from this one (TRON_TRUNK_DIVERGED); the world never makes one.
    if (blocks.length === 0 || !this.git.isAncestor(from, remote.trunk)) return undefined;
    linear(this, remote.trunk, 'following the remote at a start');
    this.git.moveTrunk(remote.trunk);
    for (const b of blocks) this.git.landed.set(b.block, b.sha);
    this.cov?.fault('world:remote-followed');
    return {
      type: 'remote.followed',
      from,
      to: remote.trunk,
      blocks,
      detail: `this clone lacked the landings of ${blocks.map((b) => b.block).join(', ')} that origin holds`,
    };
  }

  // ---- decisions → effects ----

  /** What the world does with a decision: its row in REACTIONS (reactions.ts). */
  private react(d: TronEvent): void {
    if (!isDecision(d.type)) return;
    const row = REACTIONS[d.type];
    if ('effect' in row) {
      const job = this.cluster?.jobOf(d);
      if (!('when' in row) || row.when(d as never))
        this.items.push({
          kind: 'effect',
          seq: d.seq,
          run: this.runNo,
          d,
          stage: 0,
          paused: false,
          hang: 0,
          silent: false,
          ...(job !== undefined ? { job } : {}),
        });
    } else if ('act' in row) row.act(this, d as never);
  }

  turnItem(session: string, turn: number) {
    return this.items.find(
      (x): x is Extract<Item, { kind: 'effect' }> =>
        x.kind === 'effect' && x.d.type === 'block.dispatched' && x.d.session === session && x.d.turn === turn,
    );
  }

  /** Stops running turns: each reports back as aborted. */
  abort(which: (t: EventOf<'block.dispatched'>) => boolean): void {
    const aborted: Item[] = [];
    this.items = this.items.filter((x) => {
      if (x.kind !== 'effect' || x.d.type !== 'block.dispatched' || !which(x.d)) return true;
      aborted.push({ kind: 'aborted', d: x.d });
      return false;
    });
    this.items.push(...aborted);
  }
}
