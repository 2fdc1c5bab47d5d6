/**
 * `[notify]`: tell someone when a block is paged, when one lands and when the run ends —
 * a webhook (`{"text": …}`, Slack's blocks or tron's own JSON, as `format` says: the
 * shapes are in notify-shapes.ts) and/or a command (the notification as JSON on stdin).
 * It is a reporter, as the console and the live board are: it sees each event the engine
 * appended and does its work later, on its own promises, so a slow or dead receiver never
 * holds up a step, and nothing it meets is thrown into the engine.
 *
 * Each notification and channel is tried up to `attempts` times, waiting `backoff`, then
 * twice that, … (at most a minute) between tries, each try bounded by `timeout`. The
 * outcome is recorded as a note in the run's log (`notify.delivered` / `notify.failed`)
 * through the engine's `record`; once the engine has closed the log (the run's own end is
 * told after that), the same line goes to `notify.jsonl` in the run directory instead. At
 * the end, `close` waits a bounded time for deliveries still under way.
 *
 * The page command (`page_command`) is the engine's own effect and is not touched.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { appendFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { execa } from 'execa';
import type { BodyOf, EventBody, TronEvent } from '../core/events.ts';
import type { NotifyConfig } from '../project/config.ts';
import { ParkedNow } from '../render/parked-now.ts';
import { type NotificationFacts, notificationBody } from './notify-shapes.ts';

export interface NotifierOptions {
  config: NotifyConfig;
  repo: string;
  runDir: string;
  /** Appends a note to the run's log; false once it is closed. */
  record: (body: EventBody) => boolean;
  /** A line for the operator (a notification given up). */
  print?: (line: string) => void;
  /** Times the retries' waits and the close's grace (the system's by default): the engine's clock. */
  clock?: Clock;
}

/** What the command is given on stdin: the facts every format is made from, and the event itself. */
export interface Notification extends NotificationFacts {
  event: TronEvent;
}

type Channel = 'webhook' | 'command';

const MAX_WAIT_MS = 60_000;

export class Notifier {
  private run = '';
  private readonly pending = new Set<Promise<void>>();
  /** Past close's grace: no more tries, sleeps end now. */
  private cut = false;
  private readonly wakeups = new Set<() => void>();
  private readonly parkedNow = new ParkedNow();
  /** Each block's title, from the register the run read. */
  private readonly titles = new Map<string, string>();
  /** Each block's page on the forge: its pull request once there is one, else its issue. */
  private readonly links = new Map<string, { url: string; of: 'pull request' | 'issue' }>();

  constructor(private readonly o: NotifierOptions) {}

  private get clock(): Clock {
    return this.o.clock ?? systemClock;
  }

  /** Sees an appended event; never throws, never waits. */
  event(e: TronEvent): void {
    try {
      if (e.type === 'run.started') this.run = e.run;
      this.parkedNow.see(e);
      this.learn(e);
      const n = this.notification(e);
      if (!n || !this.o.config.on.includes(n.on)) return;
      for (const channel of ['webhook', 'command'] as const) {
        if (channel === 'webhook' && !this.o.config.webhook) continue;
        if (channel === 'command' && !this.o.config.command) continue;
        const p = new Promise<void>((r) => setImmediate(r))
          .then(() => this.deliver(channel, n))
          .catch(() => undefined)
          .finally(() => this.pending.delete(p));
        this.pending.add(p);
      }
    } catch {
      // A notification is never worth a run.
    }
  }

  /**
   * Waits for the deliveries under way (retries included), at most `graceMs`; then those
   * still going stop trying and are recorded as failed.
   */
  async close(graceMs = 10_000): Promise<void> {
    const within = (ms: number) => {
      let cancel: (() => void) | undefined;
      return Promise.race([
        Promise.allSettled([...this.pending]),
        new Promise((r) => {
          // Ref'd: the run's end waits for its deliveries, or this grace.
          cancel = this.clock.after(ms, () => r(undefined), { keepAlive: true });
        }),
      ]).finally(() => cancel?.());
    };
    await within(graceMs);
    this.cut = true;
    for (const w of [...this.wakeups]) w();
    // Sleepers record their failure at once; an attempt in flight ends within its timeout.
    await within(Math.min(this.o.config.timeoutMs, 2000));
  }

  /** Titles and forge pages, for the formats that show them. */
  private learn(e: TronEvent): void {
    if (e.type === 'register.loaded') for (const b of e.blocks) this.titles.set(b.id, b.title);
    else if (e.type === 'forge.commented' && e.issue_url && this.links.get(e.block)?.of !== 'pull request')
      this.links.set(e.block, { url: e.issue_url, of: 'issue' });
    else if (e.type === 'pr.observed') for (const p of e.pulls) this.links.set(p.block, { url: p.url, of: 'pull request' });
  }

