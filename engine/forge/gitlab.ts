/**
 * The GitLab forge (REST v4: gitlab.com, or a self-managed instance by `[forge] api_url`),
 * on the maintained client, @gitbeaker/rest. gitbeaker's own requester retries a 429 or
 * a 502 up to ten times and never reads `Retry-After`; tron gives it a requester of its
 * own that sends each request once, so a rate limit or a 5xx comes back as a typed
 * `ForgeError` with the wait GitLab asked for and the caller decides when to call again,
 * as with GitHub.
 *
 * Rate limits, as GitLab documents them: a 429 with `Retry-After` (seconds), else
 * `RateLimit-Reset` (epoch seconds), else a minute. Lists are read page by page by
 * `X-Next-Page` (GitLab leaves out `X-Total` past 10,000 rows; `X-Next-Page` is always
 * there while a next page is).
 *
 * How GitLab's words map onto the forge's (docs/forge.md has the table): an issue's `iid`
 * is its number and its non-system notes its comments; a merge request is the pull
 * request (source branch = head, `sha` = head sha); approvals are APPROVED reviews of the
 * head sha and a reviewer's `requested_changes` (GitLab 17+) a CHANGES_REQUESTED one;
 * the project's latest pipeline on exactly a sha is the hosted check `pipeline` (any
 * other required check names a job of that pipeline); a member's access level is a role.
 */
import { Gitlab } from '@gitbeaker/rest';
import { createRequesterFn, type RequestOptions } from '@gitbeaker/requester-utils';
import {
  type Forge,
  type ForgeCheck,
  type ForgeComment,
  ForgeError,
  type ForgeIssue,
  type ForgePull,
  type ForgeQueue,
  type ForgeReview,
  type ForgeRole,
  type IssueList,
  type LabelChange,
  type RequiredCheck,
} from './forge.ts';

/** The hosted check a GitLab project always has: its pipeline on the sha. */
export const PIPELINE_CHECK = 'pipeline';

/** How many of a failed job's last log lines go back to the builder. */
const TRACE_LINES = 40;

/** GitLab's access levels (members API) as tron's roles: see docs/forge.md. */
export function roleOfAccessLevel(level: number): ForgeRole {
  if (level >= 50) return 'admin'; // Owner
  if (level >= 40) return 'maintain'; // Maintainer
  if (level >= 30) return 'write'; // Developer
  if (level >= 15) return 'triage'; // Planner (15) and Reporter (20): may label and close issues, not push
  if (level >= 10) return 'read'; // Guest
  return 'none'; // No access, Minimal access (5)
}

export interface GitLabOptions {
  /** The project's full path ("group/subgroup/project") or its numeric id. */
  repo: string;
  token: string;
  /** The REST base, ending in /api/v4. */
  apiUrl: string;
  timeoutMs?: number;
  /** The clock `RateLimit-Reset` is measured against (an effect's, never the decision path's). */
  now?: () => number;
}

/** A failed answer as tron acts on it (`said` comes with the token already scrubbed out: requesterOf). */
export function classifyGitLab(
  status: number | undefined,
  headers: Record<string, string | undefined>,
  said: string,
  now: () => number = Date.now,
): ForgeError {
  if (status === undefined || status >= 500) return new ForgeError('transient', `${status ?? 'unreachable'}: ${said}`, undefined, status);
  if (status === 429) {
    const retryAfter = Number(headers['retry-after']);
    if (headers['retry-after'] !== undefined && Number.isFinite(retryAfter) && retryAfter >= 0)
      return new ForgeError('rate_limited', `429: ${said}`, retryAfter * 1000, status);
    const reset = Number(headers['ratelimit-reset']) * 1000;
    return new ForgeError(
      'rate_limited',
      `429: ${said}`,
      Number.isFinite(reset) && reset > 0 ? Math.max(1000, reset - now()) : 60_000,
      status,
    );
  }
  if (status === 401 || status === 403) return new ForgeError('auth', `${status}: ${said}`, undefined, status);
  return new ForgeError('refused', `${status}: ${said}`, undefined, status);
}

/**
 * gitbeaker's requester, replaced: one `fetch` per request, no retries and no client-side
 * throttle; a failure is a `ForgeError` (classifyGitLab) with the token scrubbed out.
 */
