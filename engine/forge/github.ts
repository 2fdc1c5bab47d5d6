/**
 * The GitHub forge, on the official client (Octokit): github.com, or GitHub Enterprise by
 * `[forge] api_url`. Octokit's own retries are off: a rate limit or a 5xx comes back as a
 * `ForgeError` with the wait GitHub asked for, and the caller decides when to call again
 * (in the engine: a timer event, so replay holds).
 *
 * Rate limits, as GitHub documents them: a primary limit is a 403 or 429 with
 * `x-ratelimit-remaining: 0` — wait until `x-ratelimit-reset` (epoch seconds); a secondary
 * limit is a 403 or 429 with `retry-after` (seconds), or without it, at least a minute.
 * Lists are read with `If-None-Match`: an unchanged list is a 304, which costs no rate limit.
 */
import { Octokit } from '@octokit/rest';
import {
  type Forge,
  ForgeError,
  type ForgeCheck,
  type ForgeIssue,
  type ForgePull,
  type ForgeQueue,
  type ForgeRole,
  type IssueList,
  type LabelChange,
  type RequiredCheck,
  ROLES,
} from './forge.ts';

/**
 * The merge queue is GraphQL only on GitHub (no REST endpoint enqueues). The mutation
 * names the head it enqueues (`expectedHeadOid`): a head that moved is refused, never
 * queued in its place.
 */
const ENQUEUE = `mutation TronEnqueue($id: ID!, $sha: GitObjectID) {
  enqueuePullRequest(input: { pullRequestId: $id, expectedHeadOid: $sha }) {
    mergeQueueEntry { state position }
  }
}`;

const QUEUE_ENTRY = `query TronQueueEntry($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      merged
      mergeCommit { oid }
      mergeQueueEntry { state position }
      timelineItems(last: 1, itemTypes: [REMOVED_FROM_MERGE_QUEUE_EVENT]) {
        nodes { ... on RemovedFromMergeQueueEvent { reason } }
      }
    }
  }
}`;

interface QueueEntryAnswer {
  repository: {
    pullRequest: {
      merged: boolean;
      mergeCommit: { oid: string } | null;
      mergeQueueEntry: { state: string; position: number } | null;
      timelineItems: { nodes: ({ reason?: string | null } | null)[] };
    } | null;
  } | null;
}

export interface GitHubOptions {
  /** "owner/name". */
  repo: string;
  token: string;
  apiUrl: string;
  timeoutMs?: number;
  /** The clock rate-limit resets are measured against (an effect's, never the decision path's). */
  now?: () => number;
}

interface Failure {
  status?: number;
  message?: string;
  code?: string;
  response?: { headers?: Record<string, string | number | undefined>; data?: { message?: string } };
}

/** A failed call as tron acts on it. */
export function classify(err: unknown, now: () => number = Date.now): ForgeError {
  if (err instanceof ForgeError) return err;
  const e = err as Failure;
  const status = e.status;
  const headers = e.response?.headers ?? {};
  const said = e.response?.data?.message ?? e.message ?? String(err);
  if (
    status === undefined ||
    status === 500 ||
    status === 502 ||
    status === 503 ||
    status === 504 ||
    (status !== undefined && status >= 500)
  ) {
    return new ForgeError('transient', `${status ?? e.code ?? 'unreachable'}: ${said}`, undefined, status);
  }
  if (status === 403 || status === 429) {
    const retryAfter = Number(headers['retry-after']);
    if (Number.isFinite(retryAfter) && retryAfter >= 0)
      return new ForgeError('rate_limited', `${status}: ${said}`, retryAfter * 1000, status);
    if (String(headers['x-ratelimit-remaining']) === '0') {
      const reset = Number(headers['x-ratelimit-reset']) * 1000;
      return new ForgeError('rate_limited', `${status}: ${said}`, Math.max(1000, Number.isFinite(reset) ? reset - now() : 60_000), status);
    }
    if (status === 429 || /secondary rate limit|abuse/i.test(said))
      return new ForgeError('rate_limited', `${status}: ${said}`, 60_000, status);
    return new ForgeError('auth', `${status}: ${said}`, undefined, status);
  }
  if (status === 401) return new ForgeError('auth', `401: ${said}`, undefined, status);
  return new ForgeError('refused', `${status}: ${said}`, undefined, status);
}

