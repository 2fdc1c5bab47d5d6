/**
 * The event log in PostgreSQL (`[cluster] database`): a table of the same signed lines
 * the file log writes, keyed by (repository, run, seq), so `status` and recovery read a
 * run from any host. The database, not the engine, keeps the one-writer rule: every row
 * carries the generation of the writer's lease (engine/log/lease.ts), and a trigger
 * refuses a row whose generation is not the repository's live lease — an engine that lost
 * its lease (paused, cut off, replaced by a standby) cannot append one more line.
 *
 * Durability is the file log's group commit: `append` stamps, validates, signs and queues
 * the line at once (the engine's step is synchronous); a flush inserts every queued line
 * in one statement, and `sync` resolves once every line so far is committed. The engine
 * starts no effect before that (engine.ts), so intent still comes before effect. A killed
 * engine loses the lines not yet committed — as the file log loses unflushed lines when
 * the machine dies: only inputs and decisions whose effects never started.
 */
import { renameSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { FaultError, InputError } from '../core/errors.ts';
import { redactUrlSecrets } from '../core/database-url.ts';
import { isRepositoryName, isRunId, shownName } from '../core/names.ts';
import type { Clock } from '../os/clock.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import type { InputCode } from '../core/problems.ts';
import { chainStartOf, type LogRead, readLines, stampLine } from './eventlog.ts';
import type { QueuedJob, RunLog } from './run-log.ts';
import { inTurn } from './in-turn.ts';
import { migrate } from '../schema/migrate.ts';

/** The SQLSTATE the fencing trigger raises: an append from a generation that does not hold the lease. */
export const FENCED = 'TRN01';

/** The database cannot be reached or refused the connection. */
export class DatabaseUnreachableError extends FaultError<'TRON_DB_UNREACHABLE'> {
  constructor(url: string, reason: string) {
    super('TRON_DB_UNREACHABLE', `cannot reach the database at ${redact(url)}: ${reason}; check that it runs, and the URL's host and port`);
  }
}

/** PostgreSQL's SQLSTATE for a connection refused because the server or the role has no connection left. */
const TOO_MANY_CONNECTIONS = '53300';

/**
 * The database refused one more connection: `max_connections` is reached, or the role's
 * CONNECTION LIMIT. Each tron agent holds 4 + its slots, an engine up to 4, or 4 + its
 * slots when it runs jobs itself (docs/cluster.md, "Connections").
 */
export class DatabaseFullError extends FaultError<'TRON_DB_FULL'> {
  constructor(url: string, reason: string) {
    super(
      'TRON_DB_FULL',
      `the database at ${redact(url)} takes no more connections (${reason}); each tron agent holds 4 + its slots and an engine up to 4 (4 + its slots when it runs jobs itself): raise max_connections or the role's CONNECTION LIMIT (docs/cluster.md, "Connections")`,
    );
  }
}

/** Whether `err` is PostgreSQL refusing a connection for want of one (too many clients, or the role's limit). */
export function isDatabaseFull(err: unknown): boolean {
  return (err as { code?: unknown } | undefined)?.code === TOO_MANY_CONNECTIONS;
}

/** SQLSTATEs of a server that answered and refused what the URL says: its user or password (28…), or its database (3D000). */
const REFUSED = /^(28|3D000$)/;

/** The database answered and refused the URL's user, password or database name: a mistake in the URL, not a fault. */
export class DatabaseRefusedError extends InputError {
  readonly code = 'TRON_DB_REFUSED' satisfies InputCode;
  constructor(url: string, reason: string, noDatabase: boolean) {
    super([
      {
        code: 'TRON_DB_REFUSED',
        path: redact(url),
        message: noDatabase
          ? `the server answered: ${reason}; name a database it has, or create it (\`createdb -O <user> <name>\`; docs/cluster.md, "Set-up")`
          : `the server answered: ${reason}; correct the user or password in the URL ([cluster] database, TRON_DATABASE_URL or --database; \`psql URL\` tries the same)`,
      },
    ]);
    this.name = 'DatabaseRefusedError';
  }
}

/** A failed connect, as tron says it: no connection left (TRON_DB_FULL), the URL refused (TRON_DB_REFUSED), else unreachable. */
export function connectFailure(url: string, err: unknown): Error {
  const reason = (err as Error).message;
  const code = String((err as { code?: unknown } | undefined)?.code ?? '');
  if (isDatabaseFull(err)) return new DatabaseFullError(url, reason);
  if (REFUSED.test(code)) return new DatabaseRefusedError(url, reason, code === '3D000');
  return new DatabaseUnreachableError(url, reason);
}

/** The engine's lease was taken over or lapsed: the database refuses its appends. */
export class LeaseLostError extends FaultError<'TRON_LEASE_LOST'> {
  constructor(repository: string, detail: string) {
    super(
      'TRON_LEASE_LOST',
      `the lease of ${repository} is no longer this engine's (${detail}); the run stopped here — the engine holding it now goes on, or the next tron start recovers`,
    );
  }
}

/**
 * A write of `generation` to a fenced table (its run files, its key; the lines and jobs go
 * through the log's flush): the fence's refusal is the lease lost, said as such
 * (TRON_LEASE_LOST), never an engine failure — a standby may take over between any two of
 * an engine's statements, its start's too.
 */
export async function fencedWrite<T>(repository: string, generation: number, write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.code === FENCED) throw new LeaseLostError(repository, `the database refused generation ${generation}: ${e.message}`);
    throw err;
  }
}

