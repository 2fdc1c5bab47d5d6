/**
 * Every run of the repository, for `GET /api/v1/runs` and `GET /api/v1/blocks/{id}/history`.
 *
 * A run before the latest is over (one engine writes at a time, and a run starts once the
 * one before it has ended: earlier.ts), so each is read once, folded, and kept as a few
 * numbers per run and per block — never its events. The latest run is followed as it
 * grows: its tally takes only the events appended since the last look. A page reads only
 * the runs on it, and the server yields between runs, so a thousand runs on disk make the
 * first page of a history slow at most once, and never hold up the other requests for long.
 *
 * The counts agree with `tron report`'s (engine/render/report.ts): a run's `landed` and
 * `abandoned` are what it landed and gave up itself — a block an earlier run settled and
 * this one resumed so is not counted again — and `parked` the blocks it left for the
 * operator, the blocked ones (waiting on a dependency that did not land) apart.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { TronEvent } from '../core/events.ts';
import { blockedBy } from '../core/blocked.ts';
import { isRunId } from '../core/names.ts';
import { apply, initialState, type EngineState, type Spend } from '../core/state.ts';
import { readLog } from '../log/eventlog.ts';
import { ChartFold, chartsOf, dayOf, mergeCharts, type Charts, type RunCharts } from './charts.ts';
import type { RunFollower } from './follow.ts';

/** One run as `GET /api/v1/runs` lists it. Times are ms since the epoch; `wall` is ms. */
export interface RunRow {
  run: string;
  started: number | null;
  finished: number | null;
  exit: number | null;
  /** Blocks this run landed. */
  landed: number;
  /** Blocks it left parked for the operator. */
  parked: number;
  /** Blocks it gave up. */
  abandoned: number;
  /** Blocks waiting on a dependency that did not land. */
  blocked: number;
  /** Blocks still under way (or not started) when it stopped. */
  unfinished: number;
  /** Every block of its register. */
  blocks: number;
  usd: number;
  spend: Spend;
  /** From its first event to its end (or its latest event, while it runs). */
  wall: number;
  events: number;
  /** Why its log could not be read; the counts are then zero. */
  unreadable?: string;
}

/** One block in one run, as `GET /api/v1/blocks/{id}/history` lists it. */
export interface BlockRun {
  run: string;
  /** The phase it ended the run in (its phase now, in a run under way). */
  phase: string;
  /** Its attempt number at the end of the run (a RETRY starts a new one; numbering goes on across runs). */
  attempts: number;
  /** Worker turns dispatched for it in this run. */
  turns: number;
  usd: number;
  spend: Spend;
  /** The block's own commit, when this run landed it. */
  landedSha?: string;
}

/** What is kept of a run once it is over. */
interface Reading {
  row: RunRow;
  /** The blocks the run did something with (a block only resumed as it was is not among them). */
  touched: Map<string, BlockRun>;
  /** Every block of its register, touched or not. */
  known: ReadonlySet<string>;
  /** Its share of the runs page's charts. */
  charts: RunCharts;
}

/** A run folded one event at a time: the latest is fed as it grows, an earlier one all at once. */
class Tally {
  state: EngineState = initialState();
  seen = 0;
  private first: number | undefined;
  private last: number | undefined;
  private started: number | undefined;
  private finished: TronEvent | undefined;
  private readonly landed = new Map<string, string>();
  private readonly abandoned = new Set<string>();
  private readonly turns = new Map<string, number>();
  private readonly touched = new Set<string>();
  private readonly charts = new ChartFold();

  constructor(readonly run: string) {}

  add(e: TronEvent): void {
    const block = 'block' in e && typeof e.block === 'string' ? e.block : undefined;
    const was = block === undefined ? undefined : this.state.blocks.get(block)?.phase;
    this.state = apply(this.state, e);
    this.charts.add(e, was, block === undefined ? undefined : this.state.blocks.get(block)?.phase);
    this.seen = e.seq;
    this.first ??= e.ts;
    this.last = e.ts;
    if (e.type === 'run.started') this.started = e.ts;
    if (e.type === 'run.finished') this.finished = e;
    if (e.type === 'block.landed') this.landed.set(e.block, e.sha);
    if (e.type === 'block.abandoned') this.abandoned.add(e.block);
    if (e.type === 'block.dispatched') this.turns.set(e.block, (this.turns.get(e.block) ?? 0) + 1);
    // Resuming a block as an earlier run left it is not doing anything with it.
    if ('block' in e && typeof e.block === 'string' && e.type !== 'block.recovered') this.touched.add(e.block);
  }

