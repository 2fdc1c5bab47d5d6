/**
 * Tells each block's issue how its work goes: started, parked (with the reason and how to
 * answer), abandoned, landed (with the sha) — and closes the issue when the block lands.
 * It is a reporter, as `[notify]` is: it sees each event the engine appended and does its
 * work later, on one chain of its own, so a slow or rate-limited forge never holds up a
 * step and nothing it meets is thrown into the engine.
 *
 * Every comment carries a marker and is looked for before it is posted (`commentOnce`),
 * so a retry, a restart or a crash at any instant never posts it twice; the outcome, with
 * the comment's id, is a note in the run's log (`forge.commented` / `forge.failed`). A rate
 * limit waits as long as the forge asked (at most `maxWaitMs`), a transient failure
 * doubles its backoff, up to `retries` times.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { EVENT_VERSION, type EventBody, type TronEvent } from '../core/events.ts';
import { revParse } from '../git/query.ts';
import { commentOnce, ForgeError, type IssueTracker, marker } from './forge.ts';

export interface ProgressOptions {
  /** Where each block's issue is: the forge, or Linear. */
  forge: IssueTracker;
  /** The issue behind each block taken in from the forge. */
  issues: Readonly<Record<string, { number: number; url: string }>>;
  trunk: string;
  /** How the operator's answer command names the repository. */
  repoArg: string;
  retries: number;
  backoffMs: number;
  /** Appends a note to the run's log; false once it is closed. */
  record: (body: EventBody) => boolean;
  print?: (line: string) => void;
  /** The repository: where a recovered landing's sha is read (refs/tron/landed/<id>). */
  repo?: string;
  /** The longest wait for one retry (default a minute). */
  maxWaitMs?: number;
  /** Times the retries' waits and the close's grace (the system's by default): the engine's clock. */
  clock?: Clock;
}

type About = 'started' | 'parked' | 'landed' | 'abandoned';

/** Stands for the landed sha in a text, until git is asked for it. */
const LANDED_SHA = '\u0000landed-sha\u0000';

export class ForgeProgress {
  private chain: Promise<void> = Promise.resolve();
  private run = '';
  private cut = false;
  private readonly sleepers = new Set<() => void>();

  constructor(private readonly o: ProgressOptions) {}

  private get clock(): Clock {
    return this.o.clock ?? systemClock;
  }

  /** Sees an appended event; never throws, never waits. */
  event(e: TronEvent): void {
    if (e.type === 'run.started') this.run = e.run;
    const said = this.say(e);
    if (!said) return;
    const issue = this.o.issues[said.block];
    if (!issue) return;
    this.chain = this.chain.then(() => this.tell(said.block, issue.number, said.about, said.key, said.text));
  }

  /** Waits for what is under way, for at most `graceMs`; then gives up the rest. */
  async close(graceMs = 10_000): Promise<void> {
    let cancel: (() => void) | undefined;
    // Ref'd: the start waits for the issues' telling to end (or the grace to pass) before it exits.
    await Promise.race([this.chain, new Promise<void>((ok) => (cancel = this.clock.after(graceMs, ok, { keepAlive: true })))]);
    cancel?.();
    this.cut = true;
    for (const wake of this.sleepers) wake();
  }

  private say(e: TronEvent): { block: string; about: About; key: string; text: string } | undefined {
    if (e.type === 'block.dispatched' && e.kind === 'build' && e.attempt === 1 && e.turn === 1)
      return { block: e.block, about: 'started', key: '', text: `tron started work on this issue as block \`${e.block}\`.` };
    if (e.type === 'block.parked')
      return {
        block: e.block,
        about: 'parked',
        key: `${this.run}-${e.seq}`,
        text: [
          `tron parked \`${e.block}\`: it waits for an operator.`,
          '',
          `> ${e.reason.split('\n').join('\n> ')}`,
          '',
          'To answer, on the machine tron runs on:',
          '',
          '```',
          `tron answer --repo ${this.o.repoArg} ${e.block} '>>RETRY {"guidance":"…"}'`,
          `tron answer --repo ${this.o.repoArg} ${e.block} '>>ABANDON {"reason":"…"}'`,
          '```',
        ].join('\n'),
      };
    if (e.type === 'block.abandoned')
      return {
        block: e.block,
        about: 'abandoned',
        key: '',
        text: `tron abandoned \`${e.block}\`:\n\n> ${e.reason.split('\n').join('\n> ')}`,
      };
    if (e.type === 'block.landed')
      return { block: e.block, about: 'landed', key: '', text: `Landed on \`${this.o.trunk}\` in ${e.sha} (trunk now at ${e.top}).` };
    // A landing whose run died before it told the issue: the next run finds it landed (refs/tron/landed/<id>) and tells it then, once.
    if (e.type === 'block.recovered' && (e.phase === 'landed' || e.phase === 'wrap'))
      return { block: e.block, about: 'landed', key: '', text: `Landed on \`${this.o.trunk}\` in ${LANDED_SHA}.` };
    return undefined;
  }

  private async tell(block: string, issue: number, about: About, key: string, said: string): Promise<void> {
    const mark = marker(block, about, key);
    // What git records is the landing's truth: refs/tron/landed/<id>, at the block's own commit.
    const text = said.includes(LANDED_SHA)
      ? said.replace(
          LANDED_SHA,
          (this.o.repo && (await revParse(this.o.repo, `refs/tron/landed/${block}`).catch(() => undefined))) || `refs/tron/landed/${block}`,
        )
      : said;
    const done = await this.retrying(block, issue, about, () => commentOnce(this.o.forge, issue, mark, text));
    if (!done) return;
    const url = this.o.issues[block]?.url;
    this.o.record({ type: 'forge.commented', block, issue, about, comment: done.id, posted: done.posted, ...(url && { issue_url: url }) });
    if (about !== 'landed') return;
    if (await this.retrying(block, issue, 'closed', () => this.o.forge.closeIssue(issue).then(() => true)))
      this.o.record({ type: 'forge.commented', block, issue, about: 'closed', posted: true, ...(url && { issue_url: url }) });
  }

  private async retrying<T>(block: string, issue: number, about: string, call: () => Promise<T>): Promise<T | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        const e = err instanceof ForgeError ? err : new ForgeError('transient', String(err));
        const again = (e.kind === 'rate_limited' || e.kind === 'transient') && attempt <= this.o.retries && !this.cut;
        if (!again) {
          this.o.record({ type: 'forge.failed', block, issue, about, error: e.message });
          this.o.print?.(`tron: could not tell issue #${issue} (${about}): ${e.message}`);
          return undefined;
        }
        const wait = Math.min(this.o.maxWaitMs ?? 60_000, e.retryAfterMs ?? this.o.backoffMs * 2 ** (attempt - 1));
        await this.sleep(wait);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((ok) => {
      const wake = () => {
        cancel();
        this.sleepers.delete(wake);
        ok();
      };
      // Ref'd: a retry under way is waited for at the close.
      const cancel = this.clock.after(ms, wake, { keepAlive: true });
      this.sleepers.add(wake);
    });
  }
}

/**
 * A start with nothing to run (every block resumes settled) still owes an issue what a
 * killed run could not tell it: a landing found in git is told, and its issue closed, once.
 */
export async function tellRecovered(o: Omit<ProgressOptions, 'record'>, recovered: readonly EventBody[]): Promise<void> {
  const progress = new ForgeProgress({ ...o, record: () => false });
  let seq = 0;
  for (const e of recovered) if (e.type === 'block.recovered') progress.event({ ...e, v: EVENT_VERSION, seq: ++seq, ts: 0 } as TronEvent);
  await progress.close(60_000);
}