/** The connection broke mid-run (the database restarted, the network dropped): a line could not be committed. */
export class DatabaseLostError extends FaultError<'TRON_DB_LOST'> {
  constructor(url: string, reason: string) {
    super(
      'TRON_DB_LOST',
      `the database at ${redact(url)} did not commit the run's next line (${reason}); the run stopped here — once the database is back, tron start recovers it from the lines committed before`,
    );
  }
}

/** A URL without its password, for messages. */
export function redact(url: string): string {
  return redactUrlSecrets(url);
}

/** A connection to tron's database, its schema migrated. */
export interface Database {
  readonly url: string;
  readonly client: pg.Client;
  end(): Promise<void>;
}

/**
 * Connects and brings the schema up to this tron's version, under an advisory lock so two
 * starts at once migrate once. A newer schema is refused (SchemaNewerError), unchanged.
 */
export async function openDatabase(url: string): Promise<Database> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  // A dropped connection is reported by the next query; never as an unhandled 'error' event.
  client.on('error', () => undefined);
  oneQueryAtATime(client);
  try {
    await client.connect();
  } catch (err) {
    throw connectFailure(url, err);
  }
  try {
    await migrate(client, url);
  } catch (err) {
    await client.end().catch(() => undefined);
    // The queue library's migrations connect on their own: a database with no connection left says so as this connect would.
    throw isDatabaseFull(err) ? connectFailure(url, err) : err;
  }
  return { url, client, end: () => client.end().catch(() => undefined) };
}

/** The log's appends, the lease's renewals and the readers share the connection: their queries go in turn. */
function oneQueryAtATime(client: pg.Client): void {
  client.query = inTurn(client.query.bind(client) as (...args: unknown[]) => Promise<unknown>) as typeof client.query;
}

/** Where a run's lines live in the table: its repository (`[cluster] repository`) and its id. */
export interface RunKey {
  repository: string;
  run: string;
}

/**
 * A run's key as the table holds it, checked: its run id becomes a folder
 * (`.tron/runs/<run>/`), so a row whose run id is a path — written by anyone but tron — is
 * refused with TRON_DB_NAME, never followed; a repository's name may hold separators (the
 * remote's URL names it) and is made one component where it becomes a folder (names.ts folderOf).
 */
export function checkedRunKey(at: RunKey, url: string): RunKey {
  if (isRunId(at.run) && isRepositoryName(at.repository)) return at;
  const bad = isRunId(at.run)
    ? `repository ${shownName(at.repository)}, a name tron never writes (empty, longer than 255 characters, or with a control character)`
    : `run ${shownName(at.run)}, a name tron never writes (it would be a path out of the run directory)`;
  throw new InputError([
    {
      code: 'TRON_DB_NAME',
      path: `${redact(url)}: tron_events`,
      message: `the table holds a ${bad}; nothing was written for it — remove its rows as the database's owner, and check who holds the engine's role`,
    },
  ]);
}

/** The lines of one run, in seq order. */
export async function runLines(db: Database, at: RunKey): Promise<string[]> {
  const { rows } = await db.client.query<{ line: string }>('select line from tron_events where repository = $1 and run = $2 order by seq', [
    at.repository,
    at.run,
  ]);
  return rows.map((r) => r.line);
}

