import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { EventInvalidError, EventLog, fold, LogCorruptError, readLog } from './eventlog.ts';
import type { EventBody } from '../core/events.ts';
import { LockHeldError } from './lockfile.ts';

let root: string;
let runDir: string;
let clock: ManualClock;
const open: EventLog[] = [];

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'tron-log-'));
  runDir = join(root, 'run');
  clock = new ManualClock(Date.UTC(2026, 0, 1));
});
afterEach(() => {
  for (const log of open.splice(0)) log.close();
  rmSync(root, { recursive: true, force: true });
});

function openLog(dir = runDir): EventLog {
  const log = EventLog.open(dir, { clock, command: 'tron start --repo test' });
  open.push(log);
  return log;
}

const BODIES: EventBody[] = [
  { type: 'merge.queued', block: 'alpha' },
  { type: 'block.parked', block: 'alpha', reason: 'waits for beta' },
  { type: 'block.abandoned', block: 'beta', reason: 'gave up' },
  // Multi-byte characters, so a cut can fall inside one.
  { type: 'block.parked', block: 'gamma', reason: 'naïve “quotes” ✓ 日本' },
];

/** A real log written by the writer: its bytes and where its last line starts. */
function writtenLog(): { bytes: Buffer; lastStart: number } {
  const dir = join(root, 'source');
  const log = EventLog.open(dir, { clock });
  for (const body of BODIES) {
    log.append(body);
    clock.advance(1000);
  }
  log.close();
  const bytes = readFileSync(join(dir, 'events.jsonl'));
  return { bytes, lastStart: bytes.lastIndexOf(0x0a, bytes.length - 2) + 1 };
}

function errorOf(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a throw');
}

describe('EventLog.append', () => {
  it('stamps v, seq and ts, writes one line per event, and returns it as a reader will see it', () => {
    const log = openLog();
    const first = log.append(BODIES[0]!);
    clock.advance(5);
    const second = log.append(BODIES[1]!);
    expect(first).toEqual({ v: 2, seq: 1, ts: Date.UTC(2026, 0, 1), type: 'merge.queued', block: 'alpha' });
    expect(second).toMatchObject({ seq: 2, ts: Date.UTC(2026, 0, 1) + 5, reason: 'waits for beta' });
    const lines = readFileSync(join(runDir, 'events.jsonl'), 'utf8').split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe('{"v":2,"seq":1,"ts":1767225600000,"type":"merge.queued","block":"alpha"}');
    expect(lines[2]).toBe('');
    expect(readLog(join(runDir, 'events.jsonl')).events).toEqual([first, second]);
    expect(log.events).toEqual([first, second]);
  });

  it('refuses a body that fails its schema, naming the type and the field, and writes nothing', () => {
    const log = openLog();
    log.append(BODIES[0]!);
    const err = errorOf(() => log.append({ type: 'block.parked', block: 'a' } as unknown as EventBody));
    expect(err).toBeInstanceOf(EventInvalidError);
    expect((err as EventInvalidError).code).toBe('TRON_EVENT_INVALID');
    expect(err.message).toMatch(/event block\.parked: .*reason/);
    expect(readFileSync(join(runDir, 'events.jsonl'), 'utf8').split('\n')).toHaveLength(2);
    expect(log.append(BODIES[1]!).seq).toBe(2);
  });

  it('refuses unknown fields and unknown types', () => {
    const log = openLog();
    expect(() => log.append({ ...BODIES[0]!, extra: 1 } as unknown as EventBody)).toThrow(/merge\.queued: .*extra/);
    expect(() => log.append({ type: 'no.such', block: 'a' } as unknown as EventBody)).toThrow(/unknown event type "no\.such"/);
    expect(log.events).toEqual([]);
  });

  it('refuses to append after close', () => {
    const log = EventLog.open(runDir, { clock });
    log.close();
    expect(() => log.append(BODIES[0]!)).toThrow(/append after close/);
  });
});

describe('group commit (the engine’s)', () => {
  it('writes each line at once, so a killed process loses none, and flushes them together when asked', async () => {
    const log = openLog();
    log.groupCommit = true;
    for (const body of BODIES.slice(0, 3)) log.append(body);
    // Another reader (a restart after a kill) sees every line before any flush.
    expect(readLog(join(runDir, 'events.jsonl')).events.map((e) => e.type)).toEqual(BODIES.slice(0, 3).map((b) => b.type));
    await log.sync();
    log.append(BODIES[3]!);
    log.close();
    expect(readLog(join(runDir, 'events.jsonl')).events).toHaveLength(4);
  });
});

