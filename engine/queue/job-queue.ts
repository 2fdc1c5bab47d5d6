/**
 * Effects as jobs on the database's queue ([cluster] database; docs/cluster.md). Worker
 * turns and test runs — the effects whose request is self-contained JSON and whose work is
 * the heavy part of a run — are not started by the engine's `perform`: their rows are
 * committed with their decisions' lines (engine/queue/pg-jobs.ts), a worker pool claims
 * them — the engine's own, in process, when `[cluster] jobs = "here"` (the default), or
 * `tron agent`s on other hosts with `"agents"` — and each result comes back through
 * `tron_complete`, fenced by attempt, as the effect's outcome.
 *
 * Both sides are here: `JobBroker` (the engine's: enqueue, wait for outcomes) and
 * `startWorkers` (a pool that claims, runs, heartbeats and reports; `tron agent` runs one).
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { Runner, Task } from 'graphile-worker';
import type pg from 'pg';
import type { DecisionType, EventBody, EventOf, TronEvent } from '../core/events.ts';
import { keepAgentOutput } from '../log/turn-log.ts';
import {
  type Caller,
  claimJob,
  completeJob,
  connect,
  isNotYours,
  isStaleAttempt,
  nearElsewhere,
  QUIET,
  RESULTS_CHANNEL,
  registerPool,
} from './pg-jobs.ts';
import type { Claimed, JobKey, JobResult } from './pg-job-types.ts';
import { checkResult } from './job-results.ts';
import { connectFailure, type Database, isDatabaseFull, type PgEventLog, type RunKey } from '../log/pg-log.ts';
import type { Config } from '../project/config.ts';
import type { QueuedJob, RunLog } from '../log/run-log.ts';
import type { EffectContext, Outcome } from '../runtime/effects/context.ts';
import { InputError } from '../core/errors.ts';
import * as git from '../git/index.ts';
import { gitOut } from '../git/run.ts';
import { EFFECTS, type Job } from '../runtime/effects/table.ts';
import { AgentTurns } from './agent-turns.ts';
import { failExhausted } from './job-sweep.ts';
import { serialized } from './pg-job-control.ts';
import { AgentSuites } from './agent-tests.ts';
import { WorkFetches } from './work-fetch.ts';
import { UnheldRoles } from './unheld-roles.ts';
import { OneLook } from '../os/one-look.ts';
import { type Clock, sleep, systemClock } from '../os/clock.ts';

/** The decisions whose effects are jobs on the queue (worker turns and test runs): each row of EFFECTS says where it runs. */
export const QUEUED: ReadonlySet<DecisionType> = new Set(
  (Object.keys(EFFECTS) as DecisionType[]).filter((type) => EFFECTS[type]?.where === 'queue'),
);

/** The roles a job is claimed by: a turn's worker role, `test` for a test run. */
export const JOB_ROLES = ['builder', 'reviewer', 'architect', 'test'] as const;

/** The role that may claim a decision's job. */
export function roleOf(decision: TronEvent): string {
  return decision.type === 'block.dispatched' ? String((decision as { role: string }).role) : 'test';
}

/** Runs a claimed job's effect against a context; the outcome (its inputs) or the error, as JSON. */
export async function runJob(fx: EffectContext, kind: string, request: unknown): Promise<JobResult> {
  const effect = EFFECTS[kind as DecisionType];
  try {
    if (!effect) throw new Error(`no effect runs a ${kind} job`);
    const out = (await effect.run(fx, request as never)) as Outcome;
    return { ok: true, inputs: [out ?? []].flat() };
  } catch (err) {
    const e = err as { message?: unknown; code?: unknown; name?: unknown; path?: unknown };
    return {
      ok: false,
      error: {
        message: String(e?.message ?? err),
        ...(typeof e?.code === 'string' ? { code: e.code } : {}),
        ...(typeof e?.name === 'string' ? { name: e.name } : {}),
        ...(typeof e?.path === 'string' ? { path: e.path } : {}),
      },
    };
  }
}

/** The error a job reported, as the engine's `perform` would have met it in process. */
function errorOf(r: Extract<JobResult, { ok: false }>): Error {
  const err = Object.assign(
    new Error(r.error.message),
    r.error.code ? { code: r.error.code } : {},
    r.error.path ? { path: r.error.path } : {},
  );
  if (r.error.name) err.name = r.error.name;
  return err;
}

