/**
 * The API of `tron serve`, as one table: method, path, what it does, its parameters and
 * the shape of what it returns. The server dispatches on it (engine/serve/server.ts maps
 * every name to a handler, and a name without one does not compile) and the OpenAPI
 * description is rendered from it (engine/serve/openapi.ts → docs/openapi.json), so the
 * documented API is the one served.
 */
import { z } from 'zod';

const Spend = z.object({
  usd: z.number().describe('USD of the usage whose cost is known'),
  tokens: z.number().int().describe('every token: input, cached and output'),
  unpricedTokens: z.number().int().describe('tokens of usage with no known cost'),
});

const BlockRow = z.object({
  block: z.string(),
  title: z.string(),
  phase: z.string().describe('a phase of the spine, or pending, parked, abandoned'),
  attempt: z.number().int(),
  waiting: z.string().describe('what it waits on: slot, turn, facts, lane, operator, nothing…'),
  enteredAt: z.number().int().describe('ms since the epoch when it entered its phase'),
  age: z.number().int().describe('ms in its phase, at the time of asking'),
  cost: Spend,
  reason: z.string().optional().describe('why it is parked or abandoned'),
  baseSha: z.string().optional(),
  attestedSha: z.string().optional(),
  landedSha: z.string().optional(),
  answer: z
    .object({ file: z.string(), word: z.string(), line: z.string(), writtenAt: z.number() })
    .optional()
    .describe('an operator answer waiting in .tron/inbox/'),
});

const State = z.object({
  run: z.string().nullable().describe('the latest run id; null before the first run'),
  seq: z.number().int().describe('the last event folded: GET /api/v1/events with Last-Event-ID = seq continues from here'),
  engine: z.enum(['running', 'finished', 'interrupted']).nullable(),
  now: z.number().int(),
  phases: z.array(z.string()).describe('the columns of a board, in order: pending, the spine, landed, parked, abandoned'),
  spend: Spend,
  budgets: z.object({ blockUsd: z.number().optional(), blockTokens: z.number().optional(), runUsd: z.number().optional() }),
  blocks: z.array(BlockRow),
});

const Event = z
  .looseObject({ v: z.number().int(), seq: z.number().int(), ts: z.number().int(), type: z.string() })
  .describe('one line of events.jsonl without its signature; docs/EVENTS.md lists the types and their fields');

const Turn = z.object({
  run: z
    .string()
    .describe(
      'the run the turn happened in: the latest, or — for a block carried over from an earlier run — the latest run in which it had turns',
    ),
  session: z.string(),
  turn: z.number().int(),
  role: z.string(),
  kind: z.string(),
  ts: z.number().int(),
  ended: z.boolean().describe('its reply (or failure) is in'),
});

const BlockDetail = z.object({
  run: z.string(),
  block: BlockRow,
  turns: z.array(Turn),
  timeline: z.array(Event).describe('the events about the block, oldest first (the latest 1,000)'),
});

const Events = z.object({ run: z.string(), events: z.array(Event), next: z.number().int().describe('after= for the next page') });

const Answer = z.object({ reply: z.string().describe('one operator line: >>RETRY {"guidance":"…"} or >>ABANDON {"reason":"…"}') });
const Accepted = z.object({
  block: z.string(),
  file: z.string().describe('the answer file in .tron/inbox/'),
  by: z.string(),
  engine: z
    .enum(['running', 'stopped'])
    .describe('running: the engine at work on the run reads the answer now; stopped: no engine runs, the next `tron start` reads it'),
});

const Problem = z.object({ error: z.object({ code: z.string(), path: z.string(), message: z.string() }) });

const Count = z.object({ blocks: z.array(z.string()), times: z.number().int() });
const Flows = z.object({
  run: z.string(),
  seq: z.number().int(),
  edges: z.record(z.string(), Count),
  nodes: z.record(z.string(), Count),
  ended: z.record(z.string(), z.string()),
});
const Workflow = z.object({
  xml: z.string().describe('the BPMN 2.0 diagram of the run’s spine'),
  details: z.record(z.string(), z.unknown()),
});

