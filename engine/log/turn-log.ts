/**
 * Every worker turn's live output, kept in the run directory as it arrives:
 * `turns/<block>/<session>-turn<n>.log`. One file per turn, stdout and stderr interleaved
 * in arrival order (what a terminal would have shown), so `tron logs -f BLOCK` can follow
 * a 20-minute turn while it runs and a crash loses nothing already written. Workers
 * without a process of their own (the built-in agent, sim) write their progress notes
 * (`» step 3: run npm test`) and, at the end, their reply.
 *
 * A turn's file is bounded: past `TURN_LOG_CAP` bytes a `[truncated …]` line is written
 * once and the rest is dropped (the live board still sees it).
 */
import { appendFileSync, closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type Clock, systemClock } from '../os/clock.ts';

/** Bytes kept per turn. */
export const TURN_LOG_CAP = 4 * 1024 * 1024;

/** The marker that starts a note line (a progress note, the reply of a worker without a process). */
export const NOTE_MARK = '» ';

/** Where a turn's output goes, under the run directory. */
export function turnLogPath(runDir: string, block: string, session: string, turn: number): string {
  return join(runDir, 'turns', block, `${session.replace(/[^A-Za-z0-9._-]/g, '_')}-turn${turn}.log`);
}

export class TurnLog {
  private fd: number | undefined;
  private bytes = 0;
  private truncated = false;
  private atLineStart = true;
  /** Whether any process output was written (else the reply is added at the end). */
  sawOutput = false;

  private constructor(
    readonly path: string,
    private readonly cap: number,
  ) {
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, 'a');
  }

  static open(runDir: string, at: { block: string; session: string; turn: number }, cap = TURN_LOG_CAP): TurnLog {
    return new TurnLog(turnLogPath(runDir, at.block, at.session, at.turn), cap);
  }

  /** Raw output of the worker's process, as it arrived. */
  output(chunk: Buffer): void {
    this.sawOutput = true;
    this.write(chunk);
  }

  /** One note line, on a line of its own. */
  note(text: string): void {
    const lines = text.replace(/\n+$/, '').split('\n');
    this.write(Buffer.from(`${this.atLineStart ? '' : '\n'}${lines.map((l) => `${NOTE_MARK}${l}`).join('\n')}\n`));
  }

  close(): void {
    if (this.fd === undefined) return;
    closeSync(this.fd);
    this.fd = undefined;
  }

  private write(chunk: Buffer): void {
    if (this.fd === undefined || this.truncated || chunk.length === 0) return;
    const room = this.cap - this.bytes;
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    for (let done = 0; done < part.length; ) done += writeSync(this.fd, part, done);
    this.bytes += part.length;
    if (part.length > 0) this.atLineStart = part[part.length - 1] === 0x0a;
    if (part.length < chunk.length) {
      this.truncated = true;
      const mark = `${this.atLineStart ? '' : '\n'}[truncated: this turn's output passed ${sizeOf(this.cap)}; the rest is not kept]\n`;
      writeSync(this.fd, mark);
      this.atLineStart = true;
    }
  }
}