/** A job's result that reports inputs. */
type Done = Extract<JobResult, { ok: true }>;

/** Where a decision's effect runs (JobBroker.placeOf). */
export type Place = 'process' | 'own pool' | 'agents';

const inputsOf = (r: Done) => r.inputs as EventBody[];

interface ArrivalContext {
  fx: EffectContext;
  agentTurns: AgentTurns | undefined;
  fetches: () => WorkFetches | undefined;
}

/**
 * The steps a result from the agents takes on the engine's host before the engine decides
 * on it, by the job's kind; a kind not here is its inputs as they came. A turn: the end of
 * its output becomes this run's turn file (turn-log.ts), a builder's commits — made on the
 * agent and pushed to the remote — come into the block's worktree (the gate reads them
 * there; builders that finish together share one fetch, work-fetch.ts), and meanwhile the
 * turn is in the engine's turn table, stopped and timed as one here (agent-turns.ts).
 */
const ARRIVALS: { [K in DecisionType]?: (a: ArrivalContext, job: Job, result: Promise<Done>) => Promise<Outcome> } = {
  'block.dispatched': (a, job, result) => {
    const e = job.decision as EventOf<'block.dispatched'>;
    const kept = result.then(async (r) => {
      try {
        if (a.agentTurns) await a.agentTurns.keepOutput(e, r);
        else if (typeof r.output === 'string') keepAgentOutput(a.fx.runDir, e, r.worker ?? 'an agent', r.output);
      } catch {
        // Its output is for reading later; never a reason to fail the turn.
      }
      return r;
    });
    const adopted =
      e.role !== 'builder'
        ? kept.then(inputsOf)
        : kept.then(async (r) => {
            await adoptWork(a.fx, e.block, r.work, a.fetches());
            return inputsOf(r);
          });
    return a.agentTurns ? a.agentTurns.watch(job, adopted) : adopted;
  },
};

export interface BrokerOptions {
  url: string;
  /** The name of the engine's own pool: unique (host, pid and a random part), the only pool that may claim the jobs it runs. */
  pool?: string;
  log: RunLog;
  at: RunKey;
  /**
   * The roles whose jobs this process runs: all with `[cluster] jobs = "here"`; none with
   * `"agents"` — turns and test runs go to `tron agent`s.
   */
  localRoles: readonly string[];
  /** How often a worker pool says it lives; a job of one silent for 1.5 of these is given to another. */
  heartbeatMs: number;
  /** Slots of the in-process pool. */
  slots: number;
}

/**
 * The engine's side of the queue: `enqueue` attaches each queued decision's job to its line
 * (committed together), `outcome` resolves when its result is committed, `serve` starts the
 * in-process pool (or only listens, with agents), `close` stops it all.
 */
export class JobBroker {
  private readonly waiting = new Map<number, { resolve: (r: Done) => void; reject: (e: Error) => void }>();
  private listener: pg.Client | undefined;
  private workers: { stop(): Promise<void> } | undefined;
  /** Stops the periodic look for results. */
  private stopLooking: (() => void) | undefined;
  /** The look for committed results: one at a time, another after it if asked meanwhile. */
  private readonly results = new OneLook(
    () => this.lookForResults(),
    () => this.closed || this.listener === undefined || this.waiting.size === 0,
  );
  private closed = false;
  private fx: EffectContext | undefined;
  private agentTurns: AgentTurns | undefined;
  /** The listener's queries, one at a time (the results' look and the sweep of given-up jobs share it). */
  private serial: pg.ClientBase | undefined;
  private fetches: WorkFetches | undefined;

  /** [cluster] jobs = "agents": test runs go to agents with role test (agent-tests.ts), their engine part runs here. */
  readonly suites: AgentSuites | undefined;
  /** The engine's own pool's name: its jobs (the roles it runs itself) name it, and no other pool may claim them. */
  readonly pool: string;

