/**
 * A TCP proxy on 127.0.0.1 in front of a target host and port, for tests that put a bad
 * network between a process and what it talks to (the nemesis: every engine and agent
 * reaches PostgreSQL and the git remote through one). Faults, each until changed:
 *
 * - `delay(ms)`: every chunk, either way, reaches the other side `ms` later (order kept);
 * - `refuse()` … `accept()`: new connections are reset as they come (the target never sees
 *   them); live ones go on;
 * - `cut()`: every live connection is reset, both sides, at once; new ones are served.
 *
 * `close()` stops listening and resets whatever is still open.
 */
import { createConnection, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** Every chunk, either way, is passed on `ms` later (0: at once). */
  delay(ms: number): void;
  /** New connections are reset as they come, until `accept()`. */
  refuse(): void;
  accept(): void;
  /** Resets every live connection, both sides; how many there were. */
  cut(): number;
  /** Connections accepted so far (refused ones not counted). */
  accepted(): number;
  /** Connections open now. */
  live(): number;
  close(): Promise<void>;
}

/** Passes `from`'s data to `to`, each chunk `wait()` ms later, in order. */
function pass(from: Socket, to: Socket, wait: () => number): void {
  let last = 0;
  from.on('data', (chunk: Buffer) => {
    const ms = wait();
    if (ms <= 0 && last <= Date.now()) {
      to.write(chunk);
      return;
    }
    // Never before an earlier chunk: a shorter delay set meanwhile waits for the longer one.
    const at = Math.max(Date.now() + ms, last);
    last = at;
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, at - Date.now());
  });
  from.on('end', () => {
    const left = last - Date.now();
    if (left <= 0) to.end();
    else setTimeout(() => to.end(), left);
  });
}

export async function tcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  let delayMs = 0;
  let refusing = false;
  let accepted = 0;
  const pairs = new Set<[Socket, Socket]>();
  const reset = (s: Socket) => {
    if (!s.destroyed) s.resetAndDestroy();
  };
  const server = createServer((client) => {
    if (refusing) {
      client.on('error', () => undefined);
      reset(client);
      return;
    }
    accepted += 1;
    const upstream = createConnection({ host: target.host ?? '127.0.0.1', port: target.port });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      reset(client);
      reset(upstream);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', () => {
      pairs.delete(pair);
      if (!upstream.destroyed) upstream.end();
    });
    upstream.on('close', () => {
      pairs.delete(pair);
      if (!client.destroyed) client.end();
    });
    pass(client, upstream, () => delayMs);
    pass(upstream, client, () => delayMs);
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
  const cut = () => {
    const n = pairs.size;
    for (const [a, b] of [...pairs]) {
      reset(a);
      reset(b);
    }
    pairs.clear();
    return n;
  };
  return {
    port,
    delay: (ms) => {
      delayMs = ms;
    },
    refuse: () => {
      refusing = true;
    },
    accept: () => {
      refusing = false;
    },
    cut,
    accepted: () => accepted,
    live: () => pairs.size,
    async close() {
      cut();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