export class GitHubForge implements Forge {
  readonly repo: string;
  private readonly api: Octokit;
  private readonly owner: string;
  private readonly name: string;
  private readonly now: () => number;

  constructor(o: GitHubOptions) {
    this.repo = o.repo;
    [this.owner, this.name] = o.repo.split('/') as [string, string];
    this.now = o.now ?? Date.now;
    this.api = new Octokit({
      auth: o.token,
      baseUrl: o.apiUrl,
      userAgent: 'tron-forge',
      request: { retries: 0 },
      log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
    });
    this.timeoutMs = o.timeoutMs;
  }
  /** Each call's budget: past it the call is aborted, a transient failure. */
  private readonly timeoutMs: number | undefined;

  private async call<T>(f: (r: { owner: string; repo: string }, request: { signal?: AbortSignal }) => Promise<T>): Promise<T> {
    try {
      return await f({ owner: this.owner, repo: this.name }, this.timeoutMs ? { signal: AbortSignal.timeout(this.timeoutMs) } : {});
    } catch (err) {
      throw classify(err, this.now);
    }
  }

  async listIssues(label: string, etag?: string): Promise<IssueList> {
    try {
      const r = { owner: this.owner, repo: this.name };
      // The first page carries the ETag: unchanged there, unchanged everywhere (GitHub sorts by creation).
      const first = await this.api.rest.issues.listForRepo({
        ...r,
        labels: label,
        state: 'open',
        per_page: 100,
        ...(etag && { headers: { 'if-none-match': etag } }),
      });
      const rest = first.headers.link?.includes('rel="next"')
        ? (await this.api.paginate(this.api.rest.issues.listForRepo, { ...r, labels: label, state: 'open', per_page: 100 })).slice(
            first.data.length,
          )
        : [];
      const issues = [...first.data, ...rest]
        .filter((i) => !i.pull_request)
        .map((i) => issueOf(i))
        .sort((a, b) => a.number - b.number);
      return { issues, ...(first.headers.etag && { etag: first.headers.etag }) };
    } catch (err) {
      if ((err as Failure).status === 304) return 'unchanged';
      throw classify(err, this.now);
    }
  }

  async issue(number: number): Promise<ForgeIssue | undefined> {
    try {
      return issueOf((await this.api.rest.issues.get({ owner: this.owner, repo: this.name, issue_number: number })).data);
    } catch (err) {
      if ((err as Failure).status === 404 || (err as Failure).status === 410) return undefined;
      throw classify(err, this.now);
    }
  }

  async comments(issue: number) {
    const all = await this.call((r, request) =>
      this.api.paginate(this.api.rest.issues.listComments, { ...r, issue_number: issue, per_page: 100, request }),
    );
    return all.map((c) => ({
      id: c.id,
      body: c.body ?? '',
      author: c.user?.login ?? '',
      url: c.html_url,
      association: c.author_association,
    }));
  }

  async comment(issue: number, body: string) {
    const c = (await this.call((r, request) => this.api.rest.issues.createComment({ ...r, issue_number: issue, body, request }))).data;
    return { id: c.id, body: c.body ?? '', author: c.user?.login ?? '', url: c.html_url, association: c.author_association };
  }

  private me: Promise<string> | undefined;

  /** `GET /user`, once: the login the token speaks as. */
  async self(): Promise<string> {
    this.me ??= this.call((_r, request) => this.api.rest.users.getAuthenticated({ request })).then(
      (r) => r.data.login,
      (err: unknown) => {
        this.me = undefined;
        throw err;
      },
    );
    return this.me;
  }

  async role(login: string): Promise<ForgeRole> {
    try {
      const d = (
        await this.api.rest.repos.getCollaboratorPermissionLevel({
          owner: this.owner,
          repo: this.name,
          username: login,
          ...(this.timeoutMs && { request: { signal: AbortSignal.timeout(this.timeoutMs) } }),
        })
      ).data;
      // role_name names custom and fine-grained roles' base too; permission is the older, coarser word.
      const named = (ROLES as readonly string[]).includes(d.role_name) ? (d.role_name as ForgeRole) : undefined;
      return named ?? ((ROLES as readonly string[]).includes(d.permission) ? (d.permission as ForgeRole) : 'none');
    } catch (err) {
      // Not a collaborator, or no such user: no role.
      if ((err as Failure).status === 404) return 'none';
      throw classify(err, this.now);
    }
  }

