/**
 * The HTTP server of `tron serve`: node's own `http` module (the API is a dozen routes and two
 * pages; a framework would bring more than it saves). Every `/api/v1/` request needs
 * `Authorization: Bearer TOKEN` — checked before anything is read or changed, so a
 * request without a valid one gets 401 and has no effect; no cookie is ever set or read,
 * so another site cannot make a browser write on the user's behalf. The pages and their
 * static assets hold no data and are served to anyone who can reach the port.
 *
 * It reads the run's files only; its one write is an operator answer, which goes into
 * `.tron/inbox/` signed exactly as `tron answer` signs it, naming the token that made it.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { type Clock, sleep } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { isRunId } from '../core/names.ts';
import { WEBHOOK_SECRET_ENV } from '../project/config.ts';
import { loadRegister } from '../project/register.ts';
import { buildGraph } from '../render/bpmn-graph.ts';
import type { Details } from '../render/bpmn-details.ts';
import { renderBpmn } from '../render/bpmn.ts';
import { pendingAnswers, statusRows } from '../render/status-rows.ts';
import { runOverlay, type RunOverlay } from '../render/viewer-run.ts';
import { readLog } from '../log/eventlog.ts';
import { parseAnswer, writeAnswer } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';
import { isHolderAlive, readLock } from '../log/lockfile.ts';
import { runsDir } from '../log/runs.ts';
import { turnLogPath } from '../log/turn-log.ts';
import { checkSpineFile, loadSpine } from '../spine/load.ts';
import type { Spine } from '../spine/spine.ts';
import { EarlierRuns } from './earlier.ts';
import type { RunFollower } from './follow.ts';
import { Hub, type HubOptions } from './hub.ts';
import { renderOpenApi } from './openapi.ts';
import { renderDashboard } from './page.ts';
import { renderRunsPage } from './runs-page.ts';
import { Metrics } from './metrics.ts';
import { CHART_DAYS, CHART_DAYS_MOST, ROUTES, RUNS_MOST, RUNS_PAGE, type RouteName } from './routes.ts';
import { RunBook } from './runs.ts';
import { SseClient } from './sse.ts';
import { TokenCheck } from './tokens.ts';
import { GitHubWebhooks, WEBHOOK_PATH, type WebhookOptions } from './webhook.ts';

const require = createRequire(import.meta.url);

export interface ServeOptions extends HubOptions {
  repo: string;
  host: string;
  /** 0: any free port. */
  port: number;
  clock: Clock;
  /** TRON_SERVE_TOKEN, if set. */
  envToken?: string;
  /** Bytes an SSE client's socket may hold unsent (sse.ts HIGH_WATER). */
  highWater?: number;
  /** Whether the run's engine is at work (default: the repository's engine.lock; a database's lease: db-mirror.ts). */
  engineRunning?: () => boolean;
  /** Answers are refused, saying this: the runs shown are another host's (`tron serve --database`). */
  readOnly?: string;
  /** The generation of the repository's lease, where the runs come from the database and it is held (db-mirror.ts). */
  leaseGeneration?: () => number | undefined;
  /** GitHub's webhooks at /webhooks/github (webhook.ts); absent: that path is refused. */
  webhook?: Omit<WebhookOptions, 'repo'>;
}

export interface Serving {
  server: Server;
  url: string;
  port: number;
  hub: Hub;
  close(): Promise<void>;
}

/** Static files of the page: the bpmn-js viewer, vendored from node_modules as workflow/ does. */
const ASSETS: Record<string, [module: string, type: string]> = {
  '/assets/bpmn-viewer.js': ['bpmn-js/dist/bpmn-navigated-viewer.production.min.js', 'text/javascript; charset=utf-8'],
  '/assets/diagram-js.css': ['bpmn-js/dist/assets/diagram-js.css', 'text/css; charset=utf-8'],
  '/assets/bpmn-js.css': ['bpmn-js/dist/assets/bpmn-js.css', 'text/css; charset=utf-8'],
};

const MAX_BODY = 64 * 1024;

/** An error as the API answers it: a stable code, where, and the fix. */
interface ApiProblem {
  code: string;
  path: string;
  message: string;
}

type Handler = (c: Call) => Promise<void> | void;

interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  query: URLSearchParams;
  /** The token's name. */
  who: string;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly problem: ApiProblem,
  ) {
    super(problem.message);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(text);
}

