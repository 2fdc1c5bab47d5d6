/**
 * `tron start --watch` with `[intake]`: new and edited issues are picked up by polling
 * the labelled list every `[intake] poll`, with the list's ETag — an unchanged list is a
 * 304, which GitHub does not count against the rate limit, so an idle poll costs nothing.
 * A changed list is taken in (engine/forge/sync.ts: blocks, and one comment per refused
 * version of an issue) and handed to the engine as a new register, which it records as
 * `register.loaded`: the decision path sees the poll only as that recorded input.
 *
 * The poll's timer lives here, off the decision path. A rate limit waits as long as the
 * forge asked before the next poll; any other failure is said once and tried at the next.
 */
import type { Block } from '../project/register.ts';
import { checkRegister } from '../project/register.ts';
import { type Forge, ForgeError } from './forge.ts';
import { type Intake, takeIssuesIn } from './sync.ts';

export interface IssuePollerOptions {
  forge: Forge;
  label: string;
  intervalMs: number;
  /** The list's ETag from the start's intake. */
  etag?: string;
  /** The block files' blocks now (they keep working alongside). */
  files: () => Block[] | undefined;
  /** A new register: the files' blocks and the issues'. */
  onChange: (blocks: Block[], intake: Intake) => void;
  print: (line: string) => void;
}

export class IssuePoller {
  private timer: NodeJS.Timeout | undefined;
  private etag: string | undefined;
  private stopped = false;
  private lastError = '';
  /** A rate limit's wait, for the next poll only. */
  private nextWait: number | undefined;

  constructor(private readonly o: IssuePollerOptions) {
    this.etag = o.etag;
  }

  start(): void {
    this.schedule(this.o.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One poll, now (tests call it; the timer calls it every interval). */
  async poll(): Promise<'unchanged' | 'changed' | 'failed'> {
    try {
      const got = await takeIssuesIn(this.o.forge, this.o.label, this.etag ? { etag: this.etag } : {});
      this.lastError = '';
      if (got === 'unchanged') return 'unchanged';
      this.etag = got.etag;
      const files = this.o.files();
      if (!files) return 'failed';
      const ids = new Set(files.map((b) => b.id));
      const blocks = [...files, ...got.blocks.filter((b) => !ids.has(b.id))];
      const problems = checkRegister(blocks);
      if (problems.length > 0) {
        for (const p of problems) this.o.print(`${p.code}: ${p.path}: ${p.message}`);
        this.o.print('tron: the issues make the register inconsistent; keeping the blocks as they were');
        return 'failed';
      }
      this.o.onChange(blocks, got);
      return 'changed';
    } catch (err) {
      const e = err instanceof ForgeError ? err : new ForgeError('transient', String(err));
      if (e.message !== this.lastError) this.o.print(`tron: could not read the issues labelled ${this.o.label}: ${e.message}`);
      this.lastError = e.message;
      if (e.retryAfterMs !== undefined) this.nextWait = Math.max(this.o.intervalMs, e.retryAfterMs);
      return 'failed';
    }
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.poll().finally(() => {
        const wait = this.nextWait ?? this.o.intervalMs;
        this.nextWait = undefined;
        this.schedule(wait);
      });
    }, ms);
  }
}
