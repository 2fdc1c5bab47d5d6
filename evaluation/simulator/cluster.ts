/**
 * The cluster around a simulated run (docs/cluster.md, "Failure semantics"): the log and a
 * job queue in a database, a leader and standbys holding its lease by generation, agents
 * that claim the run's worker turns and test runs as jobs, and a second repository whose
 * jobs share the queue. A third of the seeds run on it (`clusterRun`): it is decided by the
 * seed, never drawn, so every schedule recorded before it replays the same run.
 *
 * What the engine itself does with a job's result is the engine's own code, driven through
 * this seam: `checkResult` (engine/queue/job-results.ts) reads every result by its kind,
 * and a refused one fails the effect through its row's `onFailure` in EFFECTS
 * (engine/runtime/effects/table.ts), or ends the run as `perform` does for a row without
 * one. What the database and the processes around the engine do is stated here as
 * `RULES`, one line each, as the SQL and the runtime do it: the fence of the log by
 * generation (the trigger on `tron_events`), the fence of a result by attempt
 * (`tron_complete`), a claim scoped by repository and role (`tron_claim`), the next
 * leader dropping the jobs of earlier generations, a leader that finds its lease gone
 * stopping, a waiting standby riding a database restart. Each is a fix of issue 37; each
 * planted mutation (mutations.ts, CLUSTER_MUTATIONS) reverts one, and the invariant below
 * it promises catches it. The nemesis (engine/commands/nemesis.e2e.test.ts) shows the same
 * on real processes.
 */
import type { DecisionType, EventBody, TronEvent } from '../../engine/core/events.ts';
import { checkResult } from '../../engine/queue/job-results.ts';
import { EFFECTS } from '../../engine/runtime/effects/table.ts';
import { Failure } from './invariants.ts';
import type { Item, SimWorld } from './sim.ts';

/** The decisions whose effects are jobs on the queue: each row of EFFECTS says where it runs (as engine/queue/job-queue.ts's QUEUED). */
export const QUEUED_KINDS: ReadonlySet<string> = new Set(
  (Object.keys(EFFECTS) as DecisionType[]).filter((type) => EFFECTS[type]?.where === 'queue'),
);

/** Whether a seed's run has the cluster: a third of them, by the seed (never a draw). */
export function clusterRun(seed: number): boolean {
  return seed % 3 === 0;
}

export interface Job {
  id: number;
  repository: string;
  role: string;
  /** The generation of the engine that decided it (its line and its row are one statement). */
  generation: number;
  /** The start (run) and line of its decision. */
  run: number;
  seq: number;
  d: TronEvent;
  attempt: number;
  state: 'queued' | 'running' | 'done' | 'dropped';
  /** Attempts whose agent died or was cut off while holding it: their results may still arrive. */
  dead: number[];
}

export interface Pool {
  name: string;
  repository: string;
  roles: readonly string[];
}

/** What the database and the processes around the engine do, as the SQL and the runtime do it (the fixes of issue 37). */
export interface ClusterRules {
  /** The trigger on `tron_events`: a line is stored only from the generation of the live lease. */
  fenced(line: number, lease: number): boolean;
  /** `tron_complete`: a result is recorded only from the attempt that holds the job, and only once. */
  completes(job: Job, attempt: number): boolean;
  /** `tron_claim`: a pool claims only a job of its repository and of a role it holds. */
  mayClaim(pool: Pool, job: Job): boolean;
  /** The engine's reading of a result (engine/queue/job-results.ts). */
  readResult: typeof checkResult;
  /** A leader taking the lease marks every job of an earlier generation dropped: a claim of one runs nothing. */
  dropsOlderJobs: boolean;
  /** A leader whose renewal or append finds the lease gone stops (TRON_LEASE_LOST). */
  stopsOnLeaseLost: boolean;
  /** A waiting standby whose connection drops reconnects and waits on. */
  standbyRidesRestart: boolean;
}

export const RULES: ClusterRules = {
  fenced: (line, lease) => line === lease,
  completes: (job, attempt) => job.state === 'running' && attempt === job.attempt,
  mayClaim: (pool, job) => job.repository === pool.repository && pool.roles.includes(job.role),
  readResult: checkResult,
  dropsOlderJobs: true,
  stopsOnLeaseLost: true,
  standbyRidesRestart: true,
};

/** Our repository's name, and the other one on the same database. */
const OURS = 'sim';
const NEIGHBOUR = 'neighbour';
const ALL_ROLES = ['builder', 'reviewer', 'architect', 'test'] as const;

/** The role a job's claim needs: a turn's worker role, `test` for a test run. */
function roleOf(d: TronEvent): string {
  return d.type === 'block.dispatched' ? d.role : 'test';
}

