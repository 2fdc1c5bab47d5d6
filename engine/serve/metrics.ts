/**
 * `GET /metrics`: the repository's runs in the Prometheus text format, through prom-client.
 *
 * Counters and histograms are the events of every run on disk, each folded in once: at a
 * scrape, the runs not yet read are read oldest first (a run before the latest is over and
 * never changes, earlier.ts), and the latest only from where the last scrape left it. So a
 * counter only rises while `tron serve` runs; it starts again from what is on disk when
 * `tron serve` restarts (a reset, as Prometheus expects of any process), and what
 * `tron clean` removes is not taken back. Gauges are read at the scrape: the blocks of the
 * latest run by phase, whether an engine is at work, and the lease's generation where the
 * runs come from the database.
 *
 * Names and units follow Prometheus's conventions: `tron_` first, counters end in
 * `_total`, durations are `_seconds`.
 */
import { join } from 'node:path';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { TronEvent, TestRun } from '../core/events.ts';
import { readLog } from '../log/eventlog.ts';
import type { RunFollower } from './follow.ts';
import { breathe, type RunList } from './runs.ts';

/** What a scrape reads besides the events. */
export interface MetricGauges {
  /** The phases a board shows, so a phase with no block reads 0 rather than vanishing. */
  phases: readonly string[];
  engineUp: boolean;
  /** The generation of the repository's lease in the database, when the runs come from one and it is held. */
  leaseGeneration?: number;
}

/** Where a run is in the ingest: the last seq folded in. */
interface Read {
  seen: number;
  /** Turns dispatched and not yet answered: when, and by which role. */
  turns: Map<string, { ts: number; role: string; failed?: boolean }>;
}

const MINUTE = 60;
const HOUR = 60 * MINUTE;

export class Metrics {
  readonly registry = new Registry();
  private readonly landed = this.counter('tron_blocks_landed_total', 'Blocks landed (block.landed).', []);
  private readonly parked = this.counter('tron_blocks_parked_total', 'Times a block was parked for the operator (block.parked).', []);
  private readonly abandoned = this.counter('tron_blocks_abandoned_total', 'Blocks given up (block.abandoned).', []);
  private readonly runs = this.counter('tron_runs_finished_total', 'Runs that ended, by exit status (run.finished).', ['exit']);
  private readonly turns = this.counter(
    'tron_turns_total',
    'Worker turns by role and outcome: the word the gateway accepted (lowercase), refused, or failed (no reply).',
    ['role', 'outcome'],
  );
  private readonly gateFailures = this.counter('tron_gate_failures_total', 'Failed facts of the truth gate, by fact.', ['fact']);
  private readonly escalations = this.counter(
    'tron_escalations_total',
    'Steps along the exception spine (escalation.raised), by trouble and the handler it went to.',
    ['trouble', 'handler'],
  );
  private readonly usd = this.counter('tron_spend_usd_total', 'USD spent by workers, where the cost is known, by role.', ['role']);
  private readonly tokens = this.counter('tron_tokens_total', 'Tokens used by workers (input, cached and output), by role.', ['role']);
  private readonly turnSeconds = new Histogram({
    name: 'tron_turn_duration_seconds',
    help: 'A worker turn, from its dispatch to its reply (or failure), by role.',
    labelNames: ['role'],
    buckets: [1, 5, 15, 30, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 20 * MINUTE, 30 * MINUTE, HOUR],
    registers: [this.registry],
  });
  private readonly leadSeconds = new Histogram({
    name: 'tron_block_lead_time_seconds',
    help: 'A block from the first register that named it (in any run on disk) to its landing.',
    labelNames: [],
    buckets: [MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR, 72 * HOUR, 168 * HOUR],
    registers: [this.registry],
  });
  private readonly testSeconds = new Histogram({
    name: 'tron_test_run_duration_seconds',
    help: "The engine's own setup and test runs, by where (gate, merge, lane, trunk) and step (setup, test).",
    labelNames: ['where', 'step'],
    buckets: [0.1, 0.5, 1, 5, 10, 30, MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 30 * MINUTE],
    registers: [this.registry],
  });
  private readonly blocks = new Gauge({
    name: 'tron_blocks',
    help: 'Blocks of the latest run, by phase.',
    labelNames: ['phase'],
    registers: [this.registry],
  });
  private readonly up = new Gauge({
    name: 'tron_engine_up',
    help: '1 while an engine is at work on the latest run, else 0.',
    registers: [this.registry],
  });
  /** Listed only while there is a lease to tell of: a generation of 0 would be a lie. */
  private readonly lease = new Gauge({
    name: 'tron_lease_generation',
    help: "The generation of the repository's lease ([cluster]; only while it is held and the runs come from the database).",
    registers: [],
  });
  private leaseListed = false;

  /** Runs folded in whole. */
  private readonly done = new Set<string>();
  /** The run being followed (the latest at the last scrape). */
  private current: { run: string; read: Read } | undefined;
  /** Blocks not yet landed: when a register first named each. */
  private readonly firstSeen = new Map<string, number>();
  private updating: Promise<void> | undefined;

  constructor(private readonly list: RunList) {}