/** Reads a run from the table exactly as the file log is read (signatures checked where `key` is given). */
export async function readPgRun(db: Database, at: RunKey, key: Buffer | undefined): Promise<LogRead> {
  return readLines(await runLines(db, at), `postgres:${at.repository}`, at.run, key);
}

/** The newest run in the table: of `repository` when given, else of any (the one written last). */
export async function latestPgRun(db: Database, repository?: string): Promise<RunKey | undefined> {
  const { rows } =
    repository === undefined
      ? await db.client.query<RunKey>('select repository, run from tron_events where seq = 1 order by written_at desc, run desc limit 1')
      : await db.client.query<RunKey>(
          'select repository, run from tron_events where repository = $1 and seq = 1 order by run desc limit 1',
          [repository],
        );
  return rows[0] && checkedRunKey(rows[0], db.url);
}

/**
 * The statement that commits a batch of lines — and, when some of them ask for jobs, those
 * jobs — as one: a data-modifying WITH runs to completion in the same statement, so either
 * every line and every job is committed or none is (the fencing triggers refuse both alike).
 */
export function linesStatement(
  at: RunKey,
  generation: number,
  batch: ReadonlyArray<{ seq: number; line: string; job?: QueuedJob }>,
): { text: string; values: unknown[] } {
  const values: unknown[] = [at.repository, at.run, generation, batch.map((b) => b.seq), batch.map((b) => b.line)];
  const lines = `insert into tron_events (repository, run, seq, generation, line)
    select $1, $2, u.seq, $3, u.line from unnest($4::integer[], $5::text[]) as u(seq, line)`;
  const jobs = batch.filter((b) => b.job !== undefined);
  if (jobs.length === 0) return { text: lines, values };
  values.push(
    jobs.map((b) => b.seq),
    jobs.map((b) => b.job!.kind),
    jobs.map((b) => b.job!.role),
    jobs.map((b) => JSON.stringify(b.job!.request)),
    jobs.map((b) => b.job!.pool ?? null),
  );
  return {
    text: `with lines as (${lines} returning 1)
      insert into tron_jobs (repository, run, seq, generation, kind, role, request, pool)
      select $1, $2, j.seq, $3, j.kind, j.role, j.request, j.pool
      from unnest($6::integer[], $7::text[], $8::text[], $9::jsonb[], $10::text[]) as j(seq, kind, role, request, pool)`,
    values,
  };
}

/** What the log needs of the lease it writes under (engine/log/lease.ts): whose it is, its generation, and letting it go at close. */
export interface WritingLease {
  readonly repository: string;
  readonly generation: number;
  release(): Promise<void>;
}

/**
 * A run's log in the table, written by the holder of `lease`. Opened (async: the rows so
 * far) by `PgEventLog.open`, then attached to the engine's clock by `attach`.
 */
export class PgEventLog implements RunLog {
  groupCommit = false;
  private readonly list: TronEvent[];
  private readonly pending: Array<{ seq: number; line: string; job?: QueuedJob }> = [];
  private committed: number;
  private flushing: Promise<void> | undefined;
  private broken: Error | undefined;
  private closed = false;
  private clock: Clock | undefined;
  /** Every line of the run, for the copy written at close. */
  private readonly lines: string[];
  /** Where the copy goes once the run is over: the run directory's events.jsonl (see `close`). */
  private readonly mirror: string | undefined;

  private constructor(
    private readonly db: Database,
    private readonly lease: WritingLease,
    readonly at: RunKey,
    read: LogRead,
    private readonly signing: { key: Buffer; chain: string } | undefined,
    lines: string[],
    mirror: string | undefined,
  ) {
    this.list = read.events;
    this.committed = read.events.length;
    // A connection that broke (the database restarted, the network dropped) takes no more lines: the next append says so at once.
    const lost = (reason: string) => {
      if (!this.closed) this.broken ??= new DatabaseLostError(db.url, reason);
    };
    db.client.on('error', (err: Error) => lost(err.message));
    db.client.on('end', () => lost('the connection ended'));
    this.lines = lines;
    this.mirror = mirror;
  }

