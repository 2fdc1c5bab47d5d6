import { afterEach, describe, expect, it } from 'vitest';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { followOutput, keepAgentOutput, streamAgentOutput, tailOf, TurnLog, turnLogPath } from './turn-log.ts';
import { ManualClock } from '../os/clock.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function runDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tron-turnlog-'));
  dirs.push(d);
  return d;
}

describe('TurnLog', () => {
  it("keeps a turn's output in arrival order under turns/<block>/, each note on a line of its own", () => {
    const dir = runDir();
    const log = TurnLog.open(dir, { block: 'w', session: 'w.1.builder', turn: 2 });
    log.output(Buffer.from('compiling'));
    log.note('step 1: run npm test');
    log.output(Buffer.from('ok\n'));
    log.close();
    expect(log.path).toBe(join(dir, 'turns', 'w', 'w.1.builder-turn2.log'));
    expect(readFileSync(turnLogPath(dir, 'w', 'w.1.builder', 2), 'utf8')).toBe('compiling\n» step 1: run npm test\nok\n');
    expect(log.sawOutput).toBe(true);
  });

  it('stops at its cap with one [truncated] line, and drops the rest', () => {
    const dir = runDir();
    const log = TurnLog.open(dir, { block: 'w', session: 's', turn: 1 }, 10);
    log.output(Buffer.from('0123456'));
    log.output(Buffer.from('789abcdef'));
    log.output(Buffer.from('more and more'));
    log.note('a note after the cap');
    log.close();
    expect(readFileSync(log.path, 'utf8')).toBe("0123456789\n[truncated: this turn's output passed 10 bytes; the rest is not kept]\n");
  });
});

describe("a turn's output on an agent, as it comes to the engine", () => {
  const at = { block: 'w', session: 'w.1.builder', turn: 1 };

  it('sends what the file gains, never cutting a character, and the engine writes it once under a line naming the agent', async () => {
    const agentDir = runDir();
    const file = join(agentDir, 'turn.log');
    const sent: Array<{ offset: number; text: string }> = [];
    writeFileSync(file, 'héllo ');
    const clock = new ManualClock(0);
    const following = followOutput(file, (offset, text) => sent.push({ offset, text }), 20, clock);
    clock.advance(19);
    expect(sent).toEqual([]);
    clock.advance(1);
    expect(sent).toHaveLength(1);
    // A character of three bytes written in two goes: its first byte waits for the rest.
    const snow = Buffer.from('☃');
    appendFileSync(file, snow.subarray(0, 1));
    clock.advance(80);
    expect(sent).toHaveLength(1);
    appendFileSync(file, Buffer.concat([snow.subarray(1), Buffer.from(' world\n')]));
    clock.advance(20);
    following.stop();
    expect(clock.pending).toBe(0);
    expect(sent).toEqual([
      { offset: 0, text: 'héllo ' },
      { offset: Buffer.byteLength('héllo '), text: '☃ world\n' },
    ]);
    const engineDir = runDir();
    let streamed = streamAgentOutput(engineDir, at, 'agent a', undefined, { attempt: 1, ...sent[0]! });
    // A note delivered twice is written once.
    streamed = streamAgentOutput(engineDir, at, 'agent a', streamed, { attempt: 1, ...sent[0]! });
    streamed = streamAgentOutput(engineDir, at, 'agent a', streamed, { attempt: 1, ...sent[1]! });
    expect(streamed).toEqual({ attempt: 1, bytes: readFileSync(file).length });
    const kept = readFileSync(turnLogPath(engineDir, at.block, at.session, at.turn), 'utf8');
    expect(kept).toBe(
      `» run on agent a; its output as it came (the whole stays on that host, under its clone's .git/tron-agent/)\nhéllo ☃ world\n`,
    );
  });

  it('completes the file from the result with only what the notes did not bring, and says what is missing', () => {
    const engineDir = runDir();
    const path = turnLogPath(engineDir, at.block, at.session, at.turn);
    let streamed = streamAgentOutput(engineDir, at, 'agent a', undefined, { attempt: 1, offset: 0, text: 'one\n' });
    // The result's end starts at byte 2 of the agent's file: "e\ntwo\n"; the file has 4 bytes of it already.
    keepAgentOutput(engineDir, at, 'agent a', 'e\ntwo\n', { streamed, outputAt: 2 });
    expect(readFileSync(path, 'utf8').split('\n').slice(1).join('\n')).toBe('one\ntwo\n');
    // A note past what the file holds says the gap; a later attempt starts under its own line.
    streamed = streamAgentOutput(engineDir, at, 'agent a', { attempt: 1, bytes: 8 }, { attempt: 1, offset: 12, text: 'x\n' });
    streamed = streamAgentOutput(engineDir, at, 'agent b', streamed, { attempt: 2, offset: 0, text: 'again\n' });
    expect(streamed).toEqual({ attempt: 2, bytes: 6 });
    // Its result's end starts past what its notes brought: the gap is said, then the whole end.
    keepAgentOutput(engineDir, at, 'agent b', 'tail\n', { streamed, outputAt: 10 });
    expect(readFileSync(path, 'utf8').split('\n').slice(1).join('\n')).toBe(
      "one\ntwo\n\n» 4 bytes not shown here\nx\n\n» run on agent b (attempt 2); its output as it came (the whole stays on that host, under its clone's .git/tron-agent/)\nagain\n\n» 4 bytes not shown here; the last 5:\ntail\n",
    );
  });

  it('keeps the end alone when nothing was streamed, saying whether it is all of the output', () => {
    const engineDir = runDir();
    keepAgentOutput(engineDir, at, 'agent a', 'all\n', { outputAt: 0 });
    expect(readFileSync(turnLogPath(engineDir, at.block, at.session, at.turn), 'utf8')).toBe(
      "» run on agent a; all of it here (the whole stays on that host, under its clone's .git/tron-agent/)\nall\n",
    );
    const other = { ...at, turn: 2 };
    keepAgentOutput(engineDir, other, 'agent a', 'end\n', { outputAt: 70_000 });
    expect(readFileSync(turnLogPath(engineDir, other.block, other.session, other.turn), 'utf8')).toMatch(
      /^» run on agent a; its last 64 KiB here/,
    );
  });

  it('reads the end of a file from the start of a character, with the byte it starts at', () => {
    const file = join(runDir(), 'turn.log');
    writeFileSync(file, 'a☃b');
    // The last 3 bytes begin inside the snowman (3 bytes): the end starts after it.
    expect(tailOf(file, 3)).toEqual({ text: 'b', from: 4 });
    expect(tailOf(file, 4)).toEqual({ text: '☃b', from: 1 });
    expect(tailOf(join(runDir(), 'none.log'), 10)).toEqual({ text: '', from: 0 });
  });
});
