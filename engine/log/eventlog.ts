/**
 * The append-only event log of one run: `events.jsonl`, one JSON event a line.
 *
 * Invariants enforced here: one writer at a time (`events.lock`); every line is
 * validated against EVENT_SCHEMAS and written before `append` returns (a killed engine
 * loses none of it); with group commit, one flush to disk covers every line written
 * meanwhile, and the engine starts no effect before the flush that covers the line
 * announcing it (`sync`); `seq` rises by
 * exactly one from 1. A torn last line — a crash mid-write — is set aside into
 * `events.jsonl.torn`, never fatal and never silently dropped.
 *
 * **Signed lines.** With the repository's key (engine/log/keys.ts) every line ends in
 * `"mac"`: an HMAC of the line and of the previous line's mac — a chain that starts from
 * the run's id. A line anyone else wrote, inserted or appended (a worker without a
 * sandbox can write the file), does not follow the chain: the reader sets it aside as
 * *foreign*, reports it, and never acts on it, and it never blocks the next start; the
 * engine's own lines after it still follow the chain. A log without signatures (written
 * by an earlier tron, or where no key is kept) is read as before: a bad line other than
 * the last is corruption, refused, never skipped.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  fsync,
  fsyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Clock } from '../os/clock.ts';
import { EVENT_VERSION, type EventBody, type TronEvent } from '../core/events.ts';
import { parseEventLine, validateEvent } from './eventlog-line.ts';
import { acquireLock, fsyncDir, type Lock } from './lockfile.ts';
import { FaultError, InputError } from '../core/errors.ts';
import type { InputCode } from '../core/problems.ts';
import { keyOfRunDir, sign } from './keys.ts';
import type { RunLog } from './run-log.ts';

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

/** The log file was removed (its run directory, say) while the engine wrote it: nothing more can be recorded. */
export class RunDirGoneError extends FaultError<'TRON_RUN_DIR_GONE'> {
  constructor(readonly file: string) {
    super('TRON_RUN_DIR_GONE', `${file} was removed while the engine ran; the run stopped. Start again: recovery resumes it`);
  }
}

/** A line of a signed log that the engine did not write: set aside, never acted on. */
export interface ForeignLine {
  /** Its line number in the file (1-based). */
  line: number;
  reason: string;
  /** Its start, for the report. */
  text: string;
}

export interface LogRead {
  events: TronEvent[];
  torn?: Omit<TornTail, 'file'>;
  /** Lines of a signed log that do not follow its chain; always empty for an unsigned log. */
  foreign: ForeignLine[];
  /** Whether the log's lines are signed (and were checked). */
  signed: boolean;
  /** The mac of the last line the engine wrote, where its next line continues the chain. */
  chain?: string;
}

/** Whose key a reader uses: given, none (`null`), or the key of the repository the run directory is in. */
type KeyOption = { key?: Buffer | null };

function keyFor(runDir: string, opts: KeyOption): Buffer | undefined {
  if (opts.key === null) return undefined;
  return opts.key ?? keyOfRunDir(runDir);
}

/**
 * Reads a log without changing it: every good event, the torn last line if any, and the
 * foreign lines of a signed log. Throws LogCorruptError for a bad line of an unsigned log
 * that is not the last.
 */
export function readLog(file: string, opts: KeyOption = {}): LogRead {
  if (!existsSync(file)) {
    throw new InputError([{ code: 'TRON_LOG_MISSING', path: file, message: 'no event log here; check the run directory' }]);
  }
  return parseLog(readFileSync(file), file, keyFor(dirname(file), opts));
}

/** The signature a signed line ends with. */
const MAC = /,"mac":"([0-9a-f]{32})"\}$/;

/** Where a run's chain starts: its id, so a line copied from another run's log does not follow. */
function chainStart(key: Buffer, file: string): string {
  return sign(key, 'tron events', basename(dirname(file)));
}

/** The same, by the run's id: for a log kept elsewhere than its run directory (engine/log/pg-log.ts). */
export function chainStartOf(key: Buffer, runId: string): string {
  return sign(key, 'tron events', runId);
}

/**
 * Reads the lines of a log kept elsewhere (the database's, engine/log/pg-log.ts) exactly as
 * a file's: the same checks, the same chain from the run's id. `where` names it in errors.
 */
