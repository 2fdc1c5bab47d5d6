/**
 * A Linear GraphQL server for tests, on 127.0.0.1: one endpoint (`POST /graphql`) that
 * validates every query against Linear's schema (schema.ts: read from the SDK the client
 * is) and answers from an in-memory workspace — one team, its workflow states, issues,
 * labels and comments — so the real client (@linear/sdk) can be pointed at it with
 * `[intake] api_url`.
 *
 * What the real API does that a fake usually skips is here on purpose: a query that does
 * not validate is answered with GraphQL's errors and no data (and counted in `invalid`);
 * the key goes raw in `Authorization` and a wrong one is an authentication error; lists
 * are connections, paginated by `first`/`after` with `pageInfo`; a rate limit can be
 * queued, answered as Linear does (HTTP 400, `RATELIMITED`, `X-RateLimit-Requests-Reset`).
 * An issue filter the workspace cannot evaluate is an error, never silently "all issues".
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execute, GraphQLError, parse, validate } from 'graphql';
import { linearSchema } from './schema.ts';

export interface LinearState {
  id: string;
  name: string;
  type: 'triage' | 'backlog' | 'unstarted' | 'started' | 'completed' | 'canceled';
  position: number;
}
export interface LinearComment {
  id: string;
  body: string;
  /** The user's id. */
  user: string;
  /** Their display name. */
  name: string;
}
export interface LinearIssue {
  id: string;
  number: number;
  identifier: string;
  title: string;
  description: string;
  labels: string[];
  state: LinearState;
  creator: string;
  updatedAt: string;
  comments: LinearComment[];
}

/** One request as the server saw it: its operation and kind, and whether it validated. */
export interface Seen {
  operation: string;
  /** A query reads, a mutation writes (unknown: it did not parse). */
  kind?: 'query' | 'mutation' | 'subscription';
  valid: boolean;
  status: number;
}

export interface LinearServer {
  /** The endpoint (`[intake] api_url`). */
  url: string;
  key: string;
  team: string;
  /** The id of the user the key speaks as. */
  viewer: string;
  seen: Seen[];
  /** Queries that did not validate against the schema, with GraphQL's words. */
  invalid: { query: string; errors: string[] }[];
  openIssue(i: { title: string; description?: string; labels?: string[]; state?: string; creator?: string }): number;
  issue(number: number): LinearIssue | undefined;
  /** A person (by their id, and their display name: default the id) comments on an issue. */
  comment(number: number, body: string, user: string, name?: string): void;
  /** A person moves an issue to another workflow state (by name), or sets its labels. */
  editIssue(number: number, patch: { state?: string; labels?: string[] }): void;
  /** The next `n` requests are rate limited, the limit resetting `resetMs` later. */
  rateLimit(n: number, resetMs?: number): void;
  close(): Promise<void>;
}

const STATES: Omit<LinearState, 'id'>[] = [
  { name: 'Backlog', type: 'backlog', position: 0 },
  { name: 'Todo', type: 'unstarted', position: 1 },
  { name: 'In Progress', type: 'started', position: 2 },
  { name: 'Done', type: 'completed', position: 3 },
  { name: 'Canceled', type: 'canceled', position: 4 },
];

/** A connection of `items`, paginated as Linear's are: `first` (default 50), `after` an opaque cursor. */
function connection<T>(items: readonly T[], args: { first?: number | null; after?: string | null }) {
  const start = args.after ? Number(Buffer.from(args.after, 'base64url').toString()) : 0;
  const end = start + (args.first ?? 50);
  const cursor = (n: number) => Buffer.from(String(n)).toString('base64url');
  return {
    nodes: items.slice(start, end),
    pageInfo: {
      hasNextPage: end < items.length,
      hasPreviousPage: start > 0,
      startCursor: cursor(start),
      endCursor: end < items.length ? cursor(end) : null,
    },
  };
}

type Filter = Record<string, unknown>;

/** A comparator (`{ eq }`, `{ nin }`, `{ eqIgnoreCase }`) on one value. */
function compare(value: string | number, c: Filter): boolean {
  return Object.entries(c).every(([op, want]) => {
    if (op === 'eq') return value === want;
    if (op === 'eqIgnoreCase') return String(value).toLowerCase() === String(want).toLowerCase();
    if (op === 'in') return (want as unknown[]).includes(value);
    if (op === 'nin') return !(want as unknown[]).includes(value);
    throw new GraphQLError(`the test server cannot compare with ${op}`);
  });
}

