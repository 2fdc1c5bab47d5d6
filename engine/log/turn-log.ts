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
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';

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

/**
 * A turn a `tron agent` ran: the end of its output, as its result brought it, becomes the
 * turn's file here (under a note that says where the whole is), so `tron logs BLOCK` shows
 * it on the engine's host as it shows a turn run here. A file already there is left alone.
 */
export function keepAgentOutput(runDir: string, at: { block: string; session: string; turn: number }, agent: string, output: string): void {
  const path = turnLogPath(runDir, at.block, at.session, at.turn);
  if (existsSync(path)) return;
  mkdirSync(dirname(path), { recursive: true });
  const text = output.slice(-AGENT_OUTPUT_CHARS);
  const whole = text.length < output.length || output.length >= AGENT_OUTPUT_CHARS ? 'its last 64 KiB' : 'all of it';
  writeFileSync(
    path,
    `${NOTE_MARK}run on ${agent}; ${whole} here (the whole stays on that host, under its clone's .git/tron-agent/)\n${text}${text === '' || text.endsWith('\n') ? '' : '\n'}`,
    { flag: 'wx' },
  );
}
