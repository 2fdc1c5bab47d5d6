/**
 * The nemesis's TCP proxy (tcp-proxy.ts), each fault for real: an echo server behind it,
 * clients in front.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type TcpProxy, tcpProxy } from './tcp-proxy.ts';

/** An echo server on 127.0.0.1, counting the connections it got. */
async function echoServer(): Promise<{ server: Server; port: number; seen: () => number }> {
  let seen = 0;
  const server = createServer((s) => {
    seen += 1;
    s.on('error', () => undefined);
    s.pipe(s);
  });
  const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
  return { server, port, seen: () => seen };
}

/** A client of `port`, with what it received and how it ended. */
function client(port: number): { socket: Socket; got: () => string; closed: Promise<string> } {
  const socket = createConnection({ host: '127.0.0.1', port });
  let got = '';
  let error = '';
  socket.on('data', (c: Buffer) => {
    got += c.toString();
  });
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  const closed = new Promise<string>((r) => socket.on('close', () => r(error || 'closed')));
  return { socket, got: () => got, closed };
}

async function until(what: () => boolean, ms = 5000): Promise<void> {
  const by = Date.now() + ms;
  while (!what()) {
    if (Date.now() > by) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('the test TCP proxy', () => {
  let echo: Awaited<ReturnType<typeof echoServer>>;
  let proxy: TcpProxy;
  const open: Socket[] = [];
  beforeEach(async () => {
    echo = await echoServer();
    proxy = await tcpProxy({ port: echo.port });
  });
  afterEach(async () => {
    for (const s of open.splice(0)) s.destroy();
    await proxy.close();
    await new Promise((r) => echo.server.close(r));
  });
  const connect = () => {
    const c = client(proxy.port);
    open.push(c.socket);
    return c;
  };

  it('passes bytes both ways to its target', async () => {
    const c = connect();
    c.socket.write('hello');
    await until(() => c.got() === 'hello');
    c.socket.write(' again');
    await until(() => c.got() === 'hello again');
    expect(echo.seen()).toBe(1);
    expect(proxy.live()).toBe(1);
  });

  it('delays every chunk either way by what delay() says, in order, and passes at once again after delay(0)', async () => {
    const c = connect();
    c.socket.write('a');
    await until(() => c.got() === 'a');
    proxy.delay(300);
    const sent = Date.now();
    for (const part of ['b', 'c', 'd']) c.socket.write(part);
    await until(() => c.got() === 'abcd');
    // There and back: twice the delay.
    expect(Date.now() - sent).toBeGreaterThanOrEqual(590);
    proxy.delay(0);
    const again = Date.now();
    c.socket.write('e');
    await until(() => c.got() === 'abcde');
    expect(Date.now() - again).toBeLessThan(250);
  });

  it('resets new connections while refusing, leaves live ones alone, and serves new ones after accept()', async () => {
    const live = connect();
    live.socket.write('1');
    await until(() => live.got() === '1');
    proxy.refuse();
    const refused = connect();
    refused.socket.write('lost');
    expect(await refused.closed).toBe('ECONNRESET');
    expect(refused.got()).toBe('');
    // The target never saw it; the live connection still passes.
    expect(echo.seen()).toBe(1);
    live.socket.write('2');
    await until(() => live.got() === '12');
    proxy.accept();
    const next = connect();
    next.socket.write('back');
    await until(() => next.got() === 'back');
    expect(echo.seen()).toBe(2);
  });

  it('cuts every live connection at once, and serves the next', async () => {
    const a = connect();
    const b = connect();
    a.socket.write('a');
    b.socket.write('b');
    await until(() => a.got() === 'a' && b.got() === 'b');
    expect(proxy.cut()).toBe(2);
    expect(await a.closed).toBe('ECONNRESET');
    expect(await b.closed).toBe('ECONNRESET');
    expect(proxy.live()).toBe(0);
    const c = connect();
    c.socket.write('after');
    await until(() => c.got() === 'after');
  });
});
