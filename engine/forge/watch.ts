/**
 * `tron start` with `[intake]`: the labelled list is read again every `[intake] poll`,
 * with the list's ETag — an unchanged list is a 304, which GitHub does not count against
 * the rate limit, so an idle poll costs nothing. A changed list:
 *
 * - with `--watch`, is taken in (engine/forge/sync.ts: blocks, and one comment per refused
 *   version of an issue) and handed to the engine as a new register, which it records as
 *   `register.loaded`;
 * - with or without it, is checked for issues of blocks under way that left it: each is
 *   looked up — closed by a person, or the label taken off — and handed to the engine as
 *   `issue.withdrawn` (engine/core/decide/withdraw.ts decides what stops).
 *
 * The decision path sees the poll only as those recorded inputs. A webhook (`tron serve`,
 * engine/forge/wake.ts) only makes the next poll come at once, so what is recorded is the
 * same whichever way the engine heard; a duplicate delivery is one more poll, a 304.
 *
 * The poll's timer lives here, off the decision path. A rate limit waits as long as the
 * forge asked before the next poll; any other failure is said once and tried at the next.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import type { Block } from '../project/register.ts';
import { checkRegister } from '../project/register.ts';
import { ForgeError, type IssueTracker, isOwnComment } from './forge.ts';
import { type Intake, takeIssuesIn } from './sync.ts';

export interface IssuePollerOptions {
  forge: IssueTracker;
  label: string;
  intervalMs: number;
  /** The list's ETag from the start's intake. */
  etag?: string;
  /** The block files' blocks now (they keep working alongside). */
  files: () => Block[] | undefined;
  /** A new register: the files' blocks and the issues'. */
  onChange: (blocks: Block[], intake: Intake) => void;
  /** --watch: new and edited issues join the register (without it, only withdrawals are told). */
  takeNew?: boolean;
  /** The issue behind each block taken in (kept up to date by the caller). */
  issues?: Record<string, { number: number }>;
  /** A block's issue left the list: the input for the engine. */
  onWithdrawn?: (body: Extract<EventBody, { type: 'issue.withdrawn' }>) => void;
  print: (line: string) => void;
  /** Times the polls (the system's by default): the engine's clock. */
  clock?: Clock;
}

export class IssuePoller {
  /** Cancels the next poll. */
  private cancel: (() => void) | undefined;
  private etag: string | undefined;
  private stopped = false;
  private lastError = '';
  /** A rate limit's wait, for the next poll only. */
  private nextWait: number | undefined;
  /** Blocks no longer to be watched for: landed, given up, or already told withdrawn. */
  private readonly settled = new Set<string>();
  private polling: Promise<unknown> | undefined;
  private again = false;

  constructor(private readonly o: IssuePollerOptions) {
    this.etag = o.etag;
  }

  start(): void {
    this.schedule(this.o.intervalMs);
  }

  stop(): void {
    this.stopped = true;
    this.cancel?.();
  }

  /** A reporter: a block that landed or was given up is no longer watched for. */
  event(e: TronEvent): void {
    if (e.type === 'block.landed' || e.type === 'block.abandoned') this.settled.add(e.block);
  }

  /** A webhook said something changed: poll now (once more after the poll under way, if one is). */
  wake(): void {
    if (this.stopped) return;
    if (this.polling !== undefined) {
      this.again = true;
      return;
    }
    this.cancel?.();
    this.pollThenSchedule();
  }

  /** Polls, then polls again at once when a webhook woke it meanwhile, else at the next wait. */
  private pollThenSchedule(): void {
    this.polling = this.poll().finally(() => {
      this.polling = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      } else this.schedule(this.nextWaitOr());
    });
  }

  /** One poll, now (tests call it; the timer calls it every interval). */
  async poll(): Promise<'unchanged' | 'changed' | 'failed'> {
    try {
      const got = await takeIssuesIn(this.o.forge, this.o.label, this.etag ? { etag: this.etag } : {});
      this.lastError = '';
      if (got === 'unchanged') return 'unchanged';
      // The ETag moves on only once the withdrawals are told: a failure here is read again at the next poll.
      await this.withdrawals(got);
      this.etag = got.etag;
      if (!this.o.takeNew) return 'changed';
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

  /** Issues of blocks under way that left the list: looked up, and told to the engine. */
  private async withdrawals(got: Intake): Promise<void> {
    if (!this.o.onWithdrawn || !this.o.issues) return;
    const listed = new Set([...Object.values(got.issues).map((i) => i.number), ...got.refused.map((r) => r.number)]);
    for (const [block, { number }] of Object.entries(this.o.issues)) {
      if (this.settled.has(block) || listed.has(number)) continue;
      const issue = await this.o.forge.issue(number);
      const action = !issue || issue.state === 'closed' ? 'closed' : issue.labels.includes(this.o.label) ? undefined : 'unlabelled';
      if (!action) continue;
      const self = await this.o.forge.self();
      const said = (await this.o.forge.comments(number)).filter((c) => !isOwnComment(c, self)).at(-1);
      this.settled.add(block);
      this.o.onWithdrawn({
        type: 'issue.withdrawn',
        block,
        issue: number,
        action,
        ...(action === 'closed' && issue?.closedBy && { by: issue.closedBy }),
        ...(said && { words: `${said.authorName ?? said.author}: ${said.body.trim().slice(0, 2000)}` }),
      });
    }
  }

  private nextWaitOr(): number {
    const wait = this.nextWait ?? this.o.intervalMs;
    this.nextWait = undefined;
    return wait;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.cancel?.();
    // Ref'd: a watching engine lives on its polls.
    this.cancel = (this.o.clock ?? systemClock).after(ms, () => this.pollThenSchedule(), { keepAlive: true });
  }
}