export function readLines(lines: readonly string[], where: string, runId: string, key: Buffer | undefined): LogRead {
  const text = lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  return parseLog(Buffer.from(text, 'utf8'), join(where, runId, 'events'), key);
}

/**
 * One event as the writer stamps it: validated, and signed where `signing` is given (its
 * chain is moved on). The file log and the database's write exactly these lines.
 */
export function stampLine(
  body: EventBody,
  seq: number,
  ts: number,
  signing: { key: Buffer; chain: string } | undefined,
): { event: TronEvent; line: string } {
  const { type, ...fields } = body;
  const candidate = { v: EVENT_VERSION, seq, ts, type, ...fields };
  const text = JSON.stringify(candidate);
  const event = validateEvent(text, seq);
  const mac = signing ? sign(signing.key, signing.chain, text) : undefined;
  if (signing && mac) signing.chain = mac;
  return { event, line: mac ? `${text.slice(0, -1)},"mac":"${mac}"}` : text };
}

/** Splits the bytes into good events, foreign lines and a torn tail. Newline bytes never occur inside a UTF-8 character. */
function parseLog(buf: Buffer, file: string, key: Buffer | undefined): LogRead {
  let end = buf.length; // bytes that hold complete lines
  if (end > 0 && buf[end - 1] !== 0x0a) end = buf.lastIndexOf(0x0a) + 1;
  const lines = buf.subarray(0, end).toString('utf8').split('\n').slice(0, -1);
  // A complete last line that is not JSON is torn too (a crash can leave junk before a newline).
  if (end === buf.length && lines.length > 0 && !isJson(lines.at(-1)!)) {
    lines.pop();
    end = end >= 2 ? buf.lastIndexOf(0x0a, end - 2) + 1 : 0;
  }
  const events: TronEvent[] = [];
  const foreign: ForeignLine[] = [];
  const signed = key !== undefined && lines.some((line) => MAC.test(line));
  let chain: string | undefined;
  if (signed) {
    chain = chainStart(key, file);
    for (const [i, text] of lines.entries()) {
      const m = MAC.exec(text);
      const preview = text.length > 200 ? `${text.slice(0, 200)}…` : text;
      if (!m) {
        foreign.push({ line: i + 1, reason: 'it carries no signature', text: preview });
        continue;
      }
      const body = `${text.slice(0, m.index)}}`;
      if (sign(key, chain, body) !== m[1]) {
        foreign.push({ line: i + 1, reason: 'its signature does not follow the line before it', text: preview });
        continue;
      }
      // Signed by this engine and still unreadable: a newer tron wrote it, or a bug.
      const parsed = parseEventLine(body, events.length + 1);
      if (!parsed.ok) throw new LogCorruptError(file, i + 1, parsed.reason);
      events.push(parsed.event);
      chain = m[1]!;
    }
  } else {
    for (const [i, text] of lines.entries()) {
      const parsed = parseEventLine(text, i + 1);
      if (!parsed.ok) throw new LogCorruptError(file, i + 1, parsed.reason);
      events.push(parsed.event);
    }
  }
  const read: LogRead = { events, foreign, signed, ...(chain !== undefined ? { chain } : {}) };
  if (end === buf.length) return read;
  const tail = buf.subarray(end);
  return { ...read, torn: { offset: end, bytes: tail.length, text: tail.toString('utf8') } };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** How the writer signs its lines: the key and the mac its next line follows. */
interface Signing {
  key: Buffer;
  chain: string;
}

/** The one writer of a run's log. */
export class EventLog implements RunLog {
  readonly file: string;
  readonly setAside?: TornTail;
  /** Lines of the file the engine did not write (a signed log only), found when it was opened. */
  readonly foreign: readonly ForeignLine[];
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
    read: LogRead,
    setAside: TornTail | undefined,
    private readonly signing: Signing | undefined,
  ) {
    this.file = file;
    this.fd = fd;
    this.size = size;
    this.list = read.events;
    this.foreign = read.foreign;
    if (setAside) this.setAside = setAside;
  }

  /**
   * Takes the run's writer lock, then opens (or creates) `runDir/events.jsonl` and
   * continues after its last good event, setting a torn tail aside first. With a key
   * (given, or the repository's), a new log is signed, and a signed one continues its chain.
   */
  static open(runDir: string, opts: { clock: Clock; command?: string } & KeyOption): EventLog {
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
      const key = keyFor(runDir, opts);
      const read = parseLog(buf, file, key);
      const setAside = read.torn ? setTornAside(file, buf, read.torn, opts.clock) : undefined;
      // An unsigned log from an earlier tron stays unsigned: a signed line after it would make its own lines foreign.
      const signing =
        key && (read.signed || read.events.length + read.foreign.length === 0)
          ? { key, chain: read.chain ?? chainStart(key, file) }
          : undefined;
      const fd = openSync(file, 'a+');
      return new EventLog(file, opts.clock, lock, fd, read.torn ? read.torn.offset : buf.length, read, setAside, signing);
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
   * Stamps, validates and writes one event (flushed too, unless `groupCommit`: then `sync`
   * flushes it with its neighbours); returns it exactly as a reader
   * of the file will see it. An invalid body is a programming error (EventInvalidError).
   */
  append(body: EventBody): TronEvent {
    if (this.fd === undefined) throw new Error(`${this.file}: append after close`);
    if (this.broken) throw new Error(`${this.file}: an earlier write failed (${this.broken}); reopen the log`);
    const { type, ...fields } = body;
    const candidate = { v: EVENT_VERSION, seq: this.list.length + 1, ts: this.clock.now(), type, ...fields };
    const text = JSON.stringify(candidate);
    const event = validateEvent(text, candidate.seq);
    const mac = this.signing ? sign(this.signing.key, this.signing.chain, text) : undefined;
    const line = mac ? `${text.slice(0, -1)},"mac":"${mac}"}\n` : `${text}\n`;
    const bytes = Buffer.from(line, 'utf8');
    this.startOnOwnLine(this.fd);
    try {
      for (let done = 0; done < bytes.length; ) done += writeSync(this.fd, bytes, done);
      if (this.groupCommit) this.unsynced = true;
      else fsyncSync(this.fd);
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
    if (this.signing && mac) this.signing.chain = mac;
    return event;
  }

  /**
   * Someone else wrote to the file since the last append (a worker can, without a
   * sandbox): what they wrote is theirs to answer for, and is found foreign on reading;
   * but if it does not end in a newline, the engine's line must not be glued to it.
   */
  private startOnOwnLine(fd: number): void {
    const stat = fstatSync(fd);
    // Removed under the engine (the run directory deleted): appending would write nowhere.
    if (stat.nlink === 0) throw new RunDirGoneError(this.file);
    const size = stat.size;
    if (size === this.size) return;
    const last = Buffer.alloc(1);
    if (size > 0 && readSync(fd, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a) {
      writeSync(fd, '\n');
      this.size = size + 1;
    } else {
      this.size = size;
    }
  }

  /**
   * Group commit (the engine's): `append` writes each line at once — a crash of the
   * process loses none of it — and the flush to disk, which only a crash of the machine
   * needs, is done by `sync`, once for every line written since the last: before the
   * effect any of them announces proceeds (engine.ts).
   */
  groupCommit = false;
  private unsynced = false;

  /** Flushes every line written so far to disk, off the main thread. A failure breaks the log. */
  sync(): Promise<void> {
    if (!this.unsynced || this.fd === undefined) return Promise.resolve();
    this.unsynced = false;
    const fd = this.fd;
    return new Promise((resolve, reject) =>
      fsync(fd, (err) => {
        if (!err) return resolve();
        this.broken = err.message;
        reject(err);
      }),
    );
  }

  /** The same, now and in this thread: for a step that cannot wait (consuming an answer file). */
  syncNow(): void {
    if (!this.unsynced || this.fd === undefined) return;
    fsyncSync(this.fd);
    this.unsynced = false;
  }

  /** Flushes now, then runs `then`: the file log need not wait (a step that consumes an answer file). */
  whenDurable(then: () => void): void {
    this.syncNow();
    then();
  }

  /** Closes the file and releases the writer lock. */
  close(): void {
    if (this.fd === undefined) return;
    this.syncNow();
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
