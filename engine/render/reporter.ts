/**
 * What `tron start` shows while it runs. The engine prints nothing itself (docs/architecture.md, "Output is a reporter"): it
 * hands every event it appends, and its workers' live output, to a reporter.
 *
 * - `plainReporter`: time-stamped lines, for pipes, CI and `--plain` — one line per
 *   thing worth saying (engine/render/narrate.ts), every line starting with its time.
 * - `liveBoard`: on a terminal, the same lines scroll above a board redrawn in place
 *   (engine/render/board.ts) — one row per block at work with the latest line of its
 *   worker, the counts, the merge lane and the spend. It is drawn with log-update: a
 *   small, widely used library that rewrites a region of the terminal (erase the lines
 *   it drew, write the new frame) and nothing more; ink (React) and listr2 (task lists)
 *   bring a rendering model the board does not need, at several times the start-up cost.
 */
import { createLogUpdate } from 'log-update';
import type { Clock } from '../os/clock.ts';
import type { TronEvent } from '../core/events.ts';
import { Board } from './board.ts';
import { Narrator, stampLines, type NarratorOptions } from './narrate.ts';

/** Where a chunk of live output came from. */
export interface TurnAt {
  block: string;
  session: string;
  turn: number;
}

export interface Reporter {
  /** A line that is not an event: a notice from start-up, an effect or shutdown. */
  print(line: string): void;
  /** An event, as the engine appended it. */
  event(e: TronEvent): void;
  /** A worker's live output (stdout, stderr) or progress note, as it arrives. */
  output(at: TurnAt, text: string): void;
  /** The run is over: stop redrawing and leave the terminal as a log. */
  close(): void;
}

/** Time-stamped lines through `print`: for pipes, CI and `--plain`. */
export function plainReporter(o: NarratorOptions & { print: (line: string) => void; clock: Clock }): Reporter {
  const narrator = new Narrator(o);
  return {
    print: (line) => o.print(stampLines(o.clock.now(), line)),
    event: (e) => {
      for (const line of narrator.lines(e)) o.print(stampLines(e.ts, line));
    },
    output: () => {},
    close: () => {},
  };
}

/** How often the board is redrawn at most, and at least (times in phase tick). */
const FRAME_MS = 100;
const TICK_MS = 1000;

/** The board on a terminal, redrawn in place; the narrated lines scroll above it. */
export function liveBoard(o: NarratorOptions & { stream: NodeJS.WriteStream; clock: Clock }): Reporter {
  const narrator = new Narrator(o);
  const board = new Board();
  const draw = createLogUpdate(o.stream, { showCursor: false });
  let last = '';
  let closed = false;
  let pending: NodeJS.Timeout | undefined;
  /** Lines to print above the board, written together once the engine's current step is appended. */
  let lines: string[] = [];
  let flushing: NodeJS.Immediate | undefined;
  const redraw = () => {
    clearTimeout(pending);
    pending = undefined;
    if (closed) return;
    const frame = board.render(o.clock.now(), o.stream.columns || 100);
    if (frame === last) return;
    last = frame;
    draw(frame);
  };
  const soon = () => {
    pending ??= setTimeout(redraw, FRAME_MS);
  };
  const flush = () => {
    flushing = undefined;
    if (lines.length === 0) return;
    const text = lines.join('\n');
    lines = [];
    if (closed) {
      o.stream.write(`${text}\n`);
      return;
    }
    // Erase the board, write the lines where it was, draw it again below them.
    draw.clear();
    o.stream.write(`${text}\n`);
    last = '';
    redraw();
  };
  const above = (text: string) => {
    lines.push(text);
    flushing ??= setImmediate(flush);
  };
  const ticker = setInterval(redraw, TICK_MS);
  ticker.unref();
  return {
    print: (line) => above(stampLines(o.clock.now(), line)),
    event: (e) => {
      board.event(e);
      const said = narrator.lines(e);
      if (said.length > 0) above(said.map((l) => stampLines(e.ts, l)).join('\n'));
      else soon();
    },
    output: (at, text) => {
      board.output(at.block, text);
      soon();
    },
    close: () => {
      if (closed) return;
      clearInterval(ticker);
      clearTimeout(pending);
      clearImmediate(flushing);
      draw.clear();
      closed = true;
      flush();
      draw.done();
    },
  };
}