  private notification(e: TronEvent): Notification | undefined {
    const base = { run: this.run, seq: e.seq, ts: e.ts, repo: basename(this.o.repo), event: e };
    const about = (block: string) => {
      const title = this.titles.get(block);
      const link = this.links.get(block);
      return { block, ...(title !== undefined && { title }), ...(link && { url: link.url, urlOf: link.of }) };
    };
    switch (e.type) {
      case 'page.sent': {
        const answer = `tron answer ${e.block} '>>RETRY {"guidance":"…"}' (or '>>ABANDON {"reason":"…"}')`;
        return {
          ...base,
          ...about(e.block),
          on: 'page',
          outcome: 'parked',
          text: `tron: ${e.block} is parked and needs you — ${e.reason}\nanswer: ${answer}`,
          detail: { reason: e.reason, answer },
        };
      }
      case 'block.landed':
        return {
          ...base,
          ...about(e.block),
          on: 'landed',
          outcome: 'landed',
          text: `tron: ${e.block} landed (${e.sha.slice(0, 12)}); trunk is at ${e.top.slice(0, 12)}`,
          detail: { sha: e.sha, top: e.top },
        };
      case 'run.finished': {
        const { parked, unfinished } = this.parkedNow.split(e);
        return {
          ...base,
          on: 'run',
          outcome: 'finished',
          text: `tron: run ${this.run} finished (exit ${e.exit}, ${e.reason}) — ${e.landed.length} landed, ${unfinished.length > 0 ? `${unfinished.length} unfinished, ` : ''}${parked.length} parked, ${e.abandoned.length} abandoned${parked.length > 0 ? `; parked: ${parked.join(', ')}` : ''}`,
          detail: { exit: e.exit, reason: e.reason, landed: e.landed, parked, unfinished, abandoned: e.abandoned },
        };
      }
      default:
        return undefined;
    }
  }

  private async deliver(channel: Channel, n: Notification): Promise<void> {
    const c = this.o.config;
    let error = '';
    let attempt = 0;
    while (attempt < c.attempts) {
      attempt++;
      try {
        await (channel === 'webhook' ? this.post(n) : this.command(n));
        this.note({ type: 'notify.delivered', channel, on: n.on, about: n.seq, ...(n.block ? { block: n.block } : {}), attempts: attempt });
        return;
      } catch (err) {
        error = (err as Error).message;
      }
      if (attempt >= c.attempts || this.cut) break;
      await this.wait(Math.min(MAX_WAIT_MS, c.backoffMs * 2 ** (attempt - 1)));
    }
    if (this.cut && attempt < c.attempts) error = `${error}; not tried again: the run was over`;
    this.note({ type: 'notify.failed', channel, on: n.on, about: n.seq, ...(n.block ? { block: n.block } : {}), attempts: attempt, error });
    this.o.print?.(
      `tron: the ${channel} notification of ${n.on === 'run' ? 'the run’s end' : `${n.block} (${n.on})`} was given up after ${attempt} tries: ${error}`,
    );
  }

  private async post(n: Notification): Promise<void> {
    const res = await fetch(this.o.config.webhook!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: notificationBody(this.o.config.format, n),
      signal: AbortSignal.timeout(this.o.config.timeoutMs),
      redirect: 'error',
    });
    await res.body?.cancel();
    if (!res.ok) throw new Error(`the webhook answered HTTP ${res.status}`);
  }

  private async command(n: Notification): Promise<void> {
    const [file, ...args] = this.o.config.command!;
    const r = await execa(file!, args, { input: JSON.stringify(n), reject: false, timeout: this.o.config.timeoutMs, cwd: this.o.repo });
    if (r.timedOut) throw new Error(`the command ran past ${this.o.config.timeoutMs} ms`);
    if (r.exitCode !== 0) throw new Error(`the command exited ${r.exitCode ?? r.signal}: ${String(r.stderr ?? '').slice(-300)}`);
  }

  /** Sleeps, or less when closing. */
  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.wakeups.delete(done);
        resolve();
      };
      // Ref'd: a retry under way is waited for at the close.
      const cancel = this.clock.after(ms, done, { keepAlive: true });
      this.wakeups.add(done);
    });
  }

  private note(body: BodyOf<'notify.delivered'> | BodyOf<'notify.failed'>): void {
    try {
      if (this.o.record(body)) return;
      appendFileSync(join(this.o.runDir, 'notify.jsonl'), `${JSON.stringify({ ts: Date.now(), ...body })}\n`);
    } catch {
      // Nowhere left to record it (the run directory is gone).
    }
  }
}