function sizeOf(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round(bytes / 1024 / 1024)} MB` : `${bytes} bytes`;
}

/** How much of a turn's output run on a `tron agent` comes back with its result (the whole stays on the agent). */
export const AGENT_OUTPUT_CHARS = 64 * 1024;

/** The end of a file, at most `chars` characters of it; "" when it cannot be read. */
export function endOf(file: string, chars: number): string {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    const from = Math.max(0, size - chars * 4);
    const buffer = Buffer.alloc(size - from);
    const n = readSync(fd, buffer, 0, buffer.length, from);
    return buffer.subarray(0, n).toString('utf8').slice(-chars);
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Where the whole of an agent's turn output is, as a turn's file here says. */
const WHOLE_ON_AGENT = "the whole stays on that host, under its clone's .git/tron-agent/";

/** How much of a turn's output a `tron agent` sends while the turn runs (bytes); past it, only the end comes, with the result. */
export const STREAMED_BYTES = 1024 * 1024;

/** The most one output note carries (bytes: never more characters than the database takes, pg-job-control.ts). */
const NOTE_BYTES = 32 * 1024;

/** How many of the first `n` bytes end on a whole UTF-8 character (a writer may be mid-character). */
export function wholeCharacters(buf: Buffer, n: number): number {
  let lead = n - 1;
  while (lead >= 0 && n - lead <= 4 && (buf[lead]! & 0xc0) === 0x80) lead--;
  if (lead < 0) return n;
  const b = buf[lead]!;
  const len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  return lead + len > n ? lead : n;
}

/**
 * The agent's side: the output a turn writes to `file`, sent as it grows — every `everyMs`,
 * what was added since, in notes of at most 32 KiB from their byte `offset` in the file,
 * up to STREAMED_BYTES in all. `stop` ends it; the end of the output goes with the result.
 */
export function followOutput(
  file: string,
  send: (offset: number, text: string) => void,
  everyMs: number,
  clock: Clock = systemClock,
): { stop(): void } {
  let offset = 0;
  const tick = () => {
    let fd: number | undefined;
    try {
      fd = openSync(file, 'r');
      for (;;) {
        const room = Math.min(NOTE_BYTES, STREAMED_BYTES - offset);
        if (room <= 0) return;
        const buffer = Buffer.alloc(room);
        const n = readSync(fd, buffer, 0, room, offset);
        const whole = wholeCharacters(buffer, n);
        if (whole === 0) return;
        send(offset, buffer.subarray(0, whole).toString('utf8'));
        offset += whole;
        if (n < room) return;
      }
    } catch {
      // Not written yet, or gone: the next look, or the result, brings it.
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  };
  return { stop: clock.every(everyMs, tick) };
}

/** How much of a turn's output run on a `tron agent` comes back with its result (bytes; the whole stays on the agent). */
export const AGENT_OUTPUT_BYTES = 64 * 1024;

/** The last `bytes` bytes of a finished turn's file, from a character's start, and the byte offset they start at. */
export function tailOf(file: string, bytes: number): { text: string; from: number } {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const size = fstatSync(fd).size;
    let from = Math.max(0, size - bytes);
    const buffer = Buffer.alloc(size - from);
    const n = readSync(fd, buffer, 0, buffer.length, from);
    let skip = 0;
    while (skip < n && skip < 3 && (buffer[skip]! & 0xc0) === 0x80) skip += 1;
    from += skip;
    return { text: buffer.subarray(skip, n).toString('utf8'), from };
  } catch {
    return { text: '', from: 0 };
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** How far a turn's output notes brought its file on the engine's host: the attempt whose output it holds, and how many bytes of it. */
export interface StreamedOutput {
  attempt: number;
  bytes: number;
}

/**
 * What one output note of a turn run on an agent adds to the turn's text, wherever it is
 * written (the engine's file, a reader's terminal): a line naming the agent when an attempt
 * starts, a note of the bytes missing when it skips some, then its own text — nothing for a
 * note that repeats what is there, or an older attempt's. What comes of an untrusted agent
 * is bounded: never past TURN_LOG_CAP.
 */
export function outputStep(
  agent: string,
  was: StreamedOutput | undefined,
  note: { attempt: number; offset: number; text: string },
): { write: Array<string | Buffer>; now: StreamedOutput } {
  const write: Array<string | Buffer> = [];
  let now = was;
  if (now === undefined || note.attempt > now.attempt) {
    const head = `${NOTE_MARK}run on ${agent}${note.attempt > 1 ? ` (attempt ${note.attempt})` : ''}; its output as it came (${WHOLE_ON_AGENT})\n`;
    write.push(now === undefined ? head : `\n${head}`);
    now = { attempt: note.attempt, bytes: 0 };
  }
  if (note.attempt < now.attempt || note.offset < now.bytes) return { write, now };
  const text = Buffer.from(note.text);
  if (note.offset + text.length > TURN_LOG_CAP) return { write, now };
  if (note.offset > now.bytes) write.push(`\n${NOTE_MARK}${note.offset - now.bytes} bytes not shown here\n`);
  write.push(text);
  return { write, now: { attempt: now.attempt, bytes: note.offset + text.length } };
}

/** What a finished turn's result adds to what its output notes brought (`streamed`): the part of its end (from byte `outputAt`) not there yet. */
export function outputRest(output: string, streamed: StreamedOutput, outputAt: number): Array<string | Buffer> {
  const bytes = Buffer.from(output);
  const skip = streamed.bytes - outputAt;
  if (skip >= bytes.length) return [];
  if (skip < 0) return [`\n${NOTE_MARK}${-skip} bytes not shown here; the last ${bytes.length}:\n`, bytes];
  return [bytes.subarray(skip)];
}

/** The engine's side: one output note of a turn run on an agent, added to the turn's file here (`tron logs -f BLOCK` follows it). */
export function streamAgentOutput(
  runDir: string,
  at: { block: string; session: string; turn: number },
  agent: string,
  was: StreamedOutput | undefined,
  note: { attempt: number; offset: number; text: string },
): StreamedOutput {
  const path = turnLogPath(runDir, at.block, at.session, at.turn);
  const { write, now } = outputStep(agent, was, note);
  if (write.length > 0) mkdirSync(dirname(path), { recursive: true });
  for (const part of write) appendFileSync(path, part);
  return now;
}

/**
 * A turn a `tron agent` ran: the end of its output, as its result brought it, completes the
 * turn's file here, so `tron logs BLOCK` shows it on the engine's host as it shows a turn
 * run here. When its output notes made the file (`streamed`, of the same attempt), only
 * what they did not bring is added — the result's `output` starts at byte `outputAt` of the
 * agent's file. Otherwise the end is the file, under a note that says where the whole is;
 * a file already there (of an agent that sends no offset) is left alone.
 */
export function keepAgentOutput(
  runDir: string,
  at: { block: string; session: string; turn: number },
  agent: string,
  output: string,
  o: { streamed?: StreamedOutput; outputAt?: number } = {},
): void {
  const path = turnLogPath(runDir, at.block, at.session, at.turn);
  if (existsSync(path)) {
    if (o.streamed === undefined || o.outputAt === undefined) return;
    for (const part of outputRest(output, o.streamed, o.outputAt)) appendFileSync(path, part);
    return;
  }
  mkdirSync(dirname(path), { recursive: true });
  const text = output.slice(-AGENT_OUTPUT_CHARS);
  const cut = o.outputAt !== undefined ? o.outputAt > 0 : text.length < output.length || output.length >= AGENT_OUTPUT_CHARS;
  writeFileSync(
    path,
    `${NOTE_MARK}run on ${agent}; ${cut ? 'its last 64 KiB' : 'all of it'} here (${WHOLE_ON_AGENT})\n${text}${text === '' || text.endsWith('\n') ? '' : '\n'}`,
    { flag: 'wx' },
  );
}