function requesterOf(token: string, now: () => number) {
  const scrub = (s: string) => (token ? s.split(token).join('***') : s);
  return createRequesterFn(
    (_service, options) => Promise.resolve(options),
    async (endpoint: string, options?: RequestOptions) => {
      const { prefixUrl, searchParams, method, headers, body, signal } = options ?? {};
      const url = new URL(endpoint, prefixUrl?.endsWith('/') ? prefixUrl : `${prefixUrl}/`);
      if (searchParams) url.search = searchParams;
      let response: Response;
      try {
        response = await fetch(url, { method, headers: headers as Record<string, string>, body: body as string | undefined, signal });
      } catch (err) {
        const e = err as Error;
        const why =
          e.name === 'TimeoutError' || e.name === 'AbortError' ? 'timed out' : (e.cause as Error | undefined)?.message || e.message;
        throw new ForgeError('transient', scrub(`unreachable: ${method} ${url.pathname}: ${why}`));
      }
      const heads = Object.fromEntries(response.headers.entries());
      const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
      if (!response.ok) {
        const text = await response.text().catch(() => '');
        let said = text;
        if (type === 'application/json') {
          try {
            const d = JSON.parse(text) as { message?: unknown; error?: unknown };
            const m = d.message ?? d.error ?? text;
            said = typeof m === 'string' ? m : JSON.stringify(m);
          } catch {}
        }
        throw classifyGitLab(response.status, heads, scrub(`${method} ${url.pathname}: ${said.slice(0, 500)}`), now);
      }
      const parsed = response.status === 204 ? null : type === 'application/json' ? await response.json() : await response.text();
      return { body: parsed ?? {}, headers: heads, status: response.status };
    },
  );
}

interface RawUser {
  id: number;
  username: string;
}
interface RawIssue {
  iid: number;
  title: string;
  description: string | null;
  state: string;
  labels: (string | { name: string })[];
  web_url: string;
  author: RawUser | null;
  closed_by?: RawUser | null;
  updated_at?: string;
}
interface RawNote {
  id: number;
  body: string;
  author: RawUser | null;
  system: boolean;
}
interface RawMergeRequest {
  iid: number;
  id: number;
  web_url: string;
  state: string;
  source_branch: string;
  target_branch: string;
  sha: string;
  merge_commit_sha?: string | null;
  squash_commit_sha?: string | null;
  merge_when_pipeline_succeeds?: boolean;
  closed_by?: RawUser | null;
}
interface RawPipeline {
  id: number;
  sha: string;
  status: string;
  web_url: string;
}
interface RawJob {
  id: number;
  name: string;
  status: string;
  web_url: string;
}
type Page = { data: unknown[]; paginationInfo: { next: number | null } };

export class GitLabForge implements Forge {
  readonly repo: string;
  readonly issuePrefix = 'gl';
  private readonly api: InstanceType<typeof Gitlab<false>>;
  /** The project as the API's paths take it: a numeric id, or the full path (encoded by the client). */
  private readonly project: string | number;
  private readonly now: () => number;