function refuse(status: number, code: string, path: string, message: string): never {
  throw new HttpError(status, { code, path, message });
}

/** Path templates of the table as matchers: `{id}` takes one segment. */
const MATCHERS = (Object.entries(ROUTES) as [RouteName, (typeof ROUTES)[RouteName]][]).map(([name, r]) => {
  const keys: string[] = [];
  const pattern = r.path.replace(/\{(\w+)\}/g, (_, k: string) => {
    keys.push(k);
    return '([^/]+)';
  });
  return { name, method: r.method, regex: new RegExp(`^${pattern}$`), keys };
});

export async function serve(o: ServeOptions): Promise<Serving> {
  const repo = o.repo;
  const hub = new Hub(repo, o);
  const tokens = new TokenCheck(repo, o.envToken);
  const webhooks = new GitHubWebhooks({ repo, secretEnv: WEBHOOK_SECRET_ENV, ...o.webhook });
  const assets = new Map<string, [Buffer, string]>();
  for (const [path, [module, type]] of Object.entries(ASSETS)) assets.set(path, [readFileSync(require.resolve(module)), type]);
  const page = renderDashboard();
  const runsPage = renderRunsPage();
  const openapi = renderOpenApi();
  const workflowCache = new Map<string, Promise<{ spine: Spine; xml: string; details: Record<string, Details> }>>();
  let flowsCache: { run: string; seq: number; at: number; overlay: RunOverlay } | undefined;

  const runs = o.runs ?? runsDir(repo);
  const follower = () => hub.current ?? refuse(404, 'TRON_NO_RUN', runs, 'no run yet; start one with `tron start`');
  const earlier = new EarlierRuns(runs);
  const book = new RunBook(hub.list);
  const metrics = new Metrics(hub.list);

  /** Where a block's turns are: the latest run if it had one there, else the latest earlier run in which it had any. */
  const turnsRun = (f: RunFollower, block: string): RunFollower =>
    f.dispatched.has(block) ? f : (earlier.lastWithTurns(block, f.run) ?? f);

  /** The run `run` names: the latest (`f`) or an earlier one; 404 TRON_RUN_NOT_FOUND for any other. */
  const namedRun = (f: RunFollower, run: string, block: string): RunFollower => {
    if (run === f.run) return f;
    const dir = earlier.dir(run);
    if (dir === undefined)
      refuse(404, 'TRON_RUN_NOT_FOUND', run, `no run "${run}" under .tron/runs/; GET /api/v1/blocks/${block} names the run of each turn`);
    return earlier.follower(dir);
  };

  const workflowOf = (runDir: string) => {
    let w = workflowCache.get(runDir);
    if (!w) {
      const file = join(runDir, 'workflow.toml');
      const checked = existsSync(file) ? checkSpineFile(file) : { spine: undefined, problems: [] };
      const spine = checked.spine && checked.problems.length === 0 ? checked.spine : loadSpine();
      w = renderBpmn(spine).then((xml) => {
        const details: Record<string, Details> = {};
        const graph = buildGraph(spine);
        for (const item of [...graph.nodes, ...graph.edges]) details[item.id] = item.details;
        return { spine, xml, details };
      });
      workflowCache.set(runDir, w);
    }
    return w;
  };

  const rowsOf = (f: NonNullable<Hub['current']>) => {
    const now = o.clock.now();
    return statusRows(f.state, now, pendingAnswers(repo, f.answered)).map(({ ageMs, ...r }) => ({
      ...r,
      age: ageMs,
      cost: f.state.blocks.get(r.block)!.spend,
    }));
  };

  /** Whether an engine is at work on the run `f` follows: one holds the repository's engine.lock (or the database's lease), and the run has not finished. */
  const engineAtWork = (f: NonNullable<Hub['current']>) => {
    if (f.state.finished) return false;
    if (o.engineRunning) return o.engineRunning();
    const holder = readLock(join(repo, '.tron', 'engine.lock'));
    return holder !== undefined && isHolderAlive(holder);
  };

  /** The board's columns: pending, the spine's phases, then the ends. */
  const phasesOf = (spine: Spine) => {
    const ends = ['landed', 'parked', 'abandoned'];
    return ['pending', ...spine.phases.map((p) => p.name).filter((p) => !ends.includes(p) && p !== 'pending'), ...ends];
  };

  const handlers: Record<RouteName, Handler> = {
    state: async ({ res }) => {
      const f = hub.current;
      const phases = phasesOf(f ? (await workflowOf(f.runDir)).spine : loadSpine());
      if (!f) {
        send(res, 200, {
          run: null,
          seq: 0,
          engine: null,
          now: o.clock.now(),
          phases,
          spend: { usd: 0, tokens: 0, unpricedTokens: 0 },
          budgets: {},
          blocks: [],
        });
        return;
      }
      send(res, 200, {
        run: f.run,
        seq: f.last,
        engine: engineAtWork(f) ? 'running' : f.state.finished ? 'finished' : 'interrupted',
        now: o.clock.now(),
        phases,
        spend: f.state.spend,
        budgets: f.state.budgets,
        blocks: rowsOf(f),
      });
    },
    block: ({ res, params }) => {
      const f = follower();
      const row = rowsOf(f).find((r) => r.block === params.id);
      if (!row) refuse(404, 'TRON_SERVE_BLOCK', params.id!, `no block "${params.id}" in run ${f.run}`);
      const timeline = f.blockEvents(row.block);
      // A block carried over from an earlier run shows the turns it had there, each naming its run.
      const where = turnsRun(f, row.block);
      const turns = turnsOf(where === f ? timeline : where.blockEvents(row.block)).map((t) => ({ run: where.run, ...t }));
      send(res, 200, { run: f.run, block: row, turns, timeline });
    },
    logs: async ({ req, res, params, query }) => {
      const f = follower();
      const block = params.id!;
      const asked = query.get('run');
      const where = asked === null ? turnsRun(f, block) : namedRun(f, asked, block);
      const turns = turnsOf(where.blockEvents(block));
      const session = query.get('session');
      const number = query.get('turn');
      const turn = turns.findLast((t) => (session === null || t.session === session) && (number === null || t.turn === Number(number)));
      if (!turn)
        refuse(404, 'TRON_USAGE', block, `no such turn of "${block}" in run ${where.run}; GET /api/v1/blocks/${block} lists its turns`);
      const file = turnLogPath(where.runDir, block, turn.session, turn.turn);
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
      // An earlier run is over: what its file holds is all there is.
      const follow = query.get('follow') !== '0' && where === f;
      await streamFile(file, res, req, o.clock, () => !follow || f.state.finished || turnEnded(f.blockEvents(block, 200), turn));
    },
    runs: async ({ res, query }) => {
      const { limit, before } = pageOf(query);
      send(res, 200, await book.page(hub.current, limit, before));
    },
    history: async ({ res, params, query }) => {
      const { limit, before } = pageOf(query);
      const block = params.id!;
      const found = await book.history(block, hub.current, limit, before);
      if (!found) refuse(404, 'TRON_SERVE_BLOCK', block, `no run under .tron/runs/ has a block "${block}"`);
      send(res, 200, { block, ...found });
    },
    charts: async ({ res, query }) => {
      const text = query.get('days');
      const days = text === null ? CHART_DAYS : Number(text);
      if (text !== null && (!/^\d+$/.test(text) || days < 1 || days > CHART_DAYS_MOST))
        refuse(400, 'TRON_SERVE_QUERY', 'days', `days=${text} is not a whole number from 1 to ${CHART_DAYS_MOST}`);
      send(res, 200, await book.charts(hub.current, { now: o.clock.now(), days }));
    },
    metrics: async ({ res }) => {
      const f = hub.current;
      const lease = o.leaseGeneration?.();
      const text = await metrics.scrape(f, {
        phases: phasesOf(f ? (await workflowOf(f.runDir)).spine : loadSpine()),
        engineUp: f !== undefined && engineAtWork(f),
        ...(lease !== undefined ? { leaseGeneration: lease } : {}),
      });
      res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
      res.end(text);
    },
    runEvents: ({ res, params, query }) => {
      const run = params.run!;
      const after = Math.max(0, Number(query.get('after') ?? 0) || 0);
      const limit = Math.min(1000, Math.max(1, Number(query.get('limit') ?? 1000) || 1000));
      const f = hub.current;
      if (f && f.run === run) {
        const events = f.readEvents(after + 1, limit);
        send(res, 200, { run, events, next: events.at(-1)?.seq ?? after });
        return;
      }
      const file = join(runs, run, 'events.jsonl');
      if (!/^[\w.-]+$/.test(run) || !existsSync(file)) refuse(404, 'TRON_RUN_NOT_FOUND', run, `no run "${run}" under .tron/runs/`);
      const events = readLog(file)
        .events.filter((e) => e.seq > after)
        .slice(0, limit);
      send(res, 200, { run, events, next: events.at(-1)?.seq ?? after });
    },
    events: ({ req, res, query }) => {
      const f = follower();
      const header = req.headers['last-event-id'];
      const after = Number((Array.isArray(header) ? header[0] : header) ?? query.get('after') ?? 0);
      new SseClient(res, f, hub, Number.isInteger(after) && after > 0 ? after : 0, o.highWater);
    },
    answer: async ({ req, res, params, who }) => {
      if (o.readOnly) refuse(409, 'TRON_SERVE_READ_ONLY', params.id!, o.readOnly);
      const body = await readBody(req);
      let reply: unknown;
      try {
        reply = (JSON.parse(body) as { reply?: unknown }).reply;
      } catch {
        refuse(400, 'TRON_ANSWER_INVALID', 'body', 'not JSON; send {"reply": ">>RETRY {\\"guidance\\":\\"…\\"}"}');
      }
      if (typeof reply !== 'string') refuse(400, 'TRON_ANSWER_INVALID', 'body.reply', 'send {"reply": ">>RETRY {\\"guidance\\":\\"…\\"}"}');
      const block = params.id!;
      const { blocks } = loadRegister(repo);
      if (!blocks.some((b) => b.id === block)) refuse(404, 'TRON_ANSWER_BLOCK', block, `no block "${block}" in .tron/blocks/`);
      const phase = hub.current?.state.blocks.get(block)?.phase;
      if (phase !== 'parked') {
        refuse(
          409,
          'TRON_ANSWER_NOT_PARKED',
          block,
          `${block} is ${phase ?? 'not started'}, not parked; only a parked block takes an operator answer`,
        );
      }
      parseAnswer(block, reply);
      const by = `serve:${who}`;
      const file = writeAnswer(repo, block, reply, o.clock, repoKey(repo, { create: true }).key, by);
      // As `tron answer` says it: the engine at work reads it now, else the next `tron start` does.
      const engine = hub.current && engineAtWork(hub.current) ? 'running' : 'stopped';
      send(res, 202, { block, file: join('.tron', 'inbox', file), by, engine });
    },
    flows: async ({ res }) => {
      const f = follower();
      const now = o.clock.now();
      if (!flowsCache || flowsCache.run !== f.run || (flowsCache.seq !== f.last && now - flowsCache.at > 500)) {
        const { spine } = await workflowOf(f.runDir);
        flowsCache = { run: f.run, seq: f.last, at: now, overlay: runOverlay(f.allEvents(), buildGraph(spine), spine.start) };
      }
      send(res, 200, { ...flowsCache.overlay, run: f.run, seq: flowsCache.seq });
    },
    workflow: async ({ res }) => {
      const f = hub.current;
      const { xml, details } = f ? await workflowOf(f.runDir) : await workflowOf(join(runs, '-'));
      send(res, 200, { xml, details });
    },
    openapi: ({ res }) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(openapi);
    },
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof HttpError) return send(res, err.status, { error: err.problem });
      if (err instanceof InputError) return send(res, 400, { error: err.problems[0] });
      send(res, 500, { error: { code: 'TRON_SERVE_FAILED', path: req.url ?? '', message: err.message } });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    res.setHeader('x-content-type-options', 'nosniff');
    // Signed by GitHub, not bearing a token: checked there, before anything is parsed.
    if (url.pathname === WEBHOOK_PATH) return webhooks.handle(req, res);
    // The metrics are the API's too: behind the token.
    if (!url.pathname.startsWith('/api/') && url.pathname !== ROUTES.metrics.path) {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return send(res, 405, { error: { code: 'TRON_USAGE', path: url.pathname, message: 'only GET here' } });
      const html = url.pathname === '/' || url.pathname === '/index.html' ? page : url.pathname === '/runs' ? runsPage : undefined;
      if (html !== undefined) {
        res.writeHead(200, {
          'content-type': 'text/html; charset=utf-8',
          'cache-control': 'no-store',
          // The page runs only its own script and talks only to this server.
          'content-security-policy':
            "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
          'referrer-policy': 'no-referrer',
        });
        return void res.end(html);
      }
      const asset = assets.get(url.pathname);
      if (asset) {
        res.writeHead(200, { 'content-type': asset[1], 'cache-control': 'max-age=3600' });
        return void res.end(asset[0]);
      }
      return send(res, 404, {
        error: { code: 'TRON_USAGE', path: url.pathname, message: 'no such page; the dashboard is at / and the runs page at /runs' },
      });
    }
    // Nothing is read, parsed or changed before the token is checked.
    const who = tokens.who(req.headers.authorization);
    if (who === undefined) {
      res.setHeader('www-authenticate', 'Bearer realm="tron"');
      return send(res, 401, {
        error: {
          code: 'TRON_SERVE_UNAUTHORIZED',
          path: url.pathname,
          message: 'send Authorization: Bearer TOKEN (the token `tron serve` printed, or TRON_SERVE_TOKEN)',
        },
      });
    }
    for (const m of MATCHERS) {
      const hit = m.regex.exec(url.pathname);
      if (!hit) continue;
      if (req.method !== m.method && !(req.method === 'HEAD' && m.method === 'GET')) continue;
      const params: Record<string, string> = {};
      m.keys.forEach((k, i) => {
        params[k] = decodeURIComponent(hit[i + 1]!);
      });
      return handlers[m.name]({ req, res, params, query: url.searchParams, who });
    }
    send(res, 404, { error: { code: 'TRON_USAGE', path: url.pathname, message: 'no such route; GET /api/v1/openapi.json lists them' } });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = o.host.includes(':') ? `[${o.host}]` : o.host;
  return {
    server,
    url: `http://${host}:${port}/`,
    port,
    hub,
    close: () =>
      new Promise<void>((resolve) => {
        hub.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** `limit` and `before` of a page of runs; a malformed one is refused by code, before anything is read. */
function pageOf(query: URLSearchParams): { limit: number; before?: string } {
  const text = query.get('limit');
  const limit = text === null ? RUNS_PAGE : Number(text);
  if (text !== null && (!/^\d+$/.test(text) || limit < 1 || limit > RUNS_MOST))
    refuse(400, 'TRON_SERVE_QUERY', 'limit', `limit=${text} is not a whole number from 1 to ${RUNS_MOST}`);
  const before = query.get('before');
  if (before === null) return { limit };
  if (!isRunId(before)) refuse(400, 'TRON_SERVE_QUERY', 'before', `before=${before} is not a run id; send the \`next\` of the page before`);
  return { limit, before };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) refuse(413, 'TRON_ANSWER_INVALID', 'body', 'an answer is one line; this body is larger than 64 KB');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

interface TurnRow {
  session: string;
  turn: number;
  role: string;
  kind: string;
  ts: number;
  ended: boolean;
}

/** A block's turns from its events: dispatched, and whether its reply is in. */
function turnsOf(events: readonly import('../core/events.ts').TronEvent[]): TurnRow[] {
  const turns: TurnRow[] = [];
  for (const e of events) {
    if (e.type === 'block.dispatched') turns.push({ session: e.session, turn: e.turn, role: e.role, kind: e.kind, ts: e.ts, ended: false });
    if (e.type === 'reply.received') {
      const t = turns.findLast((x) => x.session === e.session && x.turn === e.turn);
      if (t) t.ended = true;
    }
  }
  return turns;
}

function turnEnded(events: readonly import('../core/events.ts').TronEvent[], t: TurnRow): boolean {
  return events.some((e) => e.type === 'reply.received' && e.session === t.session && e.turn === t.turn);
}

/** Writes the file, then what is appended to it, until `done()` says the writer is over (then once more). */
async function streamFile(file: string, res: ServerResponse, req: IncomingMessage, clock: Clock, done: () => boolean): Promise<void> {
  let offset = 0;
  let open = true;
  req.on('close', () => {
    open = false;
  });
  const drain = () => {
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      return;
    }
    if (size <= offset) return;
    const buf = Buffer.alloc(size - offset);
    const fd = openSync(file, 'r');
    try {
      const n = readSync(fd, buf, 0, buf.length, offset);
      offset += n;
      res.write(buf.subarray(0, n));
    } finally {
      closeSync(fd);
    }
  };
  for (;;) {
    const last = done();
    drain();
    if (last || !open) break;
    // Ref'd, as the request is.
    await sleep(clock, 250, { keepAlive: true });
  }
  res.end();
}
