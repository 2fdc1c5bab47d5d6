/**
 * One reader of the latest run's `events.jsonl` for every client of `tron serve`: it
 * follows the file as it grows (a file-system notification, and a slow look as a
 * safety net), checks each line as any reader does (its signature chain where the
 * repository has a key: a line the engine did not write is set aside, never served),
 * folds the state as `tron status` does, and keeps
 *
 * - per seq, where its line is in the file: any client can be served any stretch of the
 *   run from the file itself, so memory does not grow with what a slow client missed;
 * - a window of the latest events, ready to send as SSE frames, shared by every client;
 * - per block, the seqs of its events: its timeline.
 *
 * The server asks it for frames (`frame(seq)`, or `readFrames` from the file once a
 * client has fallen out of the window) and is told when there is more (`onChange`).
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { closeSync, existsSync, openSync, readSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, join } from 'node:path';
import type { TronEvent } from '../core/events.ts';
import { apply, initialState, type EngineState } from '../core/state.ts';
import { parseEventLine } from '../log/eventlog-line.ts';
import { keyOfRunDir, sign } from '../log/keys.ts';

/** The signature a signed line ends with (as engine/log/eventlog.ts writes it). */
const MAC = /,"mac":"([0-9a-f]{32})"\}$/;

/** Frames kept in memory for clients that keep up; one that falls further behind reads the file. */
export const WINDOW = 4096;

/** How long a notification waits for the lines after it (ms). */
const GATHER_MS = 10;

/** One SSE frame for an event: its seq as the id, the event (without its signature) as data. */
export function sseFrame(e: TronEvent): string {
  return `id: ${e.seq}\ndata: ${JSON.stringify(e)}\n\n`;
}

export class RunFollower {
  readonly run: string;
  readonly file: string;
  state: EngineState = initialState();
  /** The last seq read. */
  last = 0;
  /** Lines set aside: not the engine's (a broken chain), or unreadable. */
  readonly foreign: { offset: number; reason: string }[] = [];
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly frames: string[] = [];
  private readonly blockSeqs = new Map<string, number[]>();
  /** Inbox files the run has read (operator.answered): an answer there is no longer waiting. */
  readonly answered = new Set<string>();
  /** The blocks that had a worker turn in the run (block.dispatched). */
  readonly dispatched = new Set<string>();
  private offset = 0;
  private rest = Buffer.alloc(0);
  private readonly key: Buffer | undefined;
  private readonly window: number;
  private chain: string | undefined;
  private signed: boolean | undefined;
  private watcher: FSWatcher | undefined;
  /** Stops the slow look. */
  private stopLooking: (() => void) | undefined;
  /** Cancels the gathered read. */
  private soon: (() => void) | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(
    readonly runDir: string,
    opts: { key?: Buffer | null; pollMs?: number; live?: boolean; window?: number; clock?: Clock } = {},
  ) {
    this.run = basename(runDir);
    this.file = join(runDir, 'events.jsonl');
    this.window = opts.window ?? WINDOW;
    this.key = opts.key === null ? undefined : (opts.key ?? keyOfRunDir(runDir));
    this.read();
    if (opts.live === false) return;
    const clock = opts.clock ?? systemClock;
    try {
      // The engine writes a line at a time: gather what a few ms bring into one read and one write per client.
      this.watcher = watch(this.file, () => {
        // Ref'd, as the watch is.
        this.soon ??= clock.after(
          GATHER_MS,
          () => {
            this.soon = undefined;
            this.poke();
          },
          { keepAlive: true },
        );
      });
      this.watcher.on('error', () => undefined);
    } catch {
      // No notifications here: the slow look below still follows it.
    }
    this.stopLooking = clock.every(opts.pollMs ?? 500, () => this.poke());
  }

  /** Called after new events were read. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.watcher?.close();
    this.stopLooking?.();
    this.soon?.();
    this.listeners.clear();
  }

  /** Reads what was appended; tells the listeners when there was something. */
  poke(): void {
    const before = this.last;
    try {
      this.read();
    } catch {
      // The run directory went away (tron clean): nothing more to follow.
      return;
    }
    if (this.last === before) return;
    for (const l of [...this.listeners]) l();
  }

  /** The frame of `seq` while it is in the window. */
  frame(seq: number): string | undefined {
    const first = this.last - this.frames.length + 1;
    return seq >= first && seq <= this.last ? this.frames[seq - first] : undefined;
  }