/** The world's side of a cluster run: the database's jobs and lease, the agents, the standbys, a paused leader. */
export class ClusterWorld {
  readonly rules: ClusterRules;
  generation = 0;
  readonly jobs: Job[] = [];
  private nextJob = 1;
  /** Our repository's agents (two pools of every role) and the neighbour's. */
  readonly pools: Pool[] = [
    { name: 'agent-a', repository: OURS, roles: ALL_ROLES },
    { name: 'agent-b', repository: OURS, roles: ALL_ROLES },
  ];
  /** Standbys waiting on the lease. */
  standbys: number;
  /** A leader paused past its lease, replaced, not woken yet: its generation and the effects it had in flight in its process. */
  paused: { generation: number; items: Item[]; wakeAt: number } | undefined;
  /** Inputs a job's result carried that no effect reported: a hostile agent's (the invariant `forged-never-read`). */
  readonly forged = new WeakSet<object>();
  /** The next job result carries a forged input. */
  private forgeNext = false;

  constructor(
    private readonly sim: SimWorld,
    rules: Partial<ClusterRules> | undefined,
    seed: number,
  ) {
    this.rules = { ...RULES, ...rules };
    this.standbys = 1 + ((seed >>> 2) % 2);
  }

  /** A start takes the lease: the next generation. The jobs of earlier ones are dropped, or (a mutation) left for the agents. */
  takeLease(): Item[] {
    this.generation += 1;
    const kept: Item[] = [];
    for (const job of this.jobs) {
      if (job.repository !== OURS || job.generation >= this.generation || job.state === 'done' || job.state === 'dropped') continue;
      if (this.rules.dropsOlderJobs) job.state = 'dropped';
      else
        kept.push({ kind: 'effect', seq: job.seq, run: job.run, d: job.d, stage: 0, paused: false, hang: 0, silent: false, job: job.id });
    }
    return kept;
  }

  /** A decision whose effect is a job is committed with its row, in one statement. */
  committed(d: TronEvent): void {
    if (!QUEUED_KINDS.has(d.type)) return;
    this.jobs.push({
      id: this.nextJob++,
      repository: OURS,
      role: roleOf(d),
      generation: this.generation,
      run: this.sim.runNo,
      seq: d.seq,
      d,
      attempt: 0,
      state: 'queued',
      dead: [],
    });
  }

  /** The lines of this start from `length` on were never committed: nor were their jobs (one statement). */
  uncommitted(run: number, length: number): void {
    for (let i = this.jobs.length - 1; i >= 0; i -= 1) {
      const j = this.jobs[i]!;
      if (j.repository === OURS && j.run === run && j.seq > length) this.jobs.splice(i, 1);
    }
  }

  /** The job of an effect the engine started, if it is one. */
  jobOf(d: TronEvent): number | undefined {
    return this.jobs.findLast((j) => j.repository === OURS && j.run === this.sim.runNo && j.seq === d.seq)?.id;
  }

  private job(id: number): Job {
    return this.jobs.find((j) => j.id === id)!;
  }

  /**
   * An agent claims the job of an effect the world is about to answer (unless an attempt
   * holds it already): the oldest job its pool may claim — which, with the claim unscoped,
   * may be the other repository's.
   */
  claim(item: Extract<Item, { kind: 'effect' }>): void {
    const mine = this.job(item.job!);
    if (mine.state === 'running') return;
    const pool = this.pools[this.sim.c.index('agent', this.pools.length)]!;
    const first = this.jobs.find((j) => j.state === 'queued' && j.id <= mine.id && this.rules.mayClaim(pool, j));
    if (first && first.repository !== pool.repository)
      throw new Failure(
        'own-repository-only',
        `${pool.name}, an agent of repository ${pool.repository}, claimed job ${first.id} of repository ${first.repository} (${first.d.type}${'block' in first.d ? ` for ${first.d.block}` : ''}) and would run it in its clone`,
      );
    mine.attempt += 1;
    mine.state = 'running';
  }

  /**
   * The agent holding an effect's job reports: its result goes through the attempt fence
   * (`tron_complete`), then the engine reads it by its kind; a refused result fails the
   * effect as the engine's `perform` does. Between stages of a turn (its usage, a fired
   * timer) nothing is reported.
   */
  complete(item: Extract<Item, { kind: 'effect' }>, inputs: EventBody[]): EventBody[] {
    const job = this.job(item.job!);
    if (this.sim.items.includes(item)) return inputs;
    const reported = this.forgeNext ? [...inputs, this.forge(job.d)] : inputs;
    this.forgeNext = false;
    if (!this.rules.completes(job, job.attempt)) return [];
    job.state = 'done';
    for (const attempt of job.dead) {
      // A dead attempt's result, should it arrive: after the live one, about the same decision.
      this.sim.items.push({ kind: 'late', job: job.id, attempt, inputs: structuredClone(inputs) });
    }
    return this.read(job, reported);
  }

  /** A result that arrives from an attempt that no longer holds its job (a dead or cut-off agent's). */
  late(item: Extract<Item, { kind: 'late' }>): EventBody[] {
    const job = this.job(item.job);
    if (!this.rules.completes(job, item.attempt)) return [];
    throw new Failure(
      'stale-attempt-never-writes',
      `job ${job.id} (${job.d.type}${'block' in job.d ? ` for ${job.d.block}` : ''}) recorded a result of attempt ${item.attempt}, which no longer held it (attempt ${job.attempt} did)`,
    );
  }

