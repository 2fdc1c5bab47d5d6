/**
 * `tron serve` over the log in PostgreSQL: the server follows run directories (follow.ts
 * reads a file as it grows), so this keeps one, in a folder of its own, in step with the
 * table — the latest run of the repository (or of the database), its committed lines
 * appended in seq order as they are committed, beside the run's spine and manifest. A
 * newer run in the table starts a directory of its own, and the hub switches to it as it
 * does for a new run directory. Only this mirror writes its folder: lines are appended
 * whole, once.
 *
 * It looks at the table every `pollMs` (a reader's look, off the engine's path; the engine
 * never waits on it), and keeps whether an engine holds the repository's lease, for the
 * state's `engine`.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DatabaseSource, findRun } from '../log/db-read.ts';
import { type Database, openDatabase, type RunKey } from '../log/pg-log.ts';
import { readRunFiles } from '../log/pg-run-files.ts';
import { InputError } from '../core/errors.ts';

export class DatabaseMirror {
  /** Whether an engine held the lease of the run's repository at the last look. */
  running = false;
  /** The generation of that lease, while it is held (GET /metrics: tron_lease_generation). */
  generation: number | undefined;
  private at: RunKey | undefined;
  private seq = 0;
  /** Cancels the next look. */
  private cancel: (() => void) | undefined;
  private looking: Promise<void> | undefined;
  private closed = false;

  private constructor(
    private readonly db: Database,
    private readonly source: DatabaseSource,
    /** The folder of run directories the server follows. */
    readonly runs: string,
    private readonly pollMs: number,
    private readonly clock: Clock,
  ) {}

  /** Connects (migrating the schema as any open does), mirrors what there is, then keeps looking. */
  static async start(source: DatabaseSource, runs: string, pollMs = 200, clock: Clock = systemClock): Promise<DatabaseMirror> {
    const db = await openDatabase(source.url);
    const mirror = new DatabaseMirror(db, source, runs, pollMs, clock);
    mkdirSync(runs, { recursive: true });
    try {
      await mirror.look();
    } catch (err) {
      await db.end();
      throw err;
    }
    mirror.schedule();
    return mirror;
  }

  private schedule(): void {
    if (this.closed) return;
    this.cancel = this.clock.after(this.pollMs, () => {
      this.looking = this.look()
        // A failed look (the database restarting, say) is tried again at the next; the pages show the run as of the last.
        .catch(() => undefined)
        .finally(() => this.schedule());
    });
  }

  /** One look: a newer run, the lines committed since the last, the lease. */
  async look(): Promise<void> {
    const latest = await findRun(this.db, this.source, undefined).catch((err: unknown) => {
      if (err instanceof InputError && err.problems[0]?.code === 'TRON_NO_RUN') return undefined;
      throw err;
    });
    if (!latest) return;
    if (!this.at || latest.run !== this.at.run || latest.repository !== this.at.repository) {
      // Its fixed files first: the hub switches once events.jsonl is there.
      const dir = join(this.runs, latest.run);
      mkdirSync(dir, { recursive: true });
      const files = await readRunFiles(this.db, latest);
      for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), body);
      this.at = latest;
      this.seq = 0;
    }
    const at = this.at;
    const { rows } = await this.db.client.query<{ seq: number; line: string }>(
      'select seq, line from tron_events where repository = $1 and run = $2 and seq > $3 order by seq',
      [at.repository, at.run, this.seq],
    );
    const file = join(this.runs, at.run, 'events.jsonl');
    // Lines commit in seq order with no gap; a gap in what one look saw waits for the next.
    let text = '';
    for (const r of rows) {
      if (r.seq !== this.seq + 1) break;
      text += `${r.line}\n`;
      this.seq = r.seq;
    }
    if (text || !existsSync(file)) appendFileSync(file, text);
    const lease = await this.db.client.query<{ generation: string }>(
      'select generation from tron_lease where repository = $1 and expires_at > now()',
      [at.repository],
    );
    this.running = lease.rows.length > 0;
    this.generation = lease.rows[0] ? Number(lease.rows[0].generation) : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancel?.();
    await this.looking;
    await this.db.end();
  }
}
