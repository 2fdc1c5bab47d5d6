/**
 * The append-only event log of one run: `events.jsonl`, one JSON event a line.
 *
 * Invariants enforced here: one writer at a time (`events.lock`); every line is
 * validated against EVENT_SCHEMAS before it is written and flushed to disk before
 * `append` returns, so no effect runs ahead of the line announcing it; `seq` rises by
 * exactly one from 1. A torn last line — a crash mid-write — is set aside into
 * `events.jsonl.torn`, never fatal and never silently dropped; a bad line anywhere
 * else is corruption and is refused, never skipped.
 */
import { closeSync, existsSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../core/clock.ts';
import { EVENT_VERSION, type EventBody, type TronEvent } from '../core/events.ts';
import { parseEventLine, validateEvent } from './eventlog-line.ts';
import { acquireLock, fsyncDir, type Lock } from './lockfile.ts';
import { InputError } from '../core/errors.ts';
import type { InputCode } from '../core/problems.ts';

export { EventInvalidError } from './eventlog-line.ts';

/** A torn last line that `EventLog.open` moved aside. */
export interface TornTail {
  /** Byte offset in events.jsonl where the torn line began (the log's length after). */
  offset: number;
  /** Its length in bytes. */
  bytes: number;
  /** Where it was moved: events.jsonl.torn. */
  file: string;
  /** Its text (UTF-8; a character cut in half shows as U+FFFD). */
  text: string;
}

/** A bad line before the last one: the log cannot be trusted and is never repaired silently. */
export class LogCorruptError extends InputError {
  readonly code = 'TRON_LOG_CORRUPT' satisfies InputCode;
  constructor(
    readonly file: string,
    readonly line: number,
    reason: string,
  ) {
    super([
      {
        code: 'TRON_LOG_CORRUPT',
        path: `${file}:${line}`,
        message: `${reason}; only the last line of a log can be torn by a crash, so this file was changed by something other than tron. Restore it from a backup, or move the run directory aside to start afresh`,
      },
    ]);
    this.name = 'LogCorruptError';
  }
}

/**
 * Reads a log without changing it: every good event, and the torn last line if any.
 * Throws LogCorruptError for a bad line that is not the last.
 */
export function readLog(file: string): { events: TronEvent[]; torn?: Omit<TornTail, 'file'> } {
  if (!existsSync(file)) {
    throw new InputError([{ code: 'TRON_LOG_MISSING', path: file, message: 'no event log here; check the run directory' }]);
  }
  return parseLog(readFileSync(file), file);
}

/** Splits the bytes into good events and a torn tail. Newline bytes never occur inside a UTF-8 character. */
function parseLog(buf: Buffer, file: string): { events: TronEvent[]; torn?: Omit<TornTail, 'file'> } {
  let end = buf.length; // bytes that hold complete lines
  if (end > 0 && buf[end - 1] !== 0x0a) end = buf.lastIndexOf(0x0a) + 1;
  const lines = buf.subarray(0, end).toString('utf8').split('\n').slice(0, -1);
  // A complete last line that is not JSON is torn too (a crash can leave junk before a newline).
  if (end === buf.length && lines.length > 0 && !isJson(lines.at(-1)!)) {
    lines.pop();
    end = end >= 2 ? buf.lastIndexOf(0x0a, end - 2) + 1 : 0;
  }
  const events: TronEvent[] = [];
  for (const [i, text] of lines.entries()) {
    const parsed = parseEventLine(text, i + 1);
    if (!parsed.ok) throw new LogCorruptError(file, i + 1, parsed.reason);
    events.push(parsed.event);
  }
  if (end === buf.length) return { events };
  const tail = buf.subarray(end);
  return { events, torn: { offset: end, bytes: tail.length, text: tail.toString('utf8') } };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The one writer of a run's log. */
export class EventLog {
  readonly file: string;
  readonly setAside?: TornTail;
  private readonly list: TronEvent[];
  private fd: number | undefined;
  private size: number;
  private broken: string | undefined;

  private constructor(
    file: string,
    private readonly clock: Clock,
    private readonly lock: Lock,
    fd: number,
    size: number,
    events: TronEvent[],
    setAside: TornTail | undefined,
  ) {
    this.file = file;
    this.fd = fd;
    this.size = size;
    this.list = events;
    if (setAside) this.setAside = setAside;
  }

  /**
   * Takes the run's writer lock, then opens (or creates) `runDir/events.jsonl` and
   * continues after its last good event, setting a torn tail aside first.
   */
  static open(runDir: string, opts: { clock: Clock; command?: string }): EventLog {
    mkdirSync(runDir, { recursive: true });
    const file = join(runDir, 'events.jsonl');
    const lock = acquireLock(join(runDir, 'events.lock'), {
      purpose: `the writer of ${file}`,
      clock: opts.clock,
      ...(opts.command === undefined ? {} : { command: opts.command }),
    });
    try {
      if (!existsSync(file)) {
        const fd = openSync(file, 'wx');
        fsyncSync(fd);
        closeSync(fd);
        fsyncDir(runDir);
      }
      const buf = readFileSync(file);
      const { events, torn } = parseLog(buf, file);
      const setAside = torn ? setTornAside(file, buf, torn, opts.clock) : undefined;
      const fd = openSync(file, 'a');
      return new EventLog(file, opts.clock, lock, fd, torn ? torn.offset : buf.length, events, setAside);
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  /** Everything in the log so far, in order. */
  get events(): readonly TronEvent[] {
    return this.list;
  }

  /**
   * Stamps, validates, writes and flushes one event; returns it exactly as a reader
   * of the file will see it. An invalid body is a programming error (EventInvalidError).
   */
  append(body: EventBody): TronEvent {
    if (this.fd === undefined) throw new Error(`${this.file}: append after close`);
    if (this.broken) throw new Error(`${this.file}: an earlier write failed (${this.broken}); reopen the log`);
    const { type, ...fields } = body;
    const candidate = { v: EVENT_VERSION, seq: this.list.length + 1, ts: this.clock.now(), type, ...fields };
    const line = `${JSON.stringify(candidate)}\n`;
    const event = validateEvent(line.slice(0, -1), candidate.seq);
    const bytes = Buffer.from(line, 'utf8');
    try {
      for (let done = 0; done < bytes.length; ) done += writeSync(this.fd, bytes, done);
      fsyncSync(this.fd);
    } catch (err) {
      // Never leave a partial line that a later line would turn into corruption.
      this.broken = (err as Error).message;
      try {
        ftruncateSync(this.fd, this.size);
        fsyncSync(this.fd);
      } catch {
        // The next open sets the torn line aside.
      }
      throw err;
    }
    this.size += bytes.length;
    this.list.push(event);
    return event;
  }

  /** Closes the file and releases the writer lock. */
  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
    this.lock.release();
  }
}

/** Appends the torn bytes to `<file>.torn` (flushed) before truncating the log to its last good line. */
function setTornAside(file: string, buf: Buffer, torn: Omit<TornTail, 'file'>, clock: Clock): TornTail {
  const tornFile = `${file}.torn`;
  const created = !existsSync(tornFile);
  const bytes = buf.subarray(torn.offset);
  const header = `# torn tail of events.jsonl set aside at ${new Date(clock.now()).toISOString()}: offset ${torn.offset}, ${torn.bytes} bytes\n`;
  const out = openSync(tornFile, 'a');
  try {
    writeSync(out, header);
    writeSync(out, bytes);
    writeSync(out, '\n');
    fsyncSync(out);
  } finally {
    closeSync(out);
  }
  if (created) fsyncDir(join(file, '..'));
  const fd = openSync(file, 'r+');
  try {
    ftruncateSync(fd, torn.offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return { ...torn, file: tornFile };
}

/** Folds a log into a state: the one way readers derive state from events. */
export function fold<S>(events: readonly TronEvent[], init: S, step: (s: S, e: TronEvent) => S): S {
  let state = init;
  for (const e of events) state = step(state, e);
  return state;
}
