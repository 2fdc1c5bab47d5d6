/**
 * Linear as an intake source (`[intake] source = "linear"`): a team's open issues with
 * the label (and, with `state`, in that workflow state) are blocks; tron comments on them
 * as on a forge's issues and, when a block lands, moves its issue to the team's
 * "completed" workflow state (lowest position first: the team's Done). Linear lands no
 * code: that goes through the remote, or the forge, as configured.
 *
 * Through @linear/sdk's client, which carries the key, speaks Linear's GraphQL and turns
 * its answers into typed errors (a rate limit with its reset, a refused key); the
 * queries are tron's own, a few fields each, so that a poll is one request. The test
 * server (engine/testing/linear/) validates every one against Linear's schema.
 *
 * Linear's words as the tracker's: an issue's number within its team is its number (the
 * team is fixed, so ENG-12 is 12); its creator is its author; a state of type
 * "completed" or "canceled" is closed. The marker that makes a comment findable is
 * written as a last line of inline code, not an HTML comment: Linear keeps a comment as
 * rich text, and what it does with raw HTML is not something to build idempotence on.
 */
import { type Clock, systemClock } from '../os/clock.ts';
import { LinearClient, LinearError, LinearErrorType, RatelimitedLinearError } from '@linear/sdk';
import { createHash } from 'node:crypto';
import { type ForgeComment, ForgeError, type ForgeIssue, type IssueList, type IssueTracker } from './forge.ts';

export interface LinearOptions {
  /** The team's key ("ENG"). */
  team: string;
  /** Only issues in the workflow state of this name. */
  state?: string;
  apiKey: string;
  apiUrl: string;
  timeoutMs?: number;
  /** The clock a rate limit's reset time is measured against (an effect's, never the decision path's). */
  now?: () => number;
  /** Times a call's bound, `timeoutMs` (the system's by default). */
  clock?: Clock;
}

const ISSUE = 'id number title description url updatedAt state { type } creator { displayName } labels { nodes { name } }';
const PAGE = 'pageInfo { hasNextPage endCursor }';

/** Every query and mutation tron sends Linear (engine/testing/linear/schema.graphql is the part of the schema they use). */
export const LINEAR_QUERIES = {
  viewer: 'query TronViewer { viewer { id } }',
  team: `query TronTeam($key: String!) {
  teams(filter: { key: { eq: $key } }) { nodes { id key states { nodes { id name type position } } } }
}`,
  issues: `query TronIssues($filter: IssueFilter!, $after: String) {
  issues(filter: $filter, first: 50, after: $after) { nodes { ${ISSUE} } ${PAGE} }
}`,
  comments: `query TronComments($id: String!, $after: String) {
  issue(id: $id) { comments(first: 100, after: $after) { nodes { id body url user { id displayName } } ${PAGE} } }
}`,
  comment: `mutation TronComment($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id body url user { id displayName } } }
}`,
  done: `mutation TronDone($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success }
}`,
} as const;

interface RawIssue {
  id: string;
  number: number;
  title: string;
  description?: string | null;
  url: string;
  updatedAt: string;
  state: { type: string };
  creator?: { displayName: string } | null;
  labels: { nodes: { name: string }[] };
}
interface RawComment {
  id: string;
  body: string;
  url: string;
  user?: { id: string; displayName: string } | null;
}
interface Page<T> {
  nodes: T[];
  pageInfo: { hasNextPage: boolean; endCursor?: string | null };
}