/** Whether `issue` passes the IssueFilter subset tron sends; anything else is an error. */
function passes(issue: LinearIssue, team: string, f: Filter): boolean {
  return Object.entries(f).every(([key, sub]) => {
    const s = sub as Filter;
    if (key === 'team') return compare(team, s.key as Filter);
    if (key === 'number') return compare(issue.number, s);
    if (key === 'labels') return issue.labels.some((name) => compare(name, (s.some as Filter).name as Filter));
    if (key === 'state')
      return Object.entries(s).every(([k, c]) => compare(k === 'type' ? issue.state.type : issue.state.name, c as Filter));
    throw new GraphQLError(`the test server cannot filter issues by ${key}`);
  });
}

export async function startLinearServer(opts: { team?: string; onServed?: (seen: Seen) => void } = {}): Promise<LinearServer> {
  const schema = linearSchema();
  const key = `lin_api_${randomUUID().replace(/-/g, '')}`;
  const team = { id: randomUUID(), key: opts.team ?? 'ENG', name: 'Engineering' };
  const viewer = { id: randomUUID(), name: 'tron bot', displayName: 'tron' };
  const states: LinearState[] = STATES.map((s) => ({ ...s, id: randomUUID() }));
  const issues: LinearIssue[] = [];
  const seen: Seen[] = [];
  const invalid: LinearServer['invalid'] = [];
  const record = (one: Seen) => {
    seen.push(one);
    opts.onServed?.(one);
  };
  let limited = { n: 0, resetMs: 0 };
  let port = 0;
  const urlOf = (i: LinearIssue) => `http://127.0.0.1:${port}/acme/issue/${i.identifier}`;
  const touch = (i: LinearIssue) => {
    i.updatedAt = new Date(Math.max(Date.now(), Date.parse(i.updatedAt) + 1)).toISOString();
  };
  const find = (id: string) => issues.find((i) => i.id === id || i.identifier === id);

  const commentOf = (c: LinearComment, i: LinearIssue) => ({
    id: c.id,
    body: c.body,
    url: `${urlOf(i)}#comment-${c.id}`,
    user: { id: c.user, displayName: c.name },
  });
  const issueOf = (i: LinearIssue) => ({
    id: i.id,
    number: i.number,
    identifier: i.identifier,
    title: i.title,
    description: i.description,
    url: urlOf(i),
    updatedAt: i.updatedAt,
    state: i.state,
    creator: { displayName: i.creator },
    labels: () =>
      connection(
        i.labels.map((name) => ({ name })),
        {},
      ),
    comments: (args: { first?: number; after?: string }) =>
      connection(
        i.comments.map((c) => commentOf(c, i)),
        args,
      ),
  });
  const root = {
    viewer: () => viewer,
    teams: (args: { filter?: Filter }) =>
      connection(
        [team]
          .filter((t) => {
            const unknown = Object.keys(args.filter ?? {}).filter((k) => k !== 'key');
            if (unknown.length > 0) throw new GraphQLError(`the test server cannot filter teams by ${unknown.join(', ')}`);
            return !args.filter?.key || compare(t.key, args.filter.key as Filter);
          })
          .map((t) => ({ ...t, states: (a: { first?: number }) => connection(states, a) })),
        {},
      ),
    issues: (args: { filter?: Filter; first?: number; after?: string }) =>
      connection(issues.filter((i) => passes(i, team.key, args.filter ?? {})).map(issueOf), args),
    issue: (args: { id: string }) => {
      const i = find(args.id);
      if (!i) throw new GraphQLError('Entity not found: Issue', { extensions: { type: 'invalid input', code: 'INPUT_ERROR' } });
      return issueOf(i);
    },
    commentCreate: (args: { input: { issueId: string; body: string } }) => {
      // Linear's comment input takes the issue's uuid.
      const i = issues.find((x) => x.id === args.input.issueId);
      if (!i) throw new GraphQLError('Entity not found: Issue', { extensions: { type: 'invalid input', code: 'INPUT_ERROR' } });
      const c = { id: randomUUID(), body: args.input.body, user: viewer.id, name: viewer.displayName };
      i.comments.push(c);
      return { success: true, lastSyncId: 1, comment: commentOf(c, i) };
    },
    issueUpdate: (args: { id: string; input: { stateId?: string } }) => {
      const i = find(args.id);
      const state = states.find((s) => s.id === args.input.stateId);
      if (!i || !state) throw new GraphQLError('Entity not found', { extensions: { type: 'invalid input', code: 'INPUT_ERROR' } });
      i.state = state;
      touch(i);
      return { success: true, lastSyncId: 1, issue: issueOf(i) };
    },
  };

  const answer = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const {
      query = '',
      variables,
      operationName,
    } = JSON.parse(Buffer.concat(chunks).toString() || '{}') as {
      query?: string;
      variables?: Record<string, unknown>;
      operationName?: string;
    };
    let document: ReturnType<typeof parse>;
    try {
      document = parse(query);
    } catch (err) {
      invalid.push({ query, errors: [(err as Error).message] });
      record({ operation: operationName ?? '?', valid: false, status: 400 });
      return answer(res, 400, {
        errors: [{ message: (err as Error).message, extensions: { type: 'graphql error', code: 'GRAPHQL_PARSE_FAILED' } }],
      });
    }
    const op = document.definitions.find((d) => d.kind === 'OperationDefinition');
    const operation = operationName ?? op?.name?.value ?? '?';
    const kind = op?.operation;
    const errors = validate(schema, document);
    if (errors.length > 0) {
      invalid.push({ query, errors: errors.map((e) => e.message) });
      record({ operation, ...(kind && { kind }), valid: false, status: 400 });
      return answer(res, 400, {
        errors: errors.map((e) => ({ message: e.message, extensions: { type: 'graphql error', code: 'GRAPHQL_VALIDATION_FAILED' } })),
      });
    }
    if (req.headers.authorization !== key) {
      record({ operation, ...(kind && { kind }), valid: true, status: 400 });
      return answer(res, 400, {
        errors: [
          {
            message: 'Authentication required, not authenticated',
            extensions: { type: 'authentication error', code: 'AUTHENTICATION_ERROR' },
          },
        ],
      });
    }
    if (limited.n > 0) {
      limited.n--;
      record({ operation, ...(kind && { kind }), valid: true, status: 400 });
      return answer(
        res,
        400,
        { errors: [{ message: 'Rate limit exceeded', extensions: { type: 'ratelimited', code: 'RATELIMITED' } }] },
        { 'x-ratelimit-requests-reset': String(Date.now() + limited.resetMs) },
      );
    }
    const result = await execute({ schema, document, rootValue: root, variableValues: variables ?? {} });
    const status = result.errors ? 400 : 200;
    record({ operation, ...(kind && { kind }), valid: true, status });
    answer(res, status, {
      ...(result.data && { data: result.data }),
      ...(result.errors && {
        errors: result.errors.map((e) => ({ message: e.message, path: e.path, extensions: { type: 'invalid input', ...e.extensions } })),
      }),
    });
  };
  const server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/graphql') return answer(res, 404, { errors: [{ message: 'Not found' }] });
    handle(req, res).catch((err: unknown) => answer(res, 500, { errors: [{ message: String(err) }] }));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/graphql`,
    key,
    team: team.key,
    viewer: viewer.id,
    seen,
    invalid,
    openIssue: (i) => {
      const number = issues.length + 1;
      issues.push({
        id: randomUUID(),
        number,
        identifier: `${team.key}-${number}`,
        title: i.title,
        description: i.description ?? '',
        labels: i.labels ?? [],
        state: states.find((s) => s.name === (i.state ?? 'Todo'))!,
        creator: i.creator ?? 'Ada',
        updatedAt: new Date().toISOString(),
        comments: [],
      });
      return number;
    },
    issue: (n) => issues.find((i) => i.number === n),
    comment: (n, body, user, name = user) => {
      const i = issues.find((x) => x.number === n)!;
      i.comments.push({ id: randomUUID(), body, user, name });
      touch(i);
    },
    editIssue: (n, patch) => {
      const i = issues.find((x) => x.number === n)!;
      if (patch.state) i.state = states.find((s) => s.name === patch.state)!;
      if (patch.labels) i.labels = patch.labels;
      touch(i);
    },
    rateLimit: (n, resetMs = 50) => {
      limited = { n, resetMs };
    },
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}
