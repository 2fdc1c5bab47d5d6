import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Board, clockDuration, lastLine } from './board.ts';
import { readLog } from '../log/eventlog.ts';
import type { TronEvent } from '../core/events.ts';

/** A recorded run: left and right build in parallel; left lands first, the engine rebases right onto it. */
const RUN = readLog(join(import.meta.dirname, '..', '..', 'runs', 'parallel-rebase', 'events.jsonl')).events;

function boardAt(seq: number): { board: Board; at: TronEvent } {
  const board = new Board();
  for (const e of RUN.slice(0, seq)) board.event(e);
  return { board, at: RUN[seq - 1]! };
}

describe('Board', () => {
  it("shows one row per block at work — phase, attempt, time in phase, and its worker's latest line", () => {
    const { board, at } = boardAt(13); // both builders dispatched
    board.output('right', 'npm WARN deprecated\n\u001b[32m✓ 12 passing\u001b[0m\n\n');
    const frame = board.render(at.ts + 65_000, 200).split('\n');
    expect(frame[0]).toMatch(/^tron \S+ · 1:05 · 2 at work · 0 landed · 0 parked · 0 pending$/);
    expect(frame[1]).toBe('merge lane: free');
    expect(frame[2]).toMatch(/^ {2}left {3}build {2}#1 {2}\s*\d+:\d\d {2}the engine checks its work and runs the tests$/);
    expect(frame[3]).toMatch(/^ {2}right {2}build {2}#1 {2}\s*\d+:\d\d {2}builder, build turn 1 › ✓ 12 passing$/);
    expect(frame).toHaveLength(4);
  });

  it('forgets what a worker said when its block starts another turn', () => {
    const { board, at } = boardAt(16);
    board.output('left', 'old news');
    board.event(RUN[16]!); // left: challenge turn dispatched
    expect(RUN[16]).toMatchObject({ type: 'block.dispatched', kind: 'challenge' });
    expect(board.render(at.ts, 200)).not.toContain('old news');
  });

  it("shows the merge lane's stack, its blocks and what the lane is doing with it", () => {
    const { board, at } = boardAt(27); // left's stack formed, rebasing
    expect(RUN[26]).toMatchObject({ type: 'lane.stacked', blocks: [{ block: 'left' }] });
    expect(board.render(at.ts, 200)).toMatch(/^merge lane: stack 1 \(left\) — rebasing$/m);
    expect(RUN[28]).toMatchObject({ type: 'land.intent' });
    expect(boardAt(29).board.render(at.ts, 200)).toMatch(/^merge lane: stack 1 \(left\) — landing$/m);
    expect(RUN[53]).toMatchObject({ type: 'candidate.requested', blocks: ['right'] });
    expect(boardAt(54).board.render(at.ts, 200)).toMatch(/^merge lane: stack 2 \(right\) — testing [0-9a-f]{12}$/m);
    expect(boardAt(34).board.render(at.ts, 200)).toMatch(/^merge lane: free$/m);
  });

  it('names the blocks a speculative stack still awaits the verdict on, and what it holds for them', () => {
    const run = readLog(join(import.meta.dirname, '..', '..', 'runs', 'lane-speculate', 'events.jsonl')).events;
    const at = (type: string, n = 1) => run.filter((e) => e.type === type)[n - 1]!.seq;
    const frame = (seq: number) => {
      const board = new Board();
      for (const e of run.slice(0, seq)) board.event(e);
      return board.render(run[seq - 1]!.ts, 200);
    };
    expect(frame(at('lane.stacked'))).toMatch(/^merge lane: stack 1 \(a, b\) — rebasing, awaiting the verdict on b$/m);
    expect(frame(at('candidate.requested'))).toMatch(/^merge lane: stack 1 \(a, b\) — testing [0-9a-f]{12}, awaiting the verdict on b$/m);
    expect(frame(at('candidate.tested'))).toMatch(/^merge lane: stack 1 \(a, b\) — green, awaiting the verdict on b$/m);
    expect(frame(at('lane.stacked', 2))).toMatch(/^merge lane: stack 2 \(a\) — rebasing$/m);
  });

  it('counts landed blocks and shows no rows once the run is over', () => {
    const { board, at } = boardAt(RUN.length);
    const frame = board.render(at.ts, 200).split('\n');
    expect(frame[0]).toMatch(/0 at work · 2 landed · 0 parked · 0 pending · finished$/);
    expect(frame).toHaveLength(2);
  });

  it('counts a block blocked by its parked dependency apart from the parked and the pending', () => {
    // A recorded run: flaky is parked for the operator; app, which depends on it, waits.
    const run = readLog(join(import.meta.dirname, '..', '..', 'runs', 'operator-abandon', 'run-1', 'events.jsonl')).events;
    const board = new Board();
    for (const e of run) board.event(e);
    const head = board.render(run.at(-1)!.ts, 200).split('\n')[0]!;
    expect(head).toMatch(/0 at work · 0 landed · 1 parked · 0 pending · 1 blocked · finished$/);
  });

  it("adds up the run's spend from worker.usage and usage.recorded events, with a cost when one is known", () => {
    const { board, at } = boardAt(13);
    const usage = (fields: Record<string, unknown>) => ({ v: 1, seq: 999, ts: at.ts, block: 'left', session: 'left.1.builder', ...fields });
    board.event(
      usage({
        type: 'worker.usage',
        role: 'builder',
        model: 'm',
        prompt_tokens: 900,
        completion_tokens: 100,
        total_tokens: 1000,
      }) as TronEvent,
    );
    expect(board.render(at.ts, 200).split('\n')[0]).toMatch(/ · spent 1\.0k tokens$/);
    // usage.recorded: the event a worker reports cost with (another branch adds it to the table).
    board.event(
      usage({
        type: 'usage.recorded',
        role: 'builder',
        turn: 1,
        model: 'm',
        input_tokens: 10_000,
        cached_tokens: 2000,
        output_tokens: 500,
        cost_usd: 0.4213,
      }) as unknown as TronEvent,
    );
    expect(board.render(at.ts, 200).split('\n')[0]).toMatch(/ · spent 14k tokens, \$0\.42$/);
  });

  it('cuts every line to the width of the terminal', () => {
    const { board, at } = boardAt(13);
    board.output('left', 'x'.repeat(500));
    for (const line of board.render(at.ts, 60).split('\n')) expect([...line].length).toBeLessThanOrEqual(59);
  });
});

describe('lastLine', () => {
  it('takes the last non-blank line, without colours, cursor moves or carriage-return redraws', () => {
    expect(lastLine('one\ntwo\n\n')).toBe('two');
    expect(lastLine('\u001b[1m\u001b[32mbold green\u001b[0m')).toBe('bold green');
    expect(lastLine('progress 10%\rprogress 50%\rprogress 90%')).toBe('progress 90%');
    expect(lastLine('\u001b]0;window title\u0007done')).toBe('done');
    expect(lastLine('\n \n')).toBeUndefined();
  });
});

describe('clockDuration', () => {
  it('reads like a stopwatch', () => {
    expect([0, 42_000, 725_000, 3_729_000].map(clockDuration)).toEqual(['0:00', '0:42', '12:05', '1:02:09']);
  });
});