const RunRow = z.object({
  run: z.string().describe('the run id (run ids sort by start time)'),
  started: z.number().int().nullable().describe('ms since the epoch of its run.started'),
  finished: z
    .number()
    .int()
    .nullable()
    .describe('ms since the epoch of its run.finished; null: under way, or it stopped without one (killed)'),
  exit: z.number().int().nullable().describe('the exit status run.finished gave; null without one'),
  landed: z.number().int().describe('blocks this run landed (a block an earlier run landed is not counted again)'),
  parked: z.number().int().describe('blocks it left parked for the operator'),
  abandoned: z.number().int().describe('blocks it gave up'),
  blocked: z.number().int().describe('blocks waiting on a dependency that did not land'),
  unfinished: z.number().int().describe('blocks still under way, or not started, when it stopped'),
  blocks: z.number().int().describe('every block of its register'),
  usd: z.number().describe('USD its workers spent, where the cost is known'),
  spend: Spend,
  wall: z.number().int().describe('ms from its first event to its end (to its latest event, while it runs)'),
  events: z.number().int().describe('events in its log'),
  unreadable: z.string().optional().describe('why its log could not be read (the counts are then 0)'),
});

const Runs = z.object({
  runs: z.array(RunRow).describe('newest first'),
  next: z.string().nullable().describe('`before=` for the next page; null: no older run'),
});

const BlockRun = z.object({
  run: z.string(),
  phase: z.string().describe('the phase the block ended the run in (its phase now, in the run under way)'),
  attempts: z.number().int().describe('its attempt number at the end of the run (numbering goes on across runs)'),
  turns: z.number().int().describe('worker turns dispatched for it in the run'),
  usd: z.number(),
  spend: Spend,
  landedSha: z.string().optional().describe('the block’s own commit, when this run landed it'),
});

const History = z.object({
  block: z.string(),
  runs: z
    .array(BlockRun)
    .describe('newest first: the runs that did something with the block (one that only resumed it as it was is left out)'),
  next: z.string().nullable().describe('`before=` for the next page; null: no older run'),
});

const Bar = z.object({ key: z.string(), value: z.number() });
const CostBar = Bar.extend({
  value: z.number().describe('USD per landed block: the spend of the window over the blocks landed in it'),
  usd: z.number().describe('USD spent in the window, where the cost is known'),
  tokens: z.number().int().describe('tokens used in the window'),
});

const Charts = z.object({
  days: z.number().int(),
  from: z.string().describe('the first UTC day of the window, YYYY-MM-DD'),
  to: z.string().describe('the last UTC day of the window (today, on the server’s clock)'),
  runs: z.number().int().describe('runs read: every run on disk, since a lead time can start in any'),
  landedPerDay: z
    .array(z.object({ day: z.string(), landed: z.number().int() }))
    .describe('one entry per day of the window, oldest first, zeros included (block.landed by its UTC day)'),
  lead: z.object({
    blocks: z.number().int().describe('blocks landed in the window'),
    median: z.number().nullable().describe('ms from ready to landed; null: none landed'),
    p90: z.number().nullable().describe('ms, the 90th percentile (nearest rank)'),
    phases: z
      .array(Bar)
      .describe(
        'mean ms per landed block in each phase between ready and landed: pending (waiting for a slot), build, review, merge (merge wait), wrap, parked (waiting for the operator), and any phase of a custom spine',
      ),
  }),
  cost: z.object({
    landed: z.number().int(),
    usd: z.number(),
    tokens: z.number().int(),
    unpricedTokens: z.number().int().describe('tokens whose cost no worker reported and [prices] does not give'),
    byRole: z.array(CostBar),
    byModel: z.array(CostBar).describe('by the model usage.recorded (or worker.usage) names'),
  }),
  gate: z.object({
    blocks: z.number().int().describe('blocks whose first truth gate fell in the window'),
    firstTry: z.number().int().describe('of them, those whose first truth gate held'),
    rate: z.number().nullable().describe('firstTry / blocks; null without a gate'),
  }),
  failures: z.array(Bar).describe('failing facts of gate.failed, most frequent first (at most 10); off the truth gate as "purpose: fact"'),
  escalations: z.array(Bar).describe('escalation.raised by trouble, most frequent first (at most 10)'),
});

export interface RouteParam {
  name: string;
  in: 'path' | 'query' | 'header';
  description: string;
  type: 'string' | 'integer';
  required?: boolean;
}

export interface Route {
  method: 'GET' | 'POST';
  path: string;
  summary: string;
  description: string;
  params: RouteParam[];
  body?: z.ZodType;
  /** Status → [description, JSON schema (absent: not JSON)]; 401 is added to every route. */
  responses: Record<number, [string, z.ZodType?]>;
  /** What the response is, when not JSON. */
  produces?: 'text/event-stream' | 'text/plain';
  /** Whether it changes anything (every write is recorded with the token's name). */
  write: boolean;
}