  /** Opens `run` of the lease's repository: continues after its rows (none for a new run). */
  static async open(
    db: Database,
    lease: WritingLease,
    run: string,
    key: Buffer | undefined,
    opts: { mirror?: string } = {},
  ): Promise<PgEventLog> {
    const at = { repository: lease.repository, run };
    const lines = await runLines(db, at);
    const read = readLines(lines, `postgres:${at.repository}`, at.run, key);
    // As the file log: an unsigned run stays unsigned, a signed one continues its chain.
    const signing =
      key && (read.signed || read.events.length + read.foreign.length === 0)
        ? { key, chain: read.chain ?? chainStartOf(key, run) }
        : undefined;
    return new PgEventLog(db, lease, at, read, signing, lines, opts.mirror);
  }

  /** The clock that stamps each line (the engine's pinned clock). */
  attach(clock: Clock): this {
    this.clock = clock;
    return this;
  }

  get events(): readonly TronEvent[] {
    return this.list;
  }

  /** The lease generation this log writes with. */
  get generation(): number {
    return this.lease.generation;
  }

  append(body: EventBody): TronEvent {
    if (this.closed) throw new Error(`${this.where}: append after close`);
    if (this.broken) throw this.broken;
    if (!this.clock) throw new Error(`${this.where}: append before attach`);
    const seq = this.list.length + 1;
    const { event, line } = stampLine(body, seq, this.clock.now(), this.signing);
    this.pending.push({ seq, line });
    this.lines.push(line);
    this.list.push(event);
    // Lines appended in one synchronous step go in one insert; the flush starts after it.
    if (this.flushing === undefined) queueMicrotask(() => void this.flush().catch(() => undefined));
    return event;
  }

  /** The job the line `seq` (still queued) asks for: committed in the same statement as the line (engine/queue/pg-jobs.ts). */
  enqueue(seq: number, job: QueuedJob): void {
    const entry = this.pending.find((p) => p.seq === seq);
    if (!entry) throw new Error(`${this.where}: the job of line ${seq} comes after its line was flushed`);
    entry.job = job;
  }

  private get where(): string {
    return `postgres:${this.at.repository}/${this.at.run}`;
  }

  /** Inserts what is queued, one statement at a time; the generation's check is the database's. */
  private flush(): Promise<void> {
    if (this.flushing !== undefined) return this.flushing;
    if (this.pending.length === 0) return Promise.resolve();
    const batch = this.pending.splice(0);
    const flushing = this.db.client
      .query(linesStatement(this.at, this.lease.generation, batch))
      .then(
        () => {
          this.committed = batch.at(-1)!.seq;
        },
        (err: Error & { code?: string }) => {
          this.broken =
            err.code === FENCED
              ? new LeaseLostError(this.at.repository, `the database refused generation ${this.lease.generation}: ${err.message}`)
              : new DatabaseLostError(this.db.url, err.message);
          throw this.broken;
        },
      )
      .finally(() => {
        this.flushing = undefined;
        // Lines appended while this insert ran go next, without waiting for a sync.
        if (this.pending.length > 0 && !this.broken) queueMicrotask(() => void this.flush().catch(() => undefined));
      });
    this.flushing = flushing;
    return flushing;
  }

  /** Resolves once every line appended so far is committed. */
  async sync(): Promise<void> {
    const target = this.list.length;
    while (this.committed < target) {
      if (this.broken) throw this.broken;
      await this.flush();
    }
    if (this.broken) throw this.broken;
  }

  whenDurable(then: () => void): void {
    // A failure of `then` breaks the log: the engine's next sync reports it and the run ends.
    this.sync()
      .then(then)
      .catch((err: Error) => {
        this.broken ??= err;
      });
  }

  /**
   * Commits the rest, then gives the lease up (a standby takes over at once) and
   * disconnects. With `mirror`, the run's committed lines are copied there first (written
   * whole, then renamed): the commands that read a run directory — `report`, `replay`,
   * `logs`, `view` — read a finished run on this host as before. The table stays the log
   * of record: a start brings its latest run over any copy (engine/log/cluster.ts).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.sync();
      if (this.mirror) {
        writeFileSync(`${this.mirror}.from-database`, this.lines.length === 0 ? '' : `${this.lines.join('\n')}\n`);
        renameSync(`${this.mirror}.from-database`, this.mirror);
      }
    } finally {
      this.closed = true;
      await this.lease.release();
      await this.db.end();
    }
  }
}
