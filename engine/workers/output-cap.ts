/**
 * A worker's reply is bounded. A process can print without end — 200 MB on stdout took
 * the engine to 1.4 GB, and every byte was copied into the log and the transcript — so
 * what a turn prints is kept only up to a limit (`[limits] reply`, 4 MB unless set); past
 * it the turn fails as `reply_too_large`, and the rest goes to a spill file in the run
 * directory, itself capped, so the operator can see what was said without the engine
 * holding it. Memory stays at the limit whatever the worker prints.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** What a reply may hold when the config says nothing: 4 MiB. */
export const DEFAULT_REPLY_LIMIT = 4 * 1024 * 1024;
/** What a spill file may hold; beyond it output is counted and dropped. */
export const SPILL_LIMIT = 64 * 1024 * 1024;

export class OutputCap {
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private spilled = 0;
  private fd: number | undefined;
  /** Every byte offered, kept or not. */
  total = 0;

  constructor(
    private readonly limit: number,
    /** Where output past the limit goes (created on the first byte past it). */
    private readonly spillFile: string,
    private readonly spillLimit = SPILL_LIMIT,
  ) {}

  /** Takes a chunk of output: kept while under the limit, spilled (up to its cap) past it. */
  push(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.limit - this.keptBytes;
    if (room > 0) {
      const head = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.kept.push(head);
      this.keptBytes += head.length;
      if (head.length === chunk.length) return;
      chunk = chunk.subarray(head.length);
    }
    this.spill(chunk);
  }

  /** Whether the output went past the limit. */
  get overflowed(): boolean {
    return this.total > this.limit;
  }

  /** The kept output, as text (a character cut at the limit shows as U+FFFD). */
  text(): string {
    return Buffer.concat(this.kept, this.keptBytes).toString('utf8');
  }

  /** What became of the output past the limit, for the turn's failure detail. */
  describe(): string {
    const lost = this.total - this.keptBytes - this.spilled;
    return (
      `the reply was ${this.total} bytes, more than the ${this.limit} kept ([limits] reply in .tron/config.toml); ` +
      `the ${this.spilled} bytes after it are in ${this.spillFile}${lost > 0 ? `, and ${lost} more were dropped` : ''}`
    );
  }

  /** Closes the spill file. */
  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private spill(chunk: Buffer): void {
    const room = this.spillLimit - this.spilled;
    if (room <= 0 || chunk.length === 0) return;
    try {
      if (this.fd === undefined) {
        mkdirSync(dirname(this.spillFile), { recursive: true });
        this.fd = openSync(this.spillFile, 'w');
      }
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      for (let done = 0; done < part.length; ) done += writeSync(this.fd, part, done);
      this.spilled += part.length;
    } catch {
      // The spill file is a courtesy: output that cannot be written there is dropped.
      this.spilled = this.spillLimit;
    }
  }
}