/** How tron writes its marker in a Linear comment, and reads it back as the forge's form. */
const LINE_MARK = /`tron:([^`\s]+)`/;
const HTML_MARK = /<!-- tron:(\S+) -->/;

/** A Linear answer, or a failure of the call, as tron acts on it. */
export function classifyLinear(err: unknown, now: () => number = Date.now): ForgeError {
  if (!(err instanceof LinearError)) return new ForgeError('transient', `unreachable: ${err instanceof Error ? err.message : String(err)}`);
  const said = `${err.status ?? ''} ${err.message}`.trim();
  if (err instanceof RatelimitedLinearError) {
    const wait =
      err.retryAfter !== undefined
        ? err.retryAfter * 1000
        : err.requestsResetAt !== undefined
          ? Math.max(0, err.requestsResetAt - now())
          : 60_000;
    return new ForgeError('rate_limited', said, wait, err.status);
  }
  if (err.type === LinearErrorType.AuthenticationError || err.type === LinearErrorType.Forbidden)
    return new ForgeError('auth', said, undefined, err.status);
  const transient = [LinearErrorType.NetworkError, LinearErrorType.InternalError, LinearErrorType.LockTimeout] as string[];
  if ((err.type !== undefined && transient.includes(err.type)) || (err.status ?? 0) >= 500)
    return new ForgeError('transient', said, undefined, err.status);
  return new ForgeError('refused', said, undefined, err.status);
}

export class LinearTracker implements IssueTracker {
  readonly repo: string;
  readonly issuePrefix: string;
  private readonly client: LinearClient;
  private viewer: string | undefined;
  private teamInfo: { id: string; done: string } | undefined;
  /** Each issue number's uuid, as read: what Linear's mutations take. */
  private readonly ids = new Map<number, string>();

  constructor(private readonly o: LinearOptions) {
    this.repo = `Linear team ${o.team}`;
    this.issuePrefix = `lin-${o.team.toLowerCase()}`;
    this.client = new LinearClient({ apiKey: o.apiKey, apiUrl: o.apiUrl });
  }

  private async call<T>(query: string, variables: Record<string, unknown> = {}): Promise<T> {
    let cancel: (() => void) | undefined;
    const timeout = new Promise<never>((_ok, fail) => {
      cancel = (this.o.clock ?? systemClock).after(
        this.o.timeoutMs ?? 30_000,
        () => fail(new ForgeError('transient', `no answer from Linear in ${this.o.timeoutMs ?? 30_000} ms`)),
        { keepAlive: true },
      );
    });
    try {
      const got = await Promise.race([this.client.client.rawRequest<T, Record<string, unknown>>(query, variables), timeout]);
      return got.data as T;
    } catch (err) {
      if (err instanceof ForgeError) throw err;
      const e = classifyLinear(err, this.o.now);
      // The key is never in what Linear says back; scrubbed all the same, as every forge's words are.
      throw new ForgeError(e.kind, e.message.split(this.o.apiKey).join('***'), e.retryAfterMs, e.status);
    } finally {
      cancel?.();
    }
  }

  private async all<T>(read: (after: string | undefined) => Promise<Page<T>>): Promise<T[]> {
    const out: T[] = [];
    for (let after: string | undefined; ; ) {
      const page = await read(after);
      out.push(...page.nodes);
      if (!page.pageInfo.hasNextPage || !page.pageInfo.endCursor) return out;
      after = page.pageInfo.endCursor;
    }
  }

  /** The team, and the workflow state a landed issue moves to; a team Linear does not show this key is TRON_LINEAR_TEAM. */
  async team(): Promise<{ id: string; done: string }> {
    if (this.teamInfo) return this.teamInfo;
    type States = { id: string; name: string; type: string; position: number }[];
    const got = await this.call<{ teams: { nodes: { id: string; key: string; states: { nodes: States } }[] } }>(LINEAR_QUERIES.team, {
      key: this.o.team,
    });
    const team = got.teams.nodes.find((t) => t.key.toUpperCase() === this.o.team);
    if (!team) throw new LinearTeamError(`Linear shows this API key no team with the key ${this.o.team}`);
    const done = team.states.nodes.filter((s) => s.type === 'completed').sort((a, b) => a.position - b.position)[0];
    if (!done) throw new LinearTeamError(`Linear team ${this.o.team} has no workflow state of type "completed" to move a landed issue to`);
    this.teamInfo = { id: team.id, done: done.id };
    return this.teamInfo;
  }

  private asIssue(raw: RawIssue): ForgeIssue {
    this.ids.set(raw.number, raw.id);
    return {
      number: raw.number,
      title: raw.title,
      body: raw.description ?? '',
      labels: raw.labels.nodes.map((l) => l.name),
      state: raw.state.type === 'completed' || raw.state.type === 'canceled' ? 'closed' : 'open',
      url: raw.url,
      author: raw.creator?.displayName ?? '',
      updatedAt: raw.updatedAt,
    };
  }

  private async issues(filter: Record<string, unknown>): Promise<ForgeIssue[]> {
    const raw = await this.all((after) =>
      this.call<{ issues: Page<RawIssue> }>(LINEAR_QUERIES.issues, { filter, ...(after && { after }) }).then((d) => d.issues),
    );
    return raw.map((r) => this.asIssue(r)).sort((a, b) => a.number - b.number);
  }

  /**
   * GraphQL has no conditional request: the list's own digest (each issue's number and
   * last change) stands in for an ETag, so an unchanged list is `unchanged` as on a forge.
   */
  async listIssues(label: string, etag?: string): Promise<IssueList> {
    const issues = await this.issues({
      team: { key: { eq: this.o.team } },
      labels: { some: { name: { eq: label } } },
      state: { type: { nin: ['completed', 'canceled'] }, ...(this.o.state && { name: { eq: this.o.state } }) },
    });
    const digest = createHash('sha256')
      .update(JSON.stringify(issues.map((i) => [i.number, i.updatedAt])))
      .digest('hex')
      .slice(0, 16);
    if (etag === digest) return 'unchanged';
    return { issues, etag: digest };
  }

  async issue(number: number): Promise<ForgeIssue | undefined> {
    return (await this.issues({ team: { key: { eq: this.o.team } }, number: { eq: number } }))[0];
  }

  private async idOf(number: number): Promise<string> {
    const known = this.ids.get(number);
    if (known) return known;
    if (!(await this.issue(number)))
      throw new ForgeError('refused', `${this.o.team}-${number} is not an issue of Linear team ${this.o.team}`);
    return this.ids.get(number)!;
  }

  async comments(number: number): Promise<ForgeComment[]> {
    const id = await this.idOf(number);
    const raw = await this.all((after) =>
      this.call<{ issue: { comments: Page<RawComment> } }>(LINEAR_QUERIES.comments, { id, ...(after && { after }) }).then(
        (d) => d.issue.comments,
      ),
    );
    return raw.map(asComment);
  }

  async comment(number: number, body: string): Promise<ForgeComment> {
    const issueId = await this.idOf(number);
    const text = body.replace(HTML_MARK, (_m, mark: string) => `\`tron:${mark}\``);
    const got = await this.call<{ commentCreate: { success: boolean; comment: RawComment } }>(LINEAR_QUERIES.comment, {
      input: { issueId, body: text },
    });
    return asComment(got.commentCreate.comment);
  }

  async closeIssue(number: number): Promise<void> {
    const id = await this.idOf(number);
    const { done } = await this.team();
    await this.call(LINEAR_QUERIES.done, { id, input: { stateId: done } });
  }

  async self(): Promise<string> {
    this.viewer ??= (await this.call<{ viewer: { id: string } }>(LINEAR_QUERIES.viewer)).viewer.id;
    return this.viewer;
  }
}

/** The team is not there to take issues from (or to move them to done in): a problem with `[intake] team`. */
export class LinearTeamError extends Error {}

function asComment(c: RawComment): ForgeComment {
  const mark = LINE_MARK.exec(c.body)?.[1];
  // Read back in the forge's form, so that finding tron's comments (forge.ts) is one rule for every tracker.
  const body = mark ? `${c.body}\n\n<!-- tron:${mark} -->` : c.body;
  // The author is the user's id, which no one can take; their display name is only for what people read.
  return { id: c.id, body, author: c.user?.id ?? '', ...(c.user && { authorName: c.user.displayName }), url: c.url };
}