  constructor(private readonly o: BrokerOptions) {
    this.pool = o.pool ?? `engine ${hostname()} pid ${process.pid} ${randomBytes(6).toString('hex')}`;
    this.suites = o.localRoles.includes('test') ? undefined : new AgentSuites((line, job) => this.submit(line, job), this.unheld);
  }

  /** Said once per role, at its first job on the agents, when no live agent holds it (unheld-roles.ts). */
  private readonly unheld = new UnheldRoles(async (role) => {
    const { rows } = await (this.serial ?? this.listener!).query<{ n: number }>(
      `select count(*)::int as n from tron_agents where $2 = any(roles) and repository = $1 and not own`,
      [this.o.at.repository, role],
    );
    return rows[0]?.n;
  });

  /**
   * Where a decision's effect runs, a property of its row: in this process (an effect that
   * is no job, and a test decision when test runs go to agents: its effect reads the
   * engine's own git here, and only its suite is a job, agent-tests.ts), on the engine's
   * own pool (a role this engine runs itself), or on the agents.
   */
  placeOf(job: Job): Place {
    const role = roleOf(job.decision);
    if (!QUEUED.has(job.decision.type as DecisionType) || job.request === undefined) return 'process';
    if (this.suites && role === 'test') return 'process';
    return this.o.localRoles.includes(role) ? 'own pool' : 'agents';
  }

  /** Commits `job` with `line` (appended in this same step) and resolves with its result's inputs. */
  private submit(line: TronEvent, job: QueuedJob): Promise<Outcome> {
    this.o.log.enqueue!(line.seq, job);
    return this.outcome({ decision: line, request: job.request });
  }

  /** Attaches their jobs to the decisions' queued lines: called in the step that appended them. */
  enqueue(jobs: readonly Job[]): void {
    for (const job of jobs) {
      const place = this.placeOf(job);
      if (place === 'process') continue;
      const role = roleOf(job.decision);
      // A job this engine runs itself is its own pool's alone: no agent, no other engine claims it.
      const pool = place === 'own pool' ? { pool: this.pool } : {};
      if (place === 'agents' && this.fx) this.unheld.look(role, this.fx.print);
      this.o.log.enqueue!(job.decision.seq, { kind: job.decision.type, role, request: job.request, ...pool });
    }
  }

  /**
   * The transport: the job's outcome once a pool's result for it is committed (read by its
   * kind: anything else it carries refuses it, job-results.ts), its error as the effect
   * would have thrown it. A result from the agents then takes the steps its kind needs on
   * this host before the engine decides on it (ARRIVALS).
   */
  outcome(job: Job, place: Exclude<Place, 'process'> = 'agents'): Promise<Outcome> {
    const result = new Promise<Done>((resolve, reject) => {
      this.waiting.set(job.decision.seq, { resolve, reject });
      this.check();
    }).then((r) => checkResult(job.decision, r));
    const arrive = place === 'agents' ? ARRIVALS[job.decision.type as DecisionType] : undefined;
    return arrive ? arrive(this.arrival(), job, result) : result.then(inputsOf);
  }

  /** What an arrival may use: the engine's context, its turns on agents, and the fetches of builders' work. */
  private arrival(): ArrivalContext {
    const fx = this.fx!;
    return {
      fx,
      agentTurns: this.agentTurns,
      fetches: () => {
        this.fetches ??= fx.remote && new WorkFetches(fx.repo, fx.remote);
        return this.fetches;
      },
    };
  }

  /** Listens for results; with `local`, runs a pool of workers against the engine's own context. */
  async serve(fx: EffectContext): Promise<void> {
    this.fx = fx;
    const listener = await connect(this.o.url);
    this.listener = listener;
    this.serial = serialized(listener);
    listener.on('notification', () => this.check());
    await listener.query(`listen ${RESULTS_CHANNEL}`);
    if (!this.o.localRoles.includes('builder')) {
      this.agentTurns = await AgentTurns.open(this.o.url, this.o.at, fx, this.o.heartbeatMs);
      // The probe of a turn on an agent is asked of that agent (effects/liveness.ts).
      fx.agentTurns = this.agentTurns;
    }
    if (this.o.localRoles.length > 0) {
      this.workers = await startWorkers({
        url: this.o.url,
        repository: this.o.at.repository,
        own: true,
        roles: this.o.localRoles,
        slots: this.o.slots,
        agent: this.pool,
        heartbeatMs: this.o.heartbeatMs,
        clock: fx.clock,
        run: (claimed) => runJob(fx, claimed.kind, claimed.request),
      });
    }
    // A notification lost with a dropped connection: the results are looked for now and then too.
    let ticks = 0;
    this.stopLooking = fx.clock.every(Math.max(250, this.o.heartbeatMs / 2), () => {
      if (this.waiting.size === 0) return;
      this.check();
      // Every other heartbeat: a job deleted from the queue fails instead of being waited for (job-sweep.ts).
      if (++ticks % 4 === 0)
        void failExhausted(this.serial!, this.o.at, [...this.waiting.keys()]).then(
          (n) => n > 0 && this.check(),
          () => undefined,
        );
    });
    this.check();
  }