  async labelChange(issue: number, label: string): Promise<LabelChange | undefined> {
    const events = await this.call((r, request) =>
      this.api.paginate(this.api.rest.issues.listEvents, { ...r, issue_number: issue, per_page: 100, request }),
    );
    const last = events.filter((e) => (e.event === 'labeled' || e.event === 'unlabeled') && 'label' in e && e.label?.name === label).at(-1);
    return last ? { action: last.event as LabelChange['action'], actor: last.actor?.login ?? '' } : undefined;
  }

  async closeIssue(issue: number): Promise<void> {
    await this.call((r, request) =>
      this.api.rest.issues.update({ ...r, issue_number: issue, state: 'closed', state_reason: 'completed', request }),
    );
  }

  async findPull(branch: string): Promise<ForgePull | undefined> {
    const all = await this.call((r, request) =>
      this.api.rest.pulls.list({ ...r, head: `${this.owner}:${branch}`, state: 'all', per_page: 100, request }),
    );
    const pulls = all.data.map(pullOf);
    return pulls.find((p) => p.state === 'open') ?? pulls.sort((a, b) => b.number - a.number)[0];
  }

  async openPull(p: { head: string; base: string; title: string; body: string }): Promise<ForgePull> {
    return pullOf((await this.call((r, request) => this.api.rest.pulls.create({ ...r, ...p, request }))).data);
  }

  async updatePull(number: number, p: { title: string; body: string }): Promise<void> {
    await this.call((r, request) => this.api.rest.pulls.update({ ...r, pull_number: number, ...p, request }));
  }

  async pull(number: number): Promise<ForgePull> {
    return pullOf((await this.call((r, request) => this.api.rest.pulls.get({ ...r, pull_number: number, request }))).data);
  }

  async reviews(pull: number) {
    const all = await this.call((r, request) =>
      this.api.paginate(this.api.rest.pulls.listReviews, { ...r, pull_number: pull, per_page: 100, request }),
    );
    return all.map((x) => ({
      state: x.state as 'APPROVED',
      body: x.body ?? '',
      author: x.user?.login ?? '',
      sha: x.commit_id ?? '',
      association: x.author_association,
    }));
  }

  async requiredChecks(branch: string): Promise<RequiredCheck[]> {
    try {
      const d = (await this.api.rest.repos.getStatusChecksProtection({ owner: this.owner, repo: this.name, branch })).data;
      // `checks` names the app each check must come from (app_id; null or -1: any app); `contexts` is the older list of names.
      const pinned = (d.checks ?? []).map(
        (c): RequiredCheck => ({ name: c.context, ...(c.app_id != null && c.app_id > 0 && { app: c.app_id }) }),
      );
      const named = new Set(pinned.map((c) => c.name));
      return [...pinned, ...[...new Set(d.contexts ?? [])].filter((n) => !named.has(n)).map((name) => ({ name }))];
    } catch (err) {
      if ((err as Failure).status === 404) return [];
      throw classify(err, this.now);
    }
  }

