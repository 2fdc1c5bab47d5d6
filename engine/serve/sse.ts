/**
 * One client of `/api/v1/events`. It has a cursor — the next seq to send — and is pumped
 * whenever the run has more or its socket has room: frames come from the follower's
 * shared window while the client keeps up; once it has fallen out of the window it is
 * told (`event: gap`) and served the missed events from the log file, in batches, until
 * it is back in the window. Nothing is skipped and nothing is sent twice: the cursor only
 * moves past what was written.
 *
 * Memory per client is bounded: nothing is written while more than `highWater` bytes wait
 * in its socket's buffer (node's `writableLength`), and one batch is at most `BATCH_BYTES`.
 */
import type { ServerResponse } from 'node:http';
import type { Hub } from './hub.ts';
import type { RunFollower } from './follow.ts';

/** Bytes a client's socket may hold unsent before it gets nothing more until it drains. */
export const HIGH_WATER = 256 * 1024;
const BATCH_BYTES = 64 * 1024;
const BATCH_EVENTS = 512;
const KEEPALIVE_MS = 15_000;

export class SseClient {
  private next: number;
  private behind = false;
  private closed = false;
  private readonly unsubscribe: (() => void)[] = [];
  private readonly keepalive: NodeJS.Timeout;
  /** Times this client was told it fell behind (for tests and the bench). */
  gaps = 0;

  constructor(
    private readonly res: ServerResponse,
    private readonly follower: RunFollower,
    hub: Hub,
    after: number,
    private readonly highWater = HIGH_WATER,
  ) {
    this.next = Math.max(1, after + 1);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // A reconnecting EventSource waits this long (ms).
    res.write('retry: 1000\n\n');
    this.unsubscribe.push(follower.onChange(() => this.pump()));
    this.unsubscribe.push(
      hub.onSwitch((run) => {
        this.res.write(`event: run\ndata: ${JSON.stringify({ run })}\n\n`);
        this.close();
        this.res.end();
      }),
    );
    res.on('drain', () => this.pump());
    res.on('close', () => this.close());
    this.keepalive = setInterval(() => {
      if (this.res.writableLength === 0) this.res.write(': keepalive\n\n');
    }, KEEPALIVE_MS);
    this.keepalive.unref();
    this.pump();
  }

  /** Writes what the client may take now. */
  pump(): void {
    const f = this.follower;
    while (!this.closed && this.next <= f.last && this.res.writableLength <= this.highWater) {
      let chunk = '';
      let count = 0;
      if (f.frame(this.next) === undefined) {
        if (!this.behind) {
          this.behind = true;
          this.gaps++;
          chunk += `event: gap\ndata: ${JSON.stringify({ from: this.next, to: f.last })}\n\n`;
        }
        const frames = f.readFrames(this.next, BATCH_EVENTS);
        if (frames.length === 0) return;
        chunk += frames.join('');
        count = frames.length;
      } else {
        this.behind = false;
        for (let seq = this.next; seq <= f.last && chunk.length < BATCH_BYTES; seq++) {
          const frame = f.frame(seq);
          if (frame === undefined) break;
          chunk += frame;
          count++;
        }
      }
      this.next += count;
      this.res.write(chunk);
    }
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepalive);
    for (const u of this.unsubscribe) u();
  }
}