  constructor(o: GitLabOptions) {
    this.repo = o.repo;
    this.project = /^\d+$/.test(o.repo) ? Number(o.repo) : o.repo;
    this.now = o.now ?? Date.now;
    this.api = new Gitlab({
      host: o.apiUrl.replace(/\/api\/v4\/*$/, ''),
      token: o.token,
      camelize: false,
      queryTimeout: o.timeoutMs ?? null,
      requesterFn: requesterOf(o.token, this.now),
    });
  }

  /** Every page of a list, following `X-Next-Page`. */
  private async pages<T>(read: (page: { page: number; perPage: number; showExpanded: true }) => Promise<unknown>): Promise<T[]> {
    const all: T[] = [];
    for (let page: number | null = 1; page !== null; ) {
      const got = (await read({ page, perPage: 100, showExpanded: true })) as Page;
      all.push(...(got.data as T[]));
      page = got.paginationInfo.next;
    }
    return all;
  }

  async listIssues(label: string, etag?: string): Promise<IssueList> {
    const raw = await this.pages<RawIssue>((p) =>
      this.api.Issues.all({ projectId: this.project, labels: label, state: 'opened', orderBy: 'created_at', sort: 'asc', ...p }),
    );
    const issues = raw.map(issueOf).sort((a, b) => a.number - b.number);
    // GitLab's issue list answers no If-None-Match: the list is read, and "unchanged" is tron's own comparison.
    const tag = `W/"tron-${fingerprint(issues.map((i) => `${i.number}@${i.updatedAt ?? ''}`).join(','))}"`;
    if (etag === tag) return 'unchanged';
    return { issues, etag: tag };
  }

  async issue(number: number): Promise<ForgeIssue | undefined> {
    try {
      return issueOf((await this.api.Issues.show(number, { projectId: this.project })) as unknown as RawIssue);
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return undefined;
      throw err;
    }
  }

  async comments(issue: number): Promise<ForgeComment[]> {
    const [notes, url] = await Promise.all([
      this.pages<RawNote>((p) => this.api.IssueNotes.all(this.project, issue, { sort: 'asc', orderBy: 'created_at', ...p } as never)),
      this.webUrl(),
    ]);
    // System notes ("added ~tron label", "closed") are GitLab's record, nobody's words.
    return notes.filter((n) => !n.system).map((n) => noteOf(n, `${url}/-/issues/${issue}`));
  }

  async comment(issue: number, body: string): Promise<ForgeComment> {
    const n = (await this.api.IssueNotes.create(this.project, issue, body)) as unknown as RawNote;
    return noteOf(n, `${await this.webUrl()}/-/issues/${issue}`);
  }

  /** A merge request's notes (not an issue's: GitLab numbers the two apart), without system notes. */
  async pullComments(pull: number): Promise<ForgeComment[]> {
    const [notes, url] = await Promise.all([
      this.pages<RawNote>((p) => this.api.MergeRequestNotes.all(this.project, pull, { sort: 'asc', orderBy: 'created_at', ...p } as never)),
      this.webUrl(),
    ]);
    return notes.filter((n) => !n.system).map((n) => noteOf(n, `${url}/-/merge_requests/${pull}`));
  }

  async closeIssue(issue: number): Promise<void> {
    await this.api.Issues.edit(this.project, issue, { stateEvent: 'close' });
  }

  async findPull(branch: string): Promise<ForgePull | undefined> {
    const all = await this.pages<RawMergeRequest>((p) =>
      this.api.MergeRequests.all({ projectId: this.project, sourceBranch: branch, state: 'all', ...p } as never),
    );
    const pulls = all.filter((m) => m.source_branch === branch).map(pullOf);
    return pulls.find((p) => p.state === 'open') ?? pulls.sort((a, b) => b.number - a.number)[0];
  }

  async openPull(p: { head: string; base: string; title: string; body: string }): Promise<ForgePull> {
    return pullOf(
      (await this.api.MergeRequests.create(this.project, p.head, p.base, p.title, { description: p.body })) as unknown as RawMergeRequest,
    );
  }

  async updatePull(number: number, p: { title: string; body: string }): Promise<void> {
    await this.api.MergeRequests.edit(this.project, number, { title: p.title, description: p.body });
  }

  async pull(number: number): Promise<ForgePull> {
    return pullOf(await this.mergeRequest(number));
  }

  private async mergeRequest(number: number): Promise<RawMergeRequest> {
    return (await this.api.MergeRequests.show(this.project, number)) as unknown as RawMergeRequest;
  }

  /**
   * Approvals (GitLab keeps no sha on one: each counts for the head it stands on now —
   * "remove approvals when commits are added" makes that exact), and each reviewer who
   * requested changes, with their latest note on the merge request as the words.
   */
  async reviews(pull: number): Promise<ForgeReview[]> {
    const [mr, approvals, reviewers] = await Promise.all([
      this.mergeRequest(pull),
      this.api.MergeRequestApprovals.showConfiguration(this.project, { mergerequestIId: pull }) as Promise<unknown>,
      this.api.MergeRequests.showReviewers(this.project, pull) as Promise<unknown>,
    ]);
    const approved = ((approvals as { approved_by?: { user: RawUser }[] }).approved_by ?? []).map(
      (a): ForgeReview => ({ state: 'APPROVED', body: '', author: a.user.username, sha: mr.sha }),
    );
    const asking = (reviewers as { user: RawUser; state?: string }[]).filter((r) => r.state === 'requested_changes');
    if (asking.length === 0) return approved;
    const [notes, versions] = await Promise.all([
      this.pages<RawNote & { created_at: string }>((p) =>
        this.api.MergeRequestNotes.all(this.project, pull, { sort: 'asc', orderBy: 'created_at', ...p } as never),
      ),
      this.api.MergeRequests.allDiffVersions(this.project, pull) as Promise<unknown>,
    ]);
    // A reviewer's state stays `requested_changes` across pushes: the request is of the head
    // the merge request had when they made it (their latest note, GitLab's "requested
    // changes" system note among them), so a new push is its answer, as on GitHub.
    const heads = (versions as { head_commit_sha: string; created_at: string }[]).map((v) => ({
      sha: v.head_commit_sha,
      at: Date.parse(v.created_at),
    }));
    const changes = asking.map((r): ForgeReview => {
      const theirs = notes.filter((n) => n.author?.username === r.user.username);
      const said = theirs.filter((n) => !n.system).at(-1)?.body ?? '';
      const when = theirs.length > 0 ? Date.parse(theirs.at(-1)!.created_at) : Number.POSITIVE_INFINITY;
      const then = heads.filter((h) => h.at <= when).sort((a, b) => b.at - a.at)[0];
      return { state: 'CHANGES_REQUESTED', body: said, author: r.user.username, sha: then?.sha ?? mr.sha };
    });
    // Approvals last: GitLab keeps one state per reviewer, and an approval is the later word.
    return [...changes, ...approved];
  }

  /** GitLab names no required checks: its pipeline is the check, always required (land = "push" for a project without CI). */
  async requiredChecks(_branch: string): Promise<RequiredCheck[]> {
    return [{ name: PIPELINE_CHECK }];
  }

  /** The latest pipeline on exactly `sha`: `pipeline` is its status; another name is its job of that name. */
  async checks(sha: string, required: readonly RequiredCheck[]): Promise<ForgeCheck[]> {
    const pipelines = (await this.api.Pipelines.all(this.project, {
      sha,
      orderBy: 'id',
      sort: 'desc',
      perPage: 20,
    } as never)) as unknown as RawPipeline[];
    const latest = pipelines.filter((p) => p.sha === sha).sort((a, b) => b.id - a.id)[0];
    if (!latest) return required.map(({ name }) => ({ name, state: 'missing' }));
    const jobs =
      required.some((r) => r.name !== PIPELINE_CHECK) || verdictOf(latest.status) === 'failure'
        ? await this.pages<RawJob>((p) => this.api.Jobs.all(this.project, { pipelineId: latest.id, ...p } as never))
        : [];
    // A job retried has several runs of its name: the latest counts.
    const byName = new Map<string, RawJob>();
    for (const j of [...jobs].sort((a, b) => a.id - b.id)) byName.set(j.name, j);
    const out: ForgeCheck[] = [];
    for (const { name } of required) {
      const job = name === PIPELINE_CHECK ? undefined : byName.get(name);
      if (name !== PIPELINE_CHECK && !job) {
        out.push({ name, state: 'missing', url: latest.web_url });
        continue;
      }
      const state = verdictOf(job ? job.status : latest.status);
      if (state !== 'failure') {
        out.push({ name, state, url: job?.web_url ?? latest.web_url });
        continue;
      }
      const failed = job ? [job] : [...byName.values()].filter((j) => j.status === 'failed');
      out.push({ name, state, text: await this.failureText(name, latest, failed), url: job?.web_url ?? latest.web_url });
    }
    return out;
  }

  /** What a red pipeline or job says: each failed job's last log lines. */
  private async failureText(name: string, pipeline: RawPipeline, failed: RawJob[]): Promise<string> {
    const parts = [`${name}: pipeline ${pipeline.id} ${pipeline.status}`];
    for (const j of failed) {
      const log = String(await this.api.Jobs.showLog(this.project, j.id));
      parts.push(
        `job ${j.name} (${j.status}), its last lines:\n${log.replace(/\r\n?/g, '\n').trimEnd().split('\n').slice(-TRACE_LINES).join('\n')}`,
      );
    }
    return parts.join('\n\n');
  }

  private me: Promise<string> | undefined;

  /** `GET /user`, once: the username the token speaks as. */
  async self(): Promise<string> {
    this.me ??= (this.api.Users.showCurrentUser() as Promise<unknown>).then(
      (u) => (u as RawUser).username,
      (err: unknown) => {
        this.me = undefined;
        throw err;
      },
    );
    return this.me;
  }

  /** The person's access level on the project, inherited from its groups too. */
  async role(login: string): Promise<ForgeRole> {
    const users = (await this.api.Users.all({ username: login } as never)) as unknown as RawUser[];
    const user = users.find((u) => u.username === login);
    if (!user) return 'none';
    try {
      const m = (await this.api.ProjectMembers.show(this.project, user.id, { includeInherited: true })) as unknown as {
        access_level: number;
      };
      return roleOfAccessLevel(m.access_level);
    } catch (err) {
      if (err instanceof ForgeError && err.status === 404) return 'none';
      throw err;
    }
  }

  async labelChange(issue: number, label: string): Promise<LabelChange | undefined> {
    const events = await this.pages<{ id: number; action: string; user: RawUser | null; label: { name: string } | null }>((p) =>
      this.api.IssueLabelEvents.all(this.project, issue, p as never),
    );
    const last = events
      .filter((e) => e.label?.name === label && (e.action === 'add' || e.action === 'remove'))
      .sort((a, b) => a.id - b.id)
      .at(-1);
    return last ? { action: last.action === 'add' ? 'labeled' : 'unlabeled', actor: last.user?.username ?? '' } : undefined;
  }

  /**
   * GitLab's nearest to a merge queue: "merge when the pipeline succeeds" (auto-merge),
   * given the head sha so a head that moved is refused; a merge train takes it when the
   * project runs them.
   */
  async enqueue(pull: ForgePull, headSha: string): Promise<void> {
    await this.api.MergeRequests.merge(this.project, pull.number, {
      sha: headSha,
      mergeWhenPipelineSucceeds: true,
      autoMerge: true,
    } as never);
  }

  async queueState(number: number): Promise<ForgeQueue> {
    const mr = await this.mergeRequest(number);
    if (mr.state === 'merged') return { state: 'merged', commit: mr.merge_commit_sha ?? mr.squash_commit_sha ?? mr.sha };
    if (mr.state !== 'opened') return { state: 'removed', reason: `the merge request is ${mr.state}` };
    return mr.merge_when_pipeline_succeeds ? { state: 'queued' } : { state: 'none' };
  }

  private web: Promise<string> | undefined;

  /** The project's web URL, read once (notes' links are made from it). */
  private webUrl(): Promise<string> {
    this.web ??= (this.api.Projects.show(this.project) as Promise<unknown>).then(
      (p) => (p as { web_url: string }).web_url,
      (err: unknown) => {
        this.web = undefined;
        throw err;
      },
    );
    return this.web;
  }
}

function verdictOf(status: string): ForgeCheck['state'] {
  if (status === 'success') return 'success';
  if (status === 'failed' || status === 'canceled' || status === 'skipped') return 'failure';
  return 'pending';
}

function issueOf(i: RawIssue): ForgeIssue {
  return {
    number: i.iid,
    title: i.title,
    body: i.description ?? '',
    labels: i.labels.map((l) => (typeof l === 'string' ? l : l.name)),
    state: i.state === 'closed' ? 'closed' : 'open',
    url: i.web_url,
    author: i.author?.username ?? '',
    ...(i.state === 'closed' && i.closed_by?.username && { closedBy: i.closed_by.username }),
    ...(i.updated_at && { updatedAt: i.updated_at }),
  };
}

function noteOf(n: RawNote, issueUrl: string): ForgeComment {
  return { id: n.id, body: n.body, author: n.author?.username ?? '', url: `${issueUrl}#note_${n.id}` };
}

function pullOf(m: RawMergeRequest): ForgePull {
  return {
    number: m.iid,
    url: m.web_url,
    state: m.state === 'opened' ? 'open' : 'closed',
    merged: m.state === 'merged',
    head: m.source_branch,
    headSha: m.sha,
    base: m.target_branch,
    ...(m.state === 'closed' && { closedBy: m.closed_by?.username ?? '' }),
  };
}

/** A short, stable digest of a text (FNV-1a, hex). */
function fingerprint(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}