  reading(): Reading {
    const s = this.state;
    let parked = 0;
    let blocked = 0;
    let unfinished = 0;
    for (const id of s.order) {
      const b = s.blocks.get(id)!;
      if (blockedBy(s, id)) blocked += 1;
      else if (b.phase === 'parked') parked += 1;
      else if (b.phase !== 'landed' && b.phase !== 'abandoned') unfinished += 1;
    }
    const end = this.finished?.ts ?? this.last;
    const row: RunRow = {
      run: this.run,
      started: this.started ?? this.first ?? null,
      finished: this.finished?.ts ?? null,
      exit: this.finished?.type === 'run.finished' ? this.finished.exit : null,
      landed: this.landed.size,
      parked,
      abandoned: this.abandoned.size,
      blocked,
      unfinished,
      blocks: s.order.length,
      usd: s.spend.usd,
      spend: s.spend,
      wall: end !== undefined && this.first !== undefined ? end - this.first : 0,
      events: this.seen,
    };
    const touched = new Map<string, BlockRun>();
    for (const id of this.touched) {
      const b = s.blocks.get(id);
      const sha = this.landed.get(id);
      touched.set(id, {
        run: this.run,
        phase: b?.phase ?? 'pending',
        attempts: b?.attempt ?? 0,
        turns: this.turns.get(id) ?? 0,
        usd: b?.spend.usd ?? 0,
        spend: b?.spend ?? { tokens: 0, usd: 0, unpricedTokens: 0 },
        ...(sha ? { landedSha: sha } : {}),
      });
    }
    return { row, touched, known: new Set(s.order), charts: this.charts.charts };
  }
}

/** Yields to the event loop: a long read lets the other requests (and streams) through. */
export const breathe = () => new Promise<void>((r) => setImmediate(r));

/**
 * The run ids of a folder of run directories (each holding events.jsonl), newest first.
 * Every request asks, so the folder is listed again only when it changed (its mtime moves
 * when an entry comes or goes) or a second has passed; a name not yet known as a run is
 * looked at each time, since its log appears after its directory.
 */
export class RunList {
  private readonly known = new Set<string>();
  private names: string[] = [];
  private mtime = -1;
  private listedAt = 0;

  constructor(private readonly runs: string) {}

  ids(): string[] {
    let mtime: number;
    try {
      mtime = statSync(this.runs).mtimeMs;
    } catch {
      return [];
    }
    const now = Date.now();
    if (mtime !== this.mtime || now - this.listedAt > 1000) {
      this.names = readdirSync(this.runs).sort().reverse();
      this.mtime = mtime;
      this.listedAt = now;
    }
    return this.names.filter((name) => {
      if (this.known.has(name)) return true;
      if (!isRunId(name) || !existsSync(join(this.runs, name, 'events.jsonl'))) return false;
      this.known.add(name);
      return true;
    });
  }

  /** The newest run directory, or undefined before the first run. */
  latest(): string | undefined {
    const id = this.ids()[0];
    return id === undefined ? undefined : this.dir(id);
  }

  dir(run: string): string {
    return join(this.runs, run);
  }
}

export class RunBook {
  private readonly over = new Map<string, Reading>();
  private live: Tally | undefined;
  /** The last charts answered, and what they were of: asked again before a run moves, they are not folded again. */
  private drawn: { of: string; charts: Charts } | undefined;
  /** The charts of the runs that are over, merged, and which runs they were. */
  private merged: { of: string; charts: RunCharts } | undefined;

  constructor(readonly list: RunList) {}