describe('EventLog.open', () => {
  it('creates the log and keeps appended lines across a reopen, continuing seq', () => {
    const log = openLog();
    for (const body of BODIES.slice(0, 3)) log.append(body);
    log.close();
    const again = openLog();
    expect(again.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(again.events).toEqual(log.events);
    expect(again.setAside).toBeUndefined();
    expect(again.append(BODIES[3]!).seq).toBe(4);
    expect(readLog(join(runDir, 'events.jsonl')).events).toHaveLength(4);
  });

  it('refuses a second writer on the same run directory, naming the holder', () => {
    openLog();
    const err = errorOf(() => EventLog.open(runDir, { clock, command: 'tron replay' }));
    expect(err).toBeInstanceOf(LockHeldError);
    expect(err.message).toContain(`pid ${process.pid} \`tron start --repo test\``);
    expect(err.message).toContain('stop that process, or wait for it');
  });

  it('releases the lock on close, so the next writer may open', () => {
    const log = EventLog.open(runDir, { clock });
    log.close();
    expect(existsSync(join(runDir, 'events.lock'))).toBe(false);
    openLog();
  });

  it('opens an empty file as an empty log', () => {
    mkdirSync(runDir);
    writeFileSync(join(runDir, 'events.jsonl'), '');
    const log = openLog();
    expect(log.events).toEqual([]);
    expect(log.append(BODIES[0]!).seq).toBe(1);
  });

  it('refuses a corrupt log and releases its lock', () => {
    const { bytes } = writtenLog();
    mkdirSync(runDir);
    writeFileSync(join(runDir, 'events.jsonl'), bytes.toString().replace('"seq":2', '"seq":7'));
    const err = errorOf(() => EventLog.open(runDir, { clock }));
    expect(err).toBeInstanceOf(LogCorruptError);
    expect((err as LogCorruptError).line).toBe(2);
    expect(existsSync(join(runDir, 'events.lock'))).toBe(false);
  });
});

describe('a torn last line', () => {
  it('is reported by readLog, and set aside by open, at every byte offset of the last line', () => {
    const { bytes, lastStart } = writtenLog();
    const lineBytes = bytes.length - lastStart; // including its newline
    expect(lineBytes).toBeGreaterThan(Buffer.byteLength(BODIES[3]!.type) + 20);
    for (let cut = 0; cut <= lineBytes; cut++) {
      const dir = join(root, `cut-${cut}`);
      const file = join(dir, 'events.jsonl');
      mkdirSync(dir);
      const copy = bytes.subarray(0, lastStart + cut);
      writeFileSync(file, copy);
      const whole = cut === 0 || cut === lineBytes;

      const read = readLog(file);
      expect(readFileSync(file).equals(copy)).toBe(true); // read-only
      expect(read.events).toHaveLength(cut === lineBytes ? 4 : 3);
      if (whole) expect(read.torn).toBeUndefined();
      else expect(read.torn).toEqual({ offset: lastStart, bytes: cut, text: copy.subarray(lastStart).toString('utf8') });

      const log = EventLog.open(dir, { clock });
      if (whole) {
        expect(log.setAside).toBeUndefined();
        expect(existsSync(`${file}.torn`)).toBe(false);
      } else {
        expect(log.setAside).toEqual({ ...read.torn, file: `${file}.torn` });
        expect(readFileSync(file).equals(bytes.subarray(0, lastStart))).toBe(true);
        const torn = readFileSync(`${file}.torn`);
        const header = `# torn tail of events.jsonl set aside at 2026-01-01T00:00:04.000Z: offset ${lastStart}, ${cut} bytes\n`;
        expect(torn.equals(Buffer.concat([Buffer.from(header), copy.subarray(lastStart), Buffer.from('\n')]))).toBe(true);
      }
      expect(log.append(BODIES[0]!).seq).toBe(read.events.length + 1);
      log.close();
      expect(readLog(file).torn).toBeUndefined();
      expect(readLog(file).events).toHaveLength(read.events.length + 1);
      rmSync(dir, { recursive: true });
    }
  });

  it('includes a complete last line that is not JSON, and each set-aside is added to the .torn file', () => {
    const { bytes } = writtenLog();
    mkdirSync(runDir);
    const file = join(runDir, 'events.jsonl');
    writeFileSync(file, Buffer.concat([bytes, Buffer.from('\0\0\0\n')]));
    expect(readLog(file).torn).toEqual({ offset: bytes.length, bytes: 4, text: '\0\0\0\n' });
    const log = EventLog.open(runDir, { clock });
    expect(log.events).toHaveLength(4);
    log.append(BODIES[0]!);
    log.close();
    writeFileSync(file, Buffer.concat([readFileSync(file), Buffer.from('{"v":1,')]));
    openLog();
    const torn = readFileSync(`${file}.torn`, 'utf8');
    expect(torn.match(/^# torn tail/gm)).toHaveLength(2);
    expect(torn).toContain('\0\0\0\n');
    expect(torn.endsWith('{"v":1,\n')).toBe(true);
  });
});

describe('readLog', () => {
  function corrupt(edit: (lines: string[]) => void): Error {
    const { bytes } = writtenLog();
    const lines = bytes.toString('utf8').split('\n');
    edit(lines);
    const file = join(root, 'corrupt.jsonl');
    writeFileSync(file, lines.join('\n'));
    return errorOf(() => readLog(file));
  }

  it('refuses a bad line in the middle, naming the file, the line and the fix', () => {
    const err = corrupt((lines) => (lines[1] = '{"v":1,"seq":2'));
    expect(err).toBeInstanceOf(LogCorruptError);
    expect(err).toMatchObject({ code: 'TRON_LOG_CORRUPT', line: 2, file: join(root, 'corrupt.jsonl') });
    expect(err.message).toContain(`${join(root, 'corrupt.jsonl')}:2: not JSON`);
    expect(err.message).toContain('Restore it from a backup');
  });

  it('refuses a blank line, a gap in seq, a field its schema does not allow, and an unknown type', () => {
    expect(corrupt((lines) => lines.splice(1, 0, ''))).toMatchObject({ line: 2 });
    expect(corrupt((lines) => lines.splice(1, 1)).message).toContain(':2: seq is 3, expected 2');
    expect(corrupt((lines) => (lines[2] = lines[2]!.replace('}', ',"x":1}'))).message).toMatch(/:3: block\.abandoned: .*"x"/);
    expect(corrupt((lines) => (lines[0] = lines[0]!.replace('merge.queued', 'merge.nope'))).message).toContain(
      ':1: unknown event type "merge.nope"',
    );
  });

  it('treats a complete last line that is JSON but wrong as corruption, not a torn tail', () => {
    const err = corrupt((lines) => (lines[3] = lines[3]!.replace('"reason"', '"why"')));
    expect(err).toMatchObject({ line: 4 });
  });

  it('refuses a line from a newer tron, saying to upgrade', () => {
    expect(corrupt((lines) => (lines[0] = lines[0]!.replace('"v":2', '"v":99'))).message).toContain('upgrade tron');
  });

  it('reads a landing of a version 1 log as the one-block stack it was', () => {
    const file = join(root, 'v1.jsonl');
    const a = 'a'.repeat(40);
    const b = 'b'.repeat(40);
    writeFileSync(
      file,
      [
        `{"v":1,"seq":1,"ts":1,"type":"land.intent","block":"alpha","sha":"${a}","from":"${b}"}`,
        `{"v":1,"seq":2,"ts":2,"type":"merge.unlocked","block":"alpha"}`,
        `{"v":1,"seq":3,"ts":3,"type":"block.landed","block":"alpha","sha":"${a}","from":"${b}"}`,
        `{"v":1,"seq":4,"ts":4,"type":"land.refused","block":"beta","actual":null,"detail":"moved"}`,
        '',
      ].join('\n'),
    );
    expect(readLog(file).events).toEqual([
      { v: 1, seq: 1, ts: 1, type: 'land.intent', stack: 0, sha: a, from: b, blocks: [{ block: 'alpha', sha: a }], tested: 'gate' },
      { v: 1, seq: 2, ts: 2, type: 'merge.unlocked', block: 'alpha' },
      { v: 1, seq: 3, ts: 3, type: 'block.landed', block: 'alpha', sha: a, from: b, top: a },
      { v: 1, seq: 4, ts: 4, type: 'land.refused', stack: 0, blocks: ['beta'], actual: null, detail: 'moved' },
    ]);
  });

  it('reports a missing file with the fix', () => {
    expect(() => readLog(join(root, 'nope.jsonl'))).toThrow(/TRON_LOG_MISSING: .*check the run directory/);
  });
});

describe('a signed log', () => {
  const key = Buffer.alloc(32, 7);
  const signedLog = (dir = runDir) => {
    const log = EventLog.open(dir, { clock, key });
    open.push(log);
    return log;
  };
  const file = () => join(runDir, 'events.jsonl');
  const lines = () => readFileSync(file(), 'utf8').split('\n').slice(0, -1);

  it('ends every line with a mac chained to the line before, and reads back the same events', () => {
    const log = signedLog();
    for (const body of BODIES) log.append(body);
    for (const line of lines()) expect(line).toMatch(/,"mac":"[0-9a-f]{32}"\}$/);
    const read = readLog(file(), { key });
    expect(read).toMatchObject({ signed: true, foreign: [] });
    expect(read.events).toEqual(log.events);
    expect(read.events[0]).not.toHaveProperty('mac');
  });

  it('sets aside a line appended after the run finished, even with the right seq, and never refuses the log', () => {
    const log = signedLog();
    for (const body of BODIES) log.append(body);
    log.close();
    open.splice(0);
    const forged = JSON.stringify({ v: 2, seq: 5, ts: 1, type: 'block.abandoned', block: 'alpha', reason: 'forged' });
    writeFileSync(file(), `${readFileSync(file(), 'utf8')}{not json\n${forged}\n`);
    const read = readLog(file(), { key });
    expect(read.events.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(read.foreign.map((f) => [f.line, f.reason])).toEqual([
      [5, 'it carries no signature'],
      [6, 'it carries no signature'],
    ]);
  });

  it('sets aside an inserted line — even one with a mac copied from a genuine line — and keeps reading the lines after it', () => {
    const log = signedLog();
    for (const body of BODIES) log.append(body);
    const all = lines();
    const copied = all[1]!.replace('waits for beta', 'waits for nobody');
    writeFileSync(file(), `${[all[0], copied, ...all.slice(1)].join('\n')}\n`);
    const read = readLog(file(), { key });
    expect(read.events.map((e) => e.type)).toEqual(BODIES.map((b) => b.type));
    expect(read.foreign).toMatchObject([{ line: 2, reason: 'its signature does not follow the line before it' }]);
  });

  it("does not believe a line carried over from another run's log", () => {
    const other = join(root, 'other');
    const log = signedLog(other);
    log.append(BODIES[0]!);
    log.close();
    open.splice(0);
    mkdirSync(runDir, { recursive: true });
    writeFileSync(file(), readFileSync(join(other, 'events.jsonl')));
    const read = readLog(file(), { key });
    expect(read.events).toEqual([]);
    expect(read.foreign).toHaveLength(1);
  });

  it('keeps its own line whole when someone else left a partial line at the end, and continues the chain after it', () => {
    const log = signedLog();
    log.append(BODIES[0]!);
    writeFileSync(file(), `${readFileSync(file(), 'utf8')}{"v":2,"seq":2`, { flag: 'w' });
    log.append(BODIES[1]!);
    log.append(BODIES[2]!);
    const read = readLog(file(), { key });
    expect(read.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(read.foreign.map((f) => f.line)).toEqual([2]);
  });

  it('continues the chain when the writer opens the log again', () => {
    const log = signedLog();
    log.append(BODIES[0]!);
    log.close();
    open.splice(0);
    const again = signedLog();
    again.append(BODIES[1]!);
    expect(readLog(file(), { key })).toMatchObject({ foreign: [], events: [{ seq: 1 }, { seq: 2 }] });
  });
});

describe('fold', () => {
  it('folds events in order', () => {
    const log = openLog();
    for (const body of BODIES) log.append(body);
    expect(fold(log.events, [] as string[], (s, e) => [...s, `${e.seq}:${e.type}`])).toEqual([
      '1:merge.queued',
      '2:block.parked',
      '3:block.abandoned',
      '4:block.parked',
    ]);
  });
});