  /** Events `from`…, at most `max` and at most about `maxBytes`, read from the file. */
  readEvents(from: number, max: number, maxBytes = 1 << 20): TronEvent[] {
    if (from > this.last || from < 1) return [];
    let to = Math.min(this.last, from + max - 1);
    while (to > from && this.ends[to - 1]! - this.starts[from - 1]! > maxBytes) to = from + Math.floor((to - from) / 2);
    const start = this.starts[from - 1]!;
    const buf = Buffer.alloc(this.ends[to - 1]! - start);
    const fd = openSync(this.file, 'r');
    try {
      for (let done = 0; done < buf.length; ) {
        const n = readSync(fd, buf, done, buf.length - done, start + done);
        if (n === 0) break;
        done += n;
      }
    } finally {
      closeSync(fd);
    }
    const out: TronEvent[] = [];
    for (let seq = from; seq <= to; seq++) {
      const text = buf.subarray(this.starts[seq - 1]! - start, this.ends[seq - 1]! - start).toString('utf8');
      const m = MAC.exec(text);
      const parsed = parseEventLine(m ? `${text.slice(0, m.index)}}` : text, seq);
      if (parsed.ok) out.push(parsed.event);
    }
    return out;
  }

  /** The same as SSE frames. */
  readFrames(from: number, max: number): string[] {
    return this.readEvents(from, max).map(sseFrame);
  }

  /** A block's events, the latest `max` of them, from the file. */
  blockEvents(block: string, max = 1000): TronEvent[] {
    const seqs = (this.blockSeqs.get(block) ?? []).slice(-max);
    return seqs.flatMap((seq) => this.readEvents(seq, 1));
  }

  /** Every event of the run, from the file (for the diagram's counts). */
  allEvents(): TronEvent[] {
    const out: TronEvent[] = [];
    for (let seq = 1; seq <= this.last; ) {
      const batch = this.readEvents(seq, 4096, 8 << 20);
      if (batch.length === 0) break;
      out.push(...batch);
      seq += batch.length;
    }
    return out;
  }

  private read(): void {
    if (!existsSync(this.file)) return;
    const size = statSync(this.file).size;
    if (size <= this.offset) return;
    const chunk = Buffer.alloc(size - this.offset);
    const fd = openSync(this.file, 'r');
    let got = 0;
    try {
      while (got < chunk.length) {
        const n = readSync(fd, chunk, got, chunk.length - got, this.offset + got);
        if (n === 0) break;
        got += n;
      }
    } finally {
      closeSync(fd);
    }
    const buf = this.rest.length > 0 ? Buffer.concat([this.rest, chunk.subarray(0, got)]) : chunk.subarray(0, got);
    const base = this.offset - this.rest.length;
    this.offset += got;
    let at = 0;
    for (;;) {
      const nl = buf.indexOf(0x0a, at);
      if (nl < 0) break;
      this.line(buf.subarray(at, nl).toString('utf8'), base + at, base + nl);
      at = nl + 1;
    }
    // A line still being written (or torn by a crash) waits for its newline.
    this.rest = Buffer.from(buf.subarray(at));
  }

  private line(text: string, start: number, end: number): void {
    const seq = this.last + 1;
    const m = MAC.exec(text);
    if (this.signed === undefined && this.key) this.signed = m !== null;
    let body = text;
    if (this.signed && this.key) {
      this.chain ??= sign(this.key, 'tron events', this.run);
      if (!m) return void this.foreign.push({ offset: start, reason: 'it carries no signature' });
      body = `${text.slice(0, m.index)}}`;
      if (sign(this.key, this.chain, body) !== m[1]) {
        return void this.foreign.push({ offset: start, reason: 'its signature does not follow the line before it' });
      }
      this.chain = m[1]!;
    } else if (m) {
      body = `${text.slice(0, m.index)}}`;
    }
    const parsed = parseEventLine(body, seq);
    if (!parsed.ok) return void this.foreign.push({ offset: start, reason: parsed.reason });
    const e = parsed.event;
    this.last = seq;
    this.starts.push(start);
    this.ends.push(end);
    this.frames.push(sseFrame(e));
    // Trimmed in halves, so keeping the window costs O(1) a line.
    if (this.frames.length >= 2 * this.window) this.frames.splice(0, this.window);
    this.state = apply(this.state, e);
    if (e.type === 'operator.answered') this.answered.add(e.file);
    if (e.type === 'block.dispatched') this.dispatched.add(e.block);
    const block = 'block' in e && typeof e.block === 'string' ? e.block : undefined;
    if (block !== undefined) {
      const list = this.blockSeqs.get(block);
      if (list) list.push(seq);
      else this.blockSeqs.set(block, [seq]);
    }
  }
}
