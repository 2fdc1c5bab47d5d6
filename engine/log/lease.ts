/**
 * One engine per repository, fenced by the database: a row of `tron_lease` per repository
 * holds the generation of the engine that may write, and until when. Time is the
 * database's (`now()`), never a host's, so clocks that disagree cannot give two hosts the
 * lease. Taking a lapsed (or released) lease raises the generation by one; the trigger on
 * `tron_events` (engine/log/pg-log.ts) refuses every row of another generation, so an
 * engine that was replaced — paused, cut off, killed mid-flush — cannot write one more line.
 */
import { hostname } from 'node:os';
import pg from 'pg';
import { InputError } from '../core/errors.ts';
import type { InputCode } from '../core/problems.ts';
import { type Clock, sleep, systemClock } from '../os/clock.ts';
import type { Database } from './pg-log.ts';

/** Another engine holds the repository's lease and it has not lapsed. */
export class LeaseHeldError extends InputError {
  readonly code = 'TRON_LEASE_HELD' satisfies InputCode;
  constructor(
    readonly repository: string,
    readonly holder: string,
    readonly generation: number,
    expiresInMs: number,
  ) {
    super([
      {
        code: 'TRON_LEASE_HELD',
        path: `[cluster] repository "${repository}"`,
        message: `another engine leads this repository: ${holder} (generation ${generation}; its lease runs ${Math.max(0, Math.ceil(expiresInMs / 1000))} s more unless renewed); stop it, or start this one with --standby to take over when it dies`,
      },
    ]);
    this.name = 'LeaseHeldError';
  }
}

export interface Lease {
  readonly repository: string;
  readonly generation: number;
  /** Who holds it: "host pid N". */
  readonly holder: string;
  /** Whether a renewal found it gone (taken over or lapsed). */
  readonly lost: boolean;
  /** Renews it now; false when it is no longer this generation's. */
  renew(): Promise<boolean>;
  /** Ends it now (a standby may take over at once); stops the renewals. */
  release(): Promise<void>;
}

export interface LeaseOptions {
  repository: string;
  /** How long a lease lasts unrenewed; it is renewed every third of it. */
  periodMs: number;
  holder?: string;
  /** Called once when a renewal finds the lease gone. */
  onLost?: () => void;
  /** Times the renewals and a standby's tries (the system's by default); the lease's own time is the database's. */
  clock?: Clock;
}

/** Takes the repository's lease, or throws LeaseHeldError naming the live holder. */
export async function acquireLease(db: Database, o: LeaseOptions): Promise<Lease> {
  const got = await tryLease(db, o);
  if (got.taken) return got.lease;
  throw new LeaseHeldError(o.repository, got.holder, got.generation, got.expiresInMs);
}

type Attempt =
  | { taken: true; lease: Lease; generation: number }
  | { taken: false; holder: string; generation: number; expiresInMs: number };

/** One try: the lease when it is free (never held, lapsed, released), else who holds it. */
export async function tryLease(db: Database, o: LeaseOptions): Promise<Attempt> {
  const holder = o.holder ?? `${hostname()} pid ${process.pid}`;
  const interval = `${Math.ceil(o.periodMs)} milliseconds`;
  const { rows } = await db.client.query<{ generation: string }>(
    `insert into tron_lease (repository, generation, holder, expires_at) values ($1, 1, $2, now() + $3::interval)
     on conflict (repository) do update
       set generation = tron_lease.generation + 1, holder = excluded.holder, expires_at = excluded.expires_at
       where tron_lease.expires_at <= now()
     returning generation`,
    [o.repository, holder, interval],
  );
  if (rows[0]) {
    const generation = Number(rows[0].generation);
    return { taken: true, generation, lease: new HeldLease(db, o, holder, generation, interval) };
  }
  const held = await db.client.query<{ holder: string; generation: string; ms: number }>(
    `select holder, generation, extract(epoch from (expires_at - now())) * 1000 as ms from tron_lease where repository = $1`,
    [o.repository],
  );
  const row = held.rows[0]!;
  return { taken: false, holder: row.holder, generation: Number(row.generation), expiresInMs: Number(row.ms) };
}

/**
 * --standby: tries every quarter period until the lease is free — the leader stopped, or
 * died and its lease lapsed — then holds it. `stop` gives up waiting (undefined).
 */
export async function awaitLease(
  db: Database,
  o: LeaseOptions & { stop?: AbortSignal; waiting?: (holder: string) => void },
): Promise<Lease | undefined> {
  let said = false;
  for (;;) {
    if (o.stop?.aborted) return undefined;
    const got = await tryLease(db, o);
    if (got.taken) return got.lease;
    if (!said) o.waiting?.(got.holder);
    said = true;
    // The standby's process waits on this alone: it keeps it alive.
    await sleep(o.clock ?? systemClock, Math.max(50, o.periodMs / 4), { keepAlive: true, ...(o.stop ? { signal: o.stop } : {}) });
  }
}

class HeldLease implements Lease {
  lost = false;
  /** Stops the renewals. */
  private readonly stopRenewing: () => void;
  private released = false;

  constructor(
    private readonly db: Database,
    private readonly o: LeaseOptions,
    readonly holder: string,
    readonly generation: number,
    private readonly interval: string,
  ) {
    const every = Math.max(20, o.periodMs / 3);
    this.stopRenewing = (o.clock ?? systemClock).every(every, () => void this.renew().catch(() => undefined));
  }

  get repository(): string {
    return this.o.repository;
  }

  async renew(): Promise<boolean> {
    if (this.lost || this.released) return false;
    const { rowCount } = await this.db.client.query(
      `update tron_lease set expires_at = now() + $3::interval
       where repository = $1 and generation = $2 and expires_at > now()`,
      [this.o.repository, this.generation, this.interval],
    );
    if (rowCount === 1) return true;
    this.lost = true;
    this.stopRenewing();
    this.o.onLost?.();
    return false;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.stopRenewing();
    if (this.lost) return;
    const sql = 'update tron_lease set expires_at = now() where repository = $1 and generation = $2';
    const args = [this.o.repository, this.generation];
    const done = await this.db.client.query(sql, args).then(
      () => true,
      () => false,
    );
    if (done) return;
    // The engine's connection broke (the database restarted, say): let go on a fresh one, so the next start need not wait out the lease.
    // Fenced by the generation: a lease taken over meanwhile is not touched.
    const fresh = new pg.Client({ connectionString: this.db.url, connectionTimeoutMillis: 5_000 });
    fresh.on('error', () => undefined);
    await fresh
      .connect()
      .then(() => fresh.query(sql, args))
      .catch(() => undefined)
      .finally(() => fresh.end().catch(() => undefined));
  }
}
