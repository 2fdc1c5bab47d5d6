/**
 * Which run `tron serve` shows: always the latest of the repository. The hub keeps one
 * RunFollower for it and swaps it when a newer run directory appears (noticed by a
 * file-system notification on `.tron/runs/`, and a slow look); streams of the old run
 * are then told (`event: run`) and ended.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { existsSync, mkdirSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { RunFollower } from './follow.ts';
import { RunList } from './runs.ts';

export interface HubOptions {
  /** How often a follower looks at its file besides notifications (ms). */
  pollMs?: number;
  /** Frames kept in memory (follow.ts WINDOW). */
  window?: number;
  /** The folder of run directories followed (default the repository's `.tron/runs/`; a database's mirror: db-mirror.ts). */
  runs?: string;
  /** Times the slow looks (the system's by default): the server's clock. */
  clock?: Clock;
}

export class Hub {
  private follower: RunFollower | undefined;
  private readonly switched = new Set<(run: string) => void>();
  private watcher: FSWatcher | undefined;
  /** Stops the slow look. */
  private readonly stopLooking: () => void;
  /** The folder's runs, listed again only when it changed: every request asks for the latest. */
  readonly list: RunList;

  constructor(
    readonly repo: string,
    private readonly o: HubOptions = {},
  ) {
    this.list = new RunList(this.runs);
    this.refresh();
    const runs = this.runs;
    try {
      mkdirSync(runs, { recursive: true });
      this.watcher = watch(runs, () => this.refresh());
      this.watcher.on('error', () => undefined);
    } catch {
      // Without notifications the slow look below finds a new run.
    }
    this.stopLooking = (o.clock ?? systemClock).every(1000, () => this.refresh());
  }

  /** The latest run's follower, or undefined before the first run. */
  get current(): RunFollower | undefined {
    this.refresh();
    return this.follower;
  }

  /** Told when a newer run replaces the one followed. */
  onSwitch(listener: (run: string) => void): () => void {
    this.switched.add(listener);
    return () => this.switched.delete(listener);
  }

  close(): void {
    this.watcher?.close();
    this.stopLooking();
    this.follower?.close();
  }

  private get runs(): string {
    return this.o.runs ?? join(this.repo, '.tron', 'runs');
  }

  private refresh(): void {
    const dir = this.list.latest();
    if (!dir || dir === this.follower?.runDir || !existsSync(join(dir, 'events.jsonl'))) {
      this.follower?.poke();
      return;
    }
    const old = this.follower;
    this.follower = new RunFollower(dir, {
      ...(this.o.pollMs !== undefined ? { pollMs: this.o.pollMs } : {}),
      ...(this.o.window !== undefined ? { window: this.o.window } : {}),
      ...(this.o.clock ? { clock: this.o.clock } : {}),
    });
    if (old) {
      old.close();
      for (const l of [...this.switched]) l(this.follower.run);
    }
  }
}
