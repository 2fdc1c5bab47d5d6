/**
 * What a run with `[forge]` wires beside the engine (engine/forge/): each block's issue told
 * how it goes (`ForgeProgress`, off the engine's path, its outcomes notes in the log); with
 * `[intake]`, the labelled issues polled (`IssuePoller`: an issue closed or unlabelled
 * stops its block; with --watch new and edited issues join the register), a webhook's wake
 * making the next poll come at once, and the blocks taken in from issues riding along with
 * the block files on every reload; and, with `trusted`, what strangers said noted once.
 */
import type { Clock } from '../os/clock.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import { ForgeProgress } from '../forge/progress.ts';
import type { ForgeRun } from '../forge/session.ts';
import { noteIgnored } from '../forge/trust.ts';
import { watchWake } from '../forge/wake.ts';
import { IssuePoller } from '../forge/watch.ts';
import type { Config } from '../project/config.ts';
import { type Block, loadRegister } from '../project/register.ts';

/** What the wiring needs of the engine, once there is one. */
export interface ForgeEngine {
  record(body: EventBody): boolean;
  told(body: EventBody): void;
  registerChanged(blocks: Block[]): void;
}

/** What telling a block's issue how it goes needs, at recovery and while the run goes. */
export function issueTelling(f: ForgeRun, o: { repo: string; config: Config; repoArg: string; clock: Clock }) {
  return {
    repo: o.repo,
    clock: o.clock,
    forge: f.tracker,
    issues: f.issues,
    trunk: o.config.trunk,
    repoArg: o.repoArg,
    retries: f.settings.retries,
    backoffMs: f.settings.backoffMs,
  };
}

export class ForgeWiring {
  private issueBlocks: Block[];
  private readonly progress: ForgeProgress | undefined;
  private poller: IssuePoller | undefined;
  private woken: { close(): void } | undefined;
  private engine: ForgeEngine | undefined;

  constructor(
    private readonly f: ForgeRun,
    private readonly o: { repo: string; config: Config; repoArg: string; watch: boolean; print: (line: string) => void; clock: Clock },
  ) {
    this.issueBlocks = f.intake?.blocks ?? [];
    this.progress =
      f.intake || Object.keys(f.issues).length > 0
        ? new ForgeProgress({ ...issueTelling(f, o), record: (body): boolean => this.engine?.record(body) ?? false, print: o.print })
        : undefined;
  }

  /** Whether it wants to see the run's events (a reporter of its own). */
  get watching(): boolean {
    return this.progress !== undefined || this.f.intake !== undefined;
  }

  /** The block files, with the blocks taken in from issues that no file names. */
  withIssues(files: Block[]): Block[] {
    const ids = new Set(files.map((b) => b.id));
    return [...files, ...this.issueBlocks.filter((b) => !ids.has(b.id))];
  }

  /** Sees an appended event; never throws, never waits. */
  event(e: TronEvent): void {
    this.progress?.event(e);
    this.poller?.event(e);
  }

  /** Once the engine is made: strangers' words noted, the poller started, webhooks listened for. */
  attach(engine: ForgeEngine): void {
    this.engine = engine;
    const { f, o } = this;
    // [forge] trusted: what strangers said on the forge was ignored; the log says so, once each (engine/forge/trust.ts).
    if (f.forge) noteIgnored(f.forge, (body) => engine.record(body), o.print);
    if (!f.intake) return;
    this.poller = new IssuePoller({
      takeNew: o.watch,
      issues: f.issues,
      onWithdrawn: (body) => engine.told(body),
      forge: f.tracker,
      label: f.intake.label,
      intervalMs: f.intake.pollMs,
      ...(f.intake.etag && { etag: f.intake.etag }),
      files: () => {
        const r = loadRegister(o.repo);
        return r.problems.length === 0 ? r.blocks : undefined;
      },
      onChange: (all, intake) => {
        this.issueBlocks = intake.blocks;
        Object.assign(f.issues, intake.issues);
        engine.registerChanged(all);
      },
      print: o.print,
      clock: o.clock,
    });
    this.poller.start();
    // A webhook `tron serve` received makes the next poll come at once (engine/forge/wake.ts).
    this.woken = watchWake(o.repo, () => this.poller?.wake());
  }

  /** The poller and the webhook's watch stop; the issues' telling finishes. */
  async close(): Promise<void> {
    this.poller?.stop();
    this.woken?.close();
    await this.progress?.close();
  }
}