/** Runs on a page of /api/v1/runs or a history, by default and at most. */
export const RUNS_PAGE = 50;
export const RUNS_MOST = 500;
/** Days the runs page's charts span, by default and at most. */
export const CHART_DAYS = 30;
export const CHART_DAYS_MOST = 366;

const blockParam: RouteParam = { name: 'id', in: 'path', type: 'string', required: true, description: 'the block id' };
const problem = (what: string): [string, z.ZodType] => [what, Problem];

export const ROUTES = {
  state: {
    method: 'GET',
    path: '/api/v1/state',
    summary: 'every block of the latest run',
    description:
      'The latest run folded as `tron status` folds it: each block with its phase, attempt, what it waits on, its age in the phase and its cost; the run’s spend and budgets.',
    params: [],
    responses: { 200: ['the state', State] },
    write: false,
  },
  block: {
    method: 'GET',
    path: '/api/v1/blocks/{id}',
    summary: 'one block: its row, turns and timeline',
    description:
      'The block’s status row, its worker turns (each one’s output at `/api/v1/blocks/{id}/logs`, with its `run`), and every event about it in the latest run. A block with no turn in the latest run — carried over from an earlier one, parked there — has the turns of the latest run in which it had any.',
    params: [blockParam],
    responses: { 200: ['the block', BlockDetail], 404: problem('no such block in the latest run (TRON_SERVE_BLOCK)') },
    write: false,
  },
  logs: {
    method: 'GET',
    path: '/api/v1/blocks/{id}/logs',
    summary: 'a turn’s output, live',
    description:
      'The output of one worker turn as the worker writes it (the turn log of `tron logs BLOCK`). With `follow=1` (the default) the response stays open and streams what is written until the turn ends. The turn is looked for in `run`; without it, in the latest run in which the block had a turn, as `tron logs BLOCK` does.',
    params: [
      blockParam,
      {
        name: 'run',
        in: 'query',
        type: 'string',
        description:
          'the run the turn happened in, as `turns[].run` of the block names it (default: the latest run in which the block had a turn)',
      },
      { name: 'session', in: 'query', type: 'string', description: 'the turn’s session (default: the latest turn’s)' },
      { name: 'turn', in: 'query', type: 'integer', description: 'the turn number in its session (default: the latest)' },
      { name: 'follow', in: 'query', type: 'integer', description: '1 (default): stream until the turn ends; 0: what is there now' },
    ],
    responses: { 200: ['the output, as text'], 404: problem('no such turn of the block, or no such run (TRON_RUN_NOT_FOUND)') },
    produces: 'text/plain',
    write: false,
  },
  runs: {
    method: 'GET',
    path: '/api/v1/runs',
    summary: 'every run of the repository, newest first',
    description:
      'The runs under .tron/runs/ (with `--database`, those the server has followed), newest first, a page at a time, each with its start, end, exit status, counts of blocks, spend and wall time — the figures of `tron report`. A run before the latest never changes: it is read once and kept. Pages are stable: a new run is always the newest, so `before=` the last page’s `next` goes on where it left off.',
    params: [
      { name: 'limit', in: 'query', type: 'integer', description: `at most this many runs (default ${RUNS_PAGE}, most ${RUNS_MOST})` },
      { name: 'before', in: 'query', type: 'string', description: 'only runs older than this run id: the `next` of the page before' },
    ],
    responses: { 200: ['a page of runs', Runs], 400: problem('a malformed limit or before (TRON_SERVE_QUERY)') },
    write: false,
  },
  history: {
    method: 'GET',
    path: '/api/v1/blocks/{id}/history',
    summary: 'one block across the runs',
    description:
      'The block in every run that did something with it, newest first: the phase it ended the run in, its attempts, turns and spend, and its landed sha in the run that landed it.',
    params: [
      blockParam,
      { name: 'limit', in: 'query', type: 'integer', description: `at most this many runs (default ${RUNS_PAGE}, most ${RUNS_MOST})` },
      { name: 'before', in: 'query', type: 'string', description: 'only runs older than this run id: the `next` of the page before' },
    ],
    responses: {
      200: ['the block’s runs', History],
      400: problem('a malformed limit or before (TRON_SERVE_QUERY)'),
      404: problem('no run on disk has the block (TRON_SERVE_BLOCK)'),
    },
    write: false,
  },
  charts: {
    method: 'GET',
    path: '/api/v1/charts',
    summary: 'the runs page’s charts',
    description:
      'What the runs page (`/runs`) draws, computed from every run on disk over the last `days` UTC days: landed blocks per day; lead time from ready (the later of the first register naming the block and its last dependency’s landing) to landed, median and p90, and the mean time in each phase; cost per landed block by role and by model; the first-try gate pass rate; the most frequent failing facts and escalations. Each run is read once and kept as a few figures (as for `/api/v1/runs`); asked again before any run moves, the same answer is given without folding anything.',
    params: [
      {
        name: 'days',
        in: 'query',
        type: 'integer',
        description: `the window in days, ending today (default ${CHART_DAYS}, most ${CHART_DAYS_MOST})`,
      },
    ],
    responses: { 200: ['the chart data', Charts], 400: problem('a malformed days (TRON_SERVE_QUERY)') },
    write: false,
  },
  metrics: {
    method: 'GET',
    path: '/metrics',
    summary: 'metrics in the Prometheus text format',
    description:
      'Counters and histograms of every run on disk (blocks landed, parked, abandoned; turns by role and outcome; gate failures by fact; escalations by trouble; spend; turn, lead and test durations) and gauges of the latest run, all named `tron_…` (docs/serve.md lists them). Behind the same bearer token as the API.',
    params: [],
    responses: { 200: ['the metrics, as text (version 0.0.4)'] },
    produces: 'text/plain',
    write: false,
  },
  runEvents: {
    method: 'GET',
    path: '/api/v1/runs/{run}/events',
    summary: 'a run’s events, a page at a time',
    description: 'The events of a run (any run under .tron/runs/) after a seq, in order.',
    params: [
      { name: 'run', in: 'path', type: 'string', required: true, description: 'the run id' },
      { name: 'after', in: 'query', type: 'integer', description: 'the last seq already seen (default 0)' },
      { name: 'limit', in: 'query', type: 'integer', description: 'at most this many (default and most: 1000)' },
    ],
    responses: { 200: ['the events', Events], 404: problem('no such run') },
    write: false,
  },
  events: {
    method: 'GET',
    path: '/api/v1/events',
    summary: 'the latest run’s events, live (Server-Sent Events)',
    description:
      'Every event of the latest run, each as one SSE message whose `id:` is its seq and whose data is the event; after `Last-Event-ID` (or `?after=`), else from the first; then live, as the engine appends them — no gap, no duplicate. A client that falls behind by more than the server keeps in memory gets `event: gap` (data `{from, to}`) and then the missed events, read from the log: it is told, and loses nothing. When a new run starts, `event: run` (data `{run}`) ends the stream: connect again without Last-Event-ID.',
    params: [
      { name: 'Last-Event-ID', in: 'header', type: 'integer', description: 'the last seq received' },
      { name: 'after', in: 'query', type: 'integer', description: 'the same, for clients that cannot set the header' },
    ],
    responses: { 200: ['the stream'] },
    produces: 'text/event-stream',
    write: false,
  },
  answer: {
    method: 'POST',
    path: '/api/v1/blocks/{id}/answer',
    summary: 'answer a parked block (as `tron answer`)',
    description:
      'Checks the answer as `tron answer` does (the block is parked; one legal operator line), signs it with the repository’s key and writes it to .tron/inbox/, where the running engine reads it at once, or the next `tron start` does (`engine` in the answer says which). The engine records `operator.answered` with `by: "serve:<token name>"`.',
    params: [blockParam],
    body: Answer,
    responses: {
      202: ['written to the inbox', Accepted],
      400: problem('not a legal operator answer, or not JSON'),
      404: problem('no such block'),
      409: problem('the block is not parked'),
    },
    write: true,
  },
  flows: {
    method: 'GET',
    path: '/api/v1/flows',
    summary: 'the latest run’s counts per flow of the diagram',
    description:
      'How many blocks of the latest run took each flow and reached each node of the workflow diagram (as `tron view` draws them).',
    params: [],
    responses: { 200: ['the counts', Flows] },
    write: false,
  },
  workflow: {
    method: 'GET',
    path: '/api/v1/workflow',
    summary: 'the workflow diagram',
    description: 'The BPMN diagram of the spine that drives the latest run, and the details of each of its elements.',
    params: [],
    responses: { 200: ['the diagram', Workflow] },
    write: false,
  },
  openapi: {
    method: 'GET',
    path: '/api/v1/openapi.json',
    summary: 'this description',
    description: 'The OpenAPI 3.1 description of the API, rendered from the route table (docs/openapi.json is the same file).',
    params: [],
    responses: { 200: ['the description'] },
    write: false,
  },
} as const satisfies Record<string, Route>;

export type RouteName = keyof typeof ROUTES;