  /** Looks for the committed results of the jobs waited for. */
  private check(): void {
    this.results.ask();
  }

  private async lookForResults(): Promise<void> {
    const { rows } = await this.serial!.query<{ seq: number; outcome: JobResult; worker: string | null; attempt: number }>(
      `select seq, outcome, worker, attempt from tron_jobs where repository = $1 and run = $2 and state = 'done' and seq = any($3::integer[])`,
      [this.o.at.repository, this.o.at.run, [...this.waiting.keys()]],
    );
    for (const row of rows) {
      const w = this.waiting.get(row.seq);
      if (!w) continue;
      this.waiting.delete(row.seq);
      if (row.outcome.ok) w.resolve({ ...row.outcome, worker: row.worker ?? 'an agent', attempt: row.attempt });
      else w.reject(errorOf(row.outcome));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopLooking?.();
    await this.workers?.stop();
    await this.agentTurns?.close();
    await this.suites?.settle();
    await this.listener?.end().catch(() => undefined);
  }
}

export interface WorkerOptions {
  url: string;
  /** The repository whose jobs it claims (an agent's: its clone's; cluster.ts repositoryName). */
  repository: string;
  /** The engine's own pool: it claims only the jobs that name it (`agent`), never an agent's. */
  own?: boolean;
  roles: readonly string[];
  slots: number;
  /** The pool's name in `tron_agents` (host and pid, or the agent's own): unique among live pools. */
  agent: string;
  heartbeatMs: number;
  /** Times its heartbeats and its waits to register again (the system's by default). */
  clock?: Clock;
  /** Told the pool's name and token at each registration (again after it was reaped while silent): its asks and notes carry them. */
  onRegistered?: (caller: Caller) => void;
  /** Runs a claimed job; its result is reported as the attempt's. */
  run: (claimed: Claimed, key: JobKey) => Promise<JobResult>;
  /** A result the database refused: this attempt was given up and another holds the job. */
  onStale?: (key: JobKey, attempt: number) => void;
  /** A job claimed (for the bench and the agent's own lines). */
  onClaimed?: (key: JobKey, claimed: Claimed) => void;
}

let tracesQuiet = false;

/**
 * graphile-worker 0.16 calls `console.trace(error)` when a worker's loop ends in an error
 * (main.js: a connection reset while the database restarts), whatever its logger — a stack
 * trace on the user's terminal beside tron's one coded line (TRON_DB_LOST). Its logger gets
 * the same error (QUIET: shown with TRON_DEBUG=1), and so do these traces. tron itself never
 * calls console.trace.
 */
function quietLibraryTraces(): void {
  if (tracesQuiet) return;
  tracesQuiet = true;
  const trace = console.trace.bind(console);
  console.trace = (...args: unknown[]) => {
    if (process.env.TRON_DEBUG === '1') trace(...args);
  };
}

/**
 * A stale attempt's end, thrown to the queue library: its failure (`failJob`) touches only a
 * job row this worker still locks, where its completion would delete the row whoever holds it
 * now — the attempt that took the job over while this one was paused or cut off.
 */
export class StaleAttemptEnd extends Error {
  constructor(key: JobKey, attempt: number) {
    super(
      `attempt ${attempt} of job ${key.repository}/${key.run}/${key.seq} no longer holds its job: its end leaves the job to the attempt that does`,
    );
    this.name = 'StaleAttemptEnd';
  }
}

/** `attempt`, again every quarter second while `again` says its error passes, until `withinMs` have gone. */
async function retryWhile<T>(clock: Clock, attempt: () => Promise<T>, again: (err: unknown) => boolean, withinMs: number): Promise<T> {
  const until = clock.now() + withinMs;
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      if (!again(err) || clock.now() >= until) throw err;
      await sleep(clock, 250, { keepAlive: true });
    }
  }
}