  /**
   * At most `limit` runs older than `before` (a run id; none: from the newest), newest
   * first, and the cursor for the next page (null: none older). Run ids sort by start
   * time and a new run is always the newest, so a page never shifts under a cursor.
   */
  async page(latest: RunFollower | undefined, limit: number, before?: string): Promise<{ runs: RunRow[]; next: string | null }> {
    const ids = this.list.ids().filter((id) => before === undefined || id < before);
    const runs: RunRow[] = [];
    for (const id of ids.slice(0, limit)) runs.push((await this.reading(id, latest)).row);
    return { runs, next: ids.length > limit ? runs.at(-1)!.run : null };
  }

  /**
   * One block in every run that did something with it, newest first, at most `limit`
   * runs older than `before`; undefined when no run on disk has the block at all.
   */
  async history(
    block: string,
    latest: RunFollower | undefined,
    limit: number,
    before?: string,
  ): Promise<{ runs: BlockRun[]; next: string | null } | undefined> {
    const runs: BlockRun[] = [];
    let known = false;
    for (const id of this.list.ids()) {
      if (before !== undefined && id >= before) continue;
      const r = await this.reading(id, latest);
      known ||= r.known.has(block);
      const row = r.touched.get(block);
      if (!row) continue;
      if (runs.length === limit) return { runs, next: runs.at(-1)!.run };
      runs.push(row);
    }
    return known || runs.length > 0 ? { runs, next: null } : undefined;
  }

  /**
   * The runs page's charts for the `days` UTC days that end on `now`'s, from every run on
   * disk (a lead time can start in any of them): each run read once, as for a page.
   */
  async charts(latest: RunFollower | undefined, window: { now: number; days: number }): Promise<Charts> {
    const ids = this.list.ids();
    const of = `${ids.length}\t${ids[0]}\t${latest?.run}\t${latest?.last}\t${window.days}\t${dayOf(window.now)}`;
    if (this.drawn?.of === of) return this.drawn.charts;
    // The runs that are over, merged once; then only the one under way (and any newer) each time.
    const over = latest === undefined ? [] : ids.filter((id) => id < latest.run);
    const key = `${over.length}\t${over[0]}`;
    if (this.merged?.of !== key) {
      const folds: RunCharts[] = [];
      for (const id of over) folds.push((await this.reading(id, latest)).charts);
      this.merged = { of: key, charts: mergeCharts(folds.reverse()) };
    }
    const rest: RunCharts[] = [];
    for (const id of ids.filter((id) => latest === undefined || id >= latest.run)) rest.push((await this.reading(id, latest)).charts);
    const charts = chartsOf([this.merged.charts, ...rest.reverse()], window);
    this.drawn = { of, charts };
    return charts;
  }

  /** A run's reading: kept once it is over; the latest brought up to date from its follower. */
  private async reading(id: string, latest: RunFollower | undefined): Promise<Reading> {
    if (latest?.run === id) return await this.follow(latest);
    let r = this.over.get(id);
    if (!r) {
      await breathe();
      r = this.readOver(id);
      // Newer than the run the server follows (it appeared a moment ago): not over, so not kept.
      if (latest !== undefined && id < latest.run) this.over.set(id, r);
    }
    return r;
  }

  private readOver(id: string): Reading {
    // The run that was the latest when last asked: what it had is read already.
    const t = this.live?.run === id ? this.live : new Tally(id);
    if (t === this.live) this.live = undefined;
    try {
      for (const e of readLog(join(this.list.dir(id), 'events.jsonl')).events) if (e.seq > t.seen) t.add(e);
    } catch (err) {
      const r = new Tally(id).reading();
      // Named within its run directory: the server's own paths are none of the client's business.
      return { ...r, row: { ...r.row, unreadable: (err as Error).message.replaceAll(`${this.list.dir(id)}/`, '') } };
    }
    return t.reading();
  }

  private async follow(f: RunFollower): Promise<Reading> {
    if (this.live?.run !== f.run) this.live = new Tally(f.run);
    const t = this.live;
    while (t.seen < f.last) {
      const batch = f.readEvents(t.seen + 1, 4096);
      if (batch.length === 0) break;
      for (const e of batch) t.add(e);
      if (t.seen < f.last) await breathe();
    }
    return t.reading();
  }
}