  /** The engine reads a result by its job's kind: refused, the effect fails with the reason. */
  private read(job: Job, inputs: EventBody[]): EventBody[] {
    try {
      this.rules.readResult(job.d, { ok: true, inputs, worker: 'agent-a', attempt: job.attempt });
      return inputs;
    } catch (err) {
      this.sim.cov?.fault('world:result-refused');
      const effect = EFFECTS[job.d.type as DecisionType];
      const request = job.d.type === 'block.dispatched' ? { decision: job.d } : job.d;
      const failed = effect?.onFailure?.(request as never, err as Error);
      if (failed) return [failed].flat() as EventBody[];
      return [{ type: 'run.failed', detail: (err as Error).message, after: job.d.type }];
    }
  }

  /** What a hostile agent slips into a result: an operator's answer nobody gave. */
  private forge(d: TronEvent): EventBody {
    const body: EventBody = {
      type: 'operator.answered',
      block: 'block' in d ? String(d.block) : 'b0',
      word: 'ABANDON',
      payload: { reason: 'forged by an agent' },
      file: 'forged.json',
      trunk_sha: '0'.repeat(40),
      written_at: 0,
    };
    this.forged.add(body);
    return body;
  }

  /** `forged-never-read`: no input the world forged reaches the log. */
  checkFed(body: EventBody): void {
    if (this.forged.has(body))
      throw new Failure('forged-never-read', `a forged ${body.type} line, put in a job's result by a hostile agent, reached the log`);
  }

  // ---- faults between steps ----

  /** An agent dies (SIGKILL, lost host, cut off) while holding a job: within two heartbeats its job is claimed again. */
  agentDies(): boolean {
    const running = this.jobs.filter((j) => j.repository === OURS && j.state === 'running');
    if (running.length === 0) return false;
    const job = running[this.sim.c.index('dying', running.length)]!;
    job.dead.push(job.attempt);
    job.state = 'queued';
    return true;
  }

  /** The next result an agent reports carries something it has no business reporting. */
  hostileAgent(): void {
    this.forgeNext = true;
  }

  /** The other repository's engine decides: a job of its own, with our block names, joins the queue. */
  neighbourJob(): void {
    const d = this.sim.log.findLast((e) => QUEUED_KINDS.has(e.type));
    if (!d) return;
    this.jobs.push({
      id: this.nextJob++,
      repository: NEIGHBOUR,
      role: roleOf(d),
      generation: 1,
      run: 0,
      seq: d.seq,
      d,
      attempt: 0,
      state: 'queued',
      dead: [],
    });
  }

  /** The other repository's agents take its oldest job. */
  neighbourServed(): void {
    const job = this.jobs.find((j) => j.repository === NEIGHBOUR && j.state === 'queued');
    if (job) job.state = 'done';
  }

  /**
   * The leader is paused past its lease: a standby takes the lease (the next generation) and
   * resumes; the paused one keeps what it had in flight in its own process. Returns whether
   * it happened (only with a standby waiting, and not while another is paused).
   */
  pause(items: Item[]): boolean {
    if (this.standbys === 0 || this.paused) return false;
    this.paused = {
      generation: this.generation,
      items: items.filter((x) => x.kind === 'effect' && x.job === undefined),
      wakeAt: this.sim.step + 2 + this.sim.c.amount('paused-for', 30),
    };
    return true;
  }

  /**
   * The paused leader wakes: it appends its next line (the fence refuses it: its generation
   * is not the lease's) and its renewal finds the lease gone; it stops. A leader that goes on
   * instead starts the effects it had in flight.
   */
  wake(): Item[] {
    const p = this.paused;
    if (!p || this.sim.step < p.wakeAt) return [];
    this.paused = undefined;
    this.sim.cov?.fault('world:paused-leader-woke');
    if (this.rules.fenced(p.generation, this.generation))
      throw new Failure(
        'stale-generation-never-writes',
        `a leader of generation ${p.generation}, woken after generation ${this.generation} took its lease, appended a line the log kept`,
      );
    if (this.rules.stopsOnLeaseLost) return [];
    // It goes on: what it had in flight it carries out, as generation p.generation.
    return p.items.map((x) => ({ ...x, replaced: p.generation }) as Item);
  }

  /** The database restarts: every connection drops. The leader stops (TRON_DB_LOST); waiting standbys reconnect and wait on. */
  restart(): void {
    const waiting = this.standbys;
    if (!this.rules.standbyRidesRestart) this.standbys = 0;
    if (this.standbys < waiting)
      throw new Failure(
        'standby-rides-restart',
        `the database restarted and ${waiting - this.standbys} of ${waiting} waiting standbys ended instead of reconnecting and waiting on`,
      );
  }

  /** `replaced-leader-stops`: an effect of a replaced leader's generation never starts. */
  checkEffect(item: Item): void {
    if (item.kind === 'effect' && item.replaced !== undefined)
      throw new Failure(
        'replaced-leader-stops',
        `the leader of generation ${item.replaced}, woken after its lease was taken, went on and started ${item.d.type}${'block' in item.d ? ` for ${item.d.block}` : ''}`,
      );
  }
}