/**
 * A pool of `slots` workers that claim the jobs of `roles` (graphile-worker: woken by
 * NOTIFY, SKIP LOCKED), each job a new attempt (`tron_claim`), reported with `tron_complete`.
 * It registers first (its repository, roles, slots and lapse: `tron_register`, which gives it
 * the token its calls carry and the task names it serves), heartbeats every `heartbeatMs`, and
 * unlocks the jobs of pools silent past their own lapse; its own lapse is 1.5 periods.
 */
export async function startWorkers(o: WorkerOptions): Promise<{ stop(): Promise<void> }> {
  const clock = o.clock ?? systemClock;
  const beat = await connect(o.url);
  // A pool not heard from for this long is dead: its jobs are unlocked, and none are left to it.
  const lapseMs = Math.ceil(o.heartbeatMs * 1.5);
  // Heartbeats and the pool's asks of which jobs to leave share the connection, one query at a time.
  const one = serialized(beat);
  const locks: string[] = [];
  const events = new EventEmitter();
  events.on('worker:create', ({ worker }: { worker: { workerId: string } }) => locks.push(worker.workerId));
  let caller: Caller = { worker: o.agent, token: '' };
  const register = async (): Promise<string[]> => {
    const registration = {
      worker: o.agent,
      host: hostname(),
      repository: o.repository,
      roles: o.roles,
      slots: o.slots,
      lapseMs,
      own: o.own ?? false,
    };
    // A pool started afresh after the database went (a restart) finds its own earlier
    // registration still live — its stop could not reach the database to end it: it waits
    // for that one to lapse (two lapses at most; a live pool of the same name keeps it, and
    // is refused then).
    const { token, tasks } = await retryWhile(
      clock,
      () => registerPool(one, registration),
      (err) => isNotYours(err) && /registered under that name/.test(String((err as Error).message)),
      2 * lapseMs + 500,
    );
    caller = { worker: o.agent, token };
    o.onRegistered?.(caller);
    return tasks;
  };
  const heartbeat = async (): Promise<void> => {
    const beatOnce = () => one.query('select tron_heartbeat($1, $2, $3)', [caller.worker, caller.token, locks]);
    // Reaped while silent (paused, cut off, or a start on a busy host slower than its lapse): its registration is gone,
    // and it registers again — as often as it is reaped again before it beats, up to REREGISTRATIONS times.
    for (let tries = 1; ; tries += 1) {
      try {
        await beatOnce();
        break;
      } catch (err) {
        if (!isNotYours(err) || tries > REREGISTRATIONS) throw err;
        await register();
      }
    }
    // Reaped again between its beat and this (a busy host): the lapsed pools are others' to reap this time, and the
    // next heartbeat registers it again.
    await one.query('select tron_reap($1, $2)', [caller.worker, caller.token]).catch((err: unknown) => {
      if (!isNotYours(err)) throw err;
    });
  };
  const task: Task = async (payload, helpers) => {
    const key = payload as JobKey;
    const claimed = await helpers.withPgClient((client) => claimJob(client, caller, key));
    // Done already (a second delivery), or decided by an engine that lost its lease: nothing to run.
    if (!claimed) return;
    o.onClaimed?.(key, claimed);
    const result = await o.run(claimed, key);
    try {
      await helpers.withPgClient((client) => completeJob(client, caller, key, claimed.attempt, result));
    } catch (err) {
      if (!isStaleAttempt(err) && !isNotYours(err)) throw err;
      o.onStale?.(key, claimed.attempt);
      throw new StaleAttemptEnd(key, claimed.attempt);
    }
  };
  let runner: Runner;
  try {
    // Said before the first claim: a database without the queue's schema fails here, with nothing claimed.
    const taskList = Object.fromEntries((await register()).map((t) => [t, task]));
    // Loaded here, not at the top: a start without [cluster] database never needs it (~170 ms).
    const { run: runQueue } = await import('graphile-worker');
    quietLibraryTraces();
    runner = await runQueue({
      connectionString: o.url,
      concurrency: o.slots,
      noHandleSignals: true,
      pollInterval: Math.max(500, o.heartbeatMs),
      logger: QUIET,
      // biome-ignore lint/suspicious/noExplicitAny: graphile-worker types its emitter narrowly.
      events: events as any,
      taskList,
      // No schedule: never read a `crontab` file from the working folder (a worker could have written one).
      parsedCronItems: [],
      // A block's jobs are left to the agent near its work while it is alive and free (pg-jobs.ts, NEAR_MIGRATION).
      forbiddenFlags: () => nearElsewhere(one, caller),
    });
    await heartbeat();
  } catch (err) {
    await beat.end().catch(() => undefined);
    // graphile-worker's pool connects on its own: no connection left is said as tron's connects say it.
    throw isDatabaseFull(err) ? connectFailure(o.url, err) : err;
  }
  const stopBeating = clock.every(o.heartbeatMs, () => void heartbeat().catch(() => undefined));
  let stopped: Promise<void> | undefined;
  return {
    stop: () => {
      stopped ??= (async () => {
        stopBeating();
        await runner.stop().catch(() => undefined);
        await beat.end().catch(() => undefined);
      })();
      return stopped;
    },
  };
}