  private counter(name: string, help: string, labelNames: string[]): Counter<string> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** The text of a scrape: every run folded in up to now, then the gauges. */
  async scrape(latest: RunFollower | undefined, gauges: MetricGauges): Promise<string> {
    // One fold at a time: a second scrape meanwhile waits for it rather than reading the same runs again.
    this.updating ??= this.update(latest).finally(() => {
      this.updating = undefined;
    });
    await this.updating;
    this.blocks.reset();
    const counts = new Map<string, number>(gauges.phases.map((p) => [p, 0]));
    if (latest) for (const b of latest.state.blocks.values()) counts.set(b.phase, (counts.get(b.phase) ?? 0) + 1);
    for (const [phase, n] of counts) this.blocks.set({ phase }, n);
    this.up.set(gauges.engineUp ? 1 : 0);
    if (gauges.leaseGeneration !== undefined) {
      if (!this.leaseListed) this.registry.registerMetric(this.lease);
      this.leaseListed = true;
      this.lease.set(gauges.leaseGeneration);
    } else if (this.leaseListed) {
      this.registry.removeSingleMetric('tron_lease_generation');
      this.leaseListed = false;
    }
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private async update(latest: RunFollower | undefined): Promise<void> {
    const ids = this.list.ids().reverse();
    for (const id of ids) {
      if (this.done.has(id)) continue;
      if (latest?.run === id) {
        await this.follow(latest);
        continue;
      }
      // Newer than the run the server follows (it appeared a moment ago): the next scrape follows it.
      if (latest === undefined || id > latest.run) continue;
      // Over: whatever of it was not folded in yet, once.
      const read = this.current?.run === id ? this.current.read : { seen: 0, turns: new Map() };
      if (this.current?.run === id) this.current = undefined;
      try {
        for (const e of readLog(join(this.list.dir(id), 'events.jsonl')).events) if (e.seq > read.seen) this.add(read, e);
      } catch {
        // An unreadable log counts for nothing; GET /api/v1/runs says why.
      }
      this.done.add(id);
      await breathe();
    }
  }

  private async follow(f: RunFollower): Promise<void> {
    if (this.current?.run !== f.run) this.current = { run: f.run, read: { seen: 0, turns: new Map() } };
    const read = this.current.read;
    while (read.seen < f.last) {
      const batch = f.readEvents(read.seen + 1, 4096);
      if (batch.length === 0) break;
      for (const e of batch) this.add(read, e);
      await breathe();
    }
  }

  /** One event into the counters and histograms. */
  private add(read: Read, e: TronEvent): void {
    read.seen = e.seq;
    const key = (x: { session: string; turn: number }) => `${x.session}#${x.turn}`;
    switch (e.type) {
      case 'register.loaded':
        for (const b of e.blocks) if (!this.firstSeen.has(b.id)) this.firstSeen.set(b.id, e.ts);
        break;
      case 'block.recovered':
        if (e.phase === 'landed') this.firstSeen.delete(e.block);
        break;
      case 'block.landed': {
        this.landed.inc();
        const first = this.firstSeen.get(e.block);
        if (first !== undefined) this.leadSeconds.observe((e.ts - first) / 1000);
        this.firstSeen.delete(e.block);
        break;
      }
      case 'block.parked':
        this.parked.inc();
        break;
      case 'block.abandoned':
        this.abandoned.inc();
        break;
      case 'run.finished':
        this.runs.inc({ exit: String(e.exit) });
        break;
      case 'block.dispatched':
        read.turns.set(key(e), { ts: e.ts, role: e.role });
        break;
      case 'reply.received': {
        const t = read.turns.get(key(e));
        if (!t) break;
        this.turnSeconds.observe({ role: t.role }, (e.ts - t.ts) / 1000);
        t.failed = !e.ok;
        break;
      }
      case 'reply.accepted':
      case 'reply.refused': {
        // The gateway's reading of the reply: the turn's outcome, counted once.
        const t = read.turns.get(key(e));
        if (!t) break;
        read.turns.delete(key(e));
        const outcome = t.failed ? 'failed' : e.type === 'reply.accepted' ? e.word.toLowerCase() : 'refused';
        this.turns.inc({ role: t.role, outcome });
        break;
      }
      case 'gate.failed':
        for (const f of e.facts) if (!f.ok) this.gateFailures.inc({ fact: f.name });
        break;
      case 'escalation.raised':
        this.escalations.inc({ trouble: e.trouble, handler: e.handler });
        break;
      case 'usage.recorded':
        this.tokens.inc({ role: e.role }, e.input_tokens + e.cached_tokens + e.output_tokens);
        if (e.cost_usd !== undefined) this.usd.inc({ role: e.role }, e.cost_usd);
        break;
      case 'worker.usage':
        this.tokens.inc({ role: e.role }, e.total_tokens);
        break;
      case 'facts.observed':
        this.tests(e.purpose, e.setup, e.tests);
        break;
      case 'candidate.tested':
        this.tests('lane', e.setup, e.tests);
        break;
      case 'trunk.tested':
        this.tests('trunk', undefined, e.tests);
        break;
      default:
        break;
    }
  }

  private tests(where: string, setup: TestRun | undefined, tests: TestRun | null): void {
    if (setup?.ms !== undefined) this.testSeconds.observe({ where, step: 'setup' }, setup.ms / 1000);
    if (tests?.ms !== undefined) this.testSeconds.observe({ where, step: 'test' }, tests.ms / 1000);
  }
}