  async checks(sha: string, required: readonly RequiredCheck[]): Promise<ForgeCheck[]> {
    const runs = await this.call((r, request) =>
      this.api.paginate(this.api.rest.checks.listForRef, { ...r, ref: sha, per_page: 100, request }),
    );
    const status = (await this.call((r, request) => this.api.rest.repos.getCombinedStatusForRef({ ...r, ref: sha, request }))).data;
    return required.map(({ name, app }): ForgeCheck => {
      const ofName = runs.filter((c) => c.name === name && (app === undefined || c.app?.id === app || c.app?.slug === app));
      // Each app's latest run of that name, as on GitHub's checks tab; without a named app, any app's red or pending wins.
      const latest = new Map<number, (typeof runs)[number]>();
      for (const c of ofName.sort((a, b) => a.id - b.id)) latest.set(c.app?.id ?? 0, c);
      const verdicts = [...latest.values()].map((run): ForgeCheck => {
        if (run.status !== 'completed') return { name, state: 'pending', ...(run.html_url && { url: run.html_url }) };
        const green = run.conclusion === 'success' || run.conclusion === 'neutral' || run.conclusion === 'skipped';
        const text = [run.output?.summary, run.output?.text].filter(Boolean).join('\n');
        return {
          name,
          state: green ? 'success' : 'failure',
          ...(!green && { text: text || `${name}: ${run.conclusion}` }),
          ...(run.html_url && { url: run.html_url }),
        };
      });
      const others = [
        ...new Set(runs.filter((c) => c.name === name && !ofName.includes(c)).map((c) => c.app?.slug ?? String(c.app?.id ?? '?'))),
      ];
      const ignored = others.length > 0 ? { ignored: others } : {};
      const worst = verdicts.find((v) => v.state === 'failure') ?? verdicts.find((v) => v.state === 'pending') ?? verdicts[0];
      if (worst) return { ...worst, ...ignored };
      // A check pinned to an app counts only from that app's check runs: a commit status names no app.
      if (app !== undefined) return { name, state: 'missing', ...ignored };
      const s = status.statuses.find((x) => x.context === name);
      if (!s) return { name, state: 'missing' };
      if (s.state === 'success') return { name, state: 'success' };
      if (s.state === 'pending') return { name, state: 'pending' };
      return { name, state: 'failure', text: s.description ?? `${name}: ${s.state}`, ...(s.target_url && { url: s.target_url }) };
    });
  }

  async enqueue(pull: ForgePull, headSha: string): Promise<void> {
    const id = pull.nodeId ?? (await this.pull(pull.number)).nodeId;
    await this.graphql(ENQUEUE, { id, sha: headSha });
  }

  async queueState(number: number): Promise<ForgeQueue> {
    const d = await this.graphql<QueueEntryAnswer>(QUEUE_ENTRY, { owner: this.owner, name: this.name, number });
    const pr = d.repository?.pullRequest;
    if (!pr) throw new ForgeError('refused', `no pull request #${number} in ${this.repo}`);
    if (pr.merged && pr.mergeCommit) return { state: 'merged', commit: pr.mergeCommit.oid };
    if (pr.mergeQueueEntry) return { state: 'queued', position: pr.mergeQueueEntry.position };
    const removed = pr.timelineItems.nodes.at(-1);
    if (removed) return { state: 'removed', reason: removed.reason || 'removed from the merge queue' };
    return { state: 'none' };
  }

  /** A GraphQL call: an answer with `errors` is the forge refusing it (a 4xx or 5xx is classified as any call's). */
  private async graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
    try {
      return await this.api.graphql<T>(query, {
        ...variables,
        ...(this.timeoutMs && { request: { signal: AbortSignal.timeout(this.timeoutMs) } }),
      });
    } catch (err) {
      if ((err as Error).name === 'GraphqlResponseError')
        throw new ForgeError(
          'refused',
          `GraphQL: ${(err as { errors?: { message: string }[] }).errors?.map((e) => e.message).join('; ') ?? (err as Error).message}`,
        );
      throw classify(err, this.now);
    }
  }
}

interface RawIssue {
  number: number;
  title: string;
  body?: string | null;
  state: string;
  html_url: string;
  user: { login: string } | null;
  closed_by?: { login: string } | null;
  labels: (string | { name?: string })[];
  author_association?: string;
  updated_at?: string;
}

function issueOf(i: RawIssue): ForgeIssue {
  return {
    number: i.number,
    title: i.title,
    body: i.body ?? '',
    labels: i.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? ''))).filter(Boolean),
    state: i.state === 'closed' ? 'closed' : 'open',
    url: i.html_url,
    author: i.user?.login ?? '',
    ...(i.state === 'closed' && i.closed_by?.login && { closedBy: i.closed_by.login }),
    ...(i.author_association && { association: i.author_association }),
    ...(i.updated_at && { updatedAt: i.updated_at }),
  };
}

function pullOf(p: {
  number: number;
  node_id?: string;
  html_url: string;
  state: string;
  merged_at: string | null;
  merged?: boolean;
  head: { ref: string; sha: string };
  base: { ref: string };
}): ForgePull {
  return {
    number: p.number,
    ...(p.node_id && { nodeId: p.node_id }),
    url: p.html_url,
    state: p.state === 'open' ? 'open' : 'closed',
    merged: p.merged === true || p.merged_at !== null,
    head: p.head.ref,
    headSha: p.head.sha,
    base: p.base.ref,
  };
}