/** How often a heartbeat registers its pool again when it finds it reaped, before it gives up. */
const REREGISTRATIONS = 5;

/** `[cluster] jobs = "agents"` without `[remote]`: a usage mistake, said before anything changes. */
export function checkJobsConfig(config: Config): void {
  if (config.cluster?.jobs === 'agents' && !config.remote)
    throw new InputError([
      {
        code: 'TRON_USAGE',
        path: '[cluster] jobs',
        message:
          '"agents" runs turns and test runs on other hosts, which fetch and push through the remote: add [remote] to .tron/config.toml',
      },
    ]);
}

/** The engine's broker for a run logged in the database (its settings checked: checkJobsConfig; the queue's schema migrated: migrateJobs), the pool as [cluster] says. */
export function brokerFor(db: Database, log: PgEventLog, config: Config): JobBroker {
  return new JobBroker({
    url: db.url,
    log,
    at: log.at,
    localRoles: config.cluster?.jobs === 'agents' ? [] : [...JOB_ROLES],
    heartbeatMs: config.cluster?.heartbeatMs ?? 2000,
    // Enough for every turn and test run the engine lets run at once: it decides how many.
    slots: Math.max(4, config.maxParallel * 2 + 2),
  });
}

/**
 * Brings the work an agent pushed for `block` (`refs/tron/work/<id>` on the remote) into the
 * engine's repository and moves the block's branch and worktree to it. Nothing of the agent
 * is believed: the gate reads these commits as it reads any builder's. `said`, the sha the
 * agent says it left there: when the block's branch is at it already (a turn that committed
 * nothing, as a builder's confirming turn), there is nothing to fetch — and if the agent's
 * word was false, the gate judges what the engine holds, as it would have anyway.
 */
export async function adoptWork(fx: EffectContext, block: string, said?: string, fetches?: WorkFetches): Promise<void> {
  if (!fx.remote) throw new Error('turns on agents need [remote]');
  // Only this block's effects move its branch, one at a time: read once, it holds across the fetch.
  const branch = await git.revParse(fx.repo, `refs/heads/tron/${block}`);
  if (said && branch === said) return;
  const got = await (fetches ?? new WorkFetches(fx.repo, fx.remote)).fetch(block);
  if (!got.ok) throw new Error(`cannot fetch the work of ${block} from ${fx.remote.name}: ${got.message}`);
  if (!got.sha || branch === got.sha) return;
  // Not in the worktree queue: that orders making and removing worktrees; a reset inside the
  // block's own (its index, its branch, its files) waits for none of them, nor they for it.
  await gitOut(git.worktreePath(fx.repo, block), ['reset', '--hard', '--quiet', got.sha!]);
}
