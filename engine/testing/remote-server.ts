/**
 * Real remotes for tests, on 127.0.0.1: a bare repository served by `git daemon` (with
 * receive-pack enabled) and one served by `git http-backend` behind a small Node HTTP
 * server with basic auth (smart HTTP). Both can be stopped and started again on the same
 * port — a remote that is down for a while — and the bare repository can be given a real
 * pre-receive hook that declines with a message.
 *
 * The daemon is `git daemon --inetd`, one process per connection on a socket Node holds:
 * the port is taken once (no race for a free port) and "down" is a closed listener.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testGit, type TestRepo } from './repo.ts';

/** The environment of the servers' git processes: no HOME or system config, nothing of the test's. */
function serverEnv(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
  };
}

/** A bare repository in a fresh temporary folder (`<root>/repo.git`), trunk `main`. */
export interface BareRemote {
  root: string;
  /** The bare repository. */
  dir: string;
  /** Runs git in the bare repository (test identity, no global config). */
  git(...args: string[]): Promise<string>;
  /** Installs a pre-receive hook that prints `message` and declines every push (or removes it: undefined). */
  decline(message: string | undefined): Promise<void>;
  /** Installs hook `name` (e.g. post-receive) as this shell script. */
  hook(name: string, script: string): Promise<void>;
  cleanup(): Promise<void>;
}

/** Puts `repo`'s trunk on the bare repository and makes `served` (that repository, served) its `origin`. */
export async function publishTo(repo: TestRepo, bare: BareRemote, served: ServedRemote): Promise<void> {
  await repo.git('push', '-q', bare.dir, 'main');
  await repo.git('remote', 'add', 'origin', served.url);
  await repo.git('fetch', '-q', 'origin');
}

export async function makeBareRemote(): Promise<BareRemote> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tron-remote-srv-')));
  const dir = join(root, 'repo.git');
  await testGit(root, 'init', '-q', '--bare', '-b', 'main', dir);
  const hook = join(dir, 'hooks', 'pre-receive');
  return {
    root,
    dir,
    git: (...args) => testGit(dir, ...args),
    async decline(message) {
      if (message === undefined) {
        await rm(hook, { force: true });
        return;
      }
      const quoted = message.replace(/'/g, `'\\''`);
      await writeFile(hook, `#!/bin/sh\ncat >/dev/null\necho '${quoted}' >&2\nexit 1\n`);
      await chmod(hook, 0o755);
    },
    async hook(name, script) {
      await writeFile(join(dir, 'hooks', name), script);
      await chmod(join(dir, 'hooks', name), 0o755);
    },
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

/** A served remote that can go down and come back on the same address. */
export interface ServedRemote {
  url: string;
  port: number;
  /** Stops listening and drops every open connection. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  /** Connections (daemon) or requests (http) served so far. */
  served(): number;
}

/**
 * Serves `remote` with `git daemon --inetd --enable=receive-pack` at `git://127.0.0.1:<port>/repo.git`.
 * `onService` sees each connection's service (`git-upload-pack`: a fetch or ls-remote;
 * `git-receive-pack`: a push) before the daemon answers it.
 */
export async function serveDaemon(remote: BareRemote, opts: { onService?: (service: string) => void } = {}): Promise<ServedRemote> {
  const children = new Set<ChildProcess>();
  const sockets = new Set<Socket>();
  let count = 0;
  const server: NetServer = createNetServer((socket) => {
    count++;
    sockets.add(socket);
    const child = spawn(
      'git',
      ['daemon', '--inetd', '--export-all', '--enable=receive-pack', '--informative-errors', `--base-path=${remote.root}`, remote.root],
      { env: serverEnv(remote.root), stdio: ['pipe', 'pipe', 'ignore'] },
    );
    children.add(child);
    if (opts.onService) {
      // The request's first pkt-line names the service: "<4 hex>git-upload-pack /repo.git\0…".
      socket.once('data', (chunk: Buffer) => {
        const service = /git-[a-z-]+/.exec(chunk.subarray(4, 40).toString('latin1'))?.[0];
        if (service) opts.onService!(service);
      });
    }
    socket.pipe(child.stdin!);
    child.stdout!.pipe(socket);
    const end = () => {
      children.delete(child);
      sockets.delete(socket);
      socket.destroy();
      child.kill('SIGKILL');
    };
    child.on('close', () => {
      children.delete(child);
      socket.end();
    });
    child.stdin!.on('error', end);
    socket.on('error', end);
    socket.on('close', () => sockets.delete(socket));
  });
  const port = await listen(server, 0);
  return {
    url: `git://127.0.0.1:${port}/repo.git`,
    port,
    served: () => count,
    async stop() {
      for (const socket of sockets) socket.destroy();
      for (const child of children) child.kill('SIGKILL');
      await new Promise<void>((done) => server.close(() => done()));
    },
    async start() {
      await listen(server, port);
    },
  };
}

/** Serves `remote` by smart HTTP (`git http-backend`) at `http://127.0.0.1:<port>/repo.git`, for `user`:`password` only. */
export async function serveHttp(remote: BareRemote, auth: { user: string; password: string }): Promise<ServedRemote> {
  let count = 0;
  const expected = `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`;
  const server: HttpServer = createHttpServer((req, res) => {
    count++;
    if (req.headers.authorization !== expected) {
      req.resume();
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="tron-test"' }).end('authentication required\n');
      return;
    }
    backend(remote, req, res, auth.user);
  });
  const port = await listen(server, 0);
  return {
    url: `http://127.0.0.1:${port}/repo.git`,
    port,
    served: () => count,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
    async start() {
      await listen(server, port);
    },
  };
}

/** One CGI request to `git http-backend`: the request body in, its headers and body out. */
function backend(remote: BareRemote, req: IncomingMessage, res: ServerResponse, user: string): void {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const env: Record<string, string> = {
    ...serverEnv(remote.root),
    GIT_PROJECT_ROOT: remote.root,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ''),
    REQUEST_METHOD: req.method ?? 'GET',
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_USER: user,
    REMOTE_ADDR: '127.0.0.1',
  };
  if (req.headers['content-length'] !== undefined) env.CONTENT_LENGTH = String(req.headers['content-length']);
  if (req.headers['content-encoding'] !== undefined) env.HTTP_CONTENT_ENCODING = String(req.headers['content-encoding']);
  if (req.headers['git-protocol'] !== undefined) env.GIT_PROTOCOL = String(req.headers['git-protocol']);
  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  req.pipe(child.stdin);
  child.stdin.on('error', () => undefined);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  child.on('close', () => {
    if (!headersDone) res.writeHead(502).end();
    else res.end();
  });
  // The client went away mid-answer: the backend's work is for no one.
  res.on('close', () => {
    if (!res.writableEnded) child.kill('SIGKILL');
  });
}

function listen(server: NetServer | HttpServer, port: number): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      resolvePromise(typeof address === 'object' && address !== null ? address.port : port);
    });
  });
}
