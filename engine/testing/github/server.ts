/**
 * A GitHub REST server for tests, on 127.0.0.1: the subset tron's forge speaks (issues
 * and labels, comments, pulls and their lookup by head, reviews, check runs, commit
 * statuses and the combined status, required checks of a protected branch, refs,
 * merges), answering the real client (Octokit) in GitHub's wire format. The response
 * shapes follow GitHub's published OpenAPI description (github/rest-api-description, the
 * `issue`, `issue-comment`, `pull-request`, `pull-request-review`, `check-run`,
 * `combined-commit-status`, `git-ref` and `pull-request-merge-result` schemas), trimmed to
 * the fields a client reads; `shapes.ts` builds them.
 *
 * What a real forge does that a fake usually skips is here on purpose: lists paginate
 * with a `Link` header (`per_page` up to 100), every GET carries an `ETag` and answers
 * `If-None-Match` with 304 (which GitHub does not count against the rate limit), faults
 * can be queued — a primary (403, `x-ratelimit-remaining: 0`) or secondary (403,
 * `retry-after`) rate limit, a 429, a 5xx — and the repository is a real bare git
 * repository: refs, a pull's head sha and a merge read and move its branches, so a push
 * by git and a call of the API see the same truth. A pull whose head has reached its base
 * branch (a push of trunk) is marked merged, as GitHub does.
 *
 * People are modelled as GitHub sees them: each login has an `author_association` (on
 * every issue, comment, pull and review it wrote) and a role on the repository (`GET
 * /repos/{o}/{r}/collaborators/{user}/permission`); everyone is a MEMBER with write access
 * unless `person()` says otherwise — a stranger is `{ association: 'NONE', role: 'read' }`.
 * The token speaks as `login` (`GET /user`): the comments and pulls it makes are that
 * account's. Labels put on or taken off are issue events with their actor (`GET
 * /repos/{o}/{r}/issues/{n}/events`). Every check run names the app that reported it (the
 * token's is `ciApp`; `check()` can name another), and a branch protection's required
 * checks may each name the app that must report them (`app_id`), as GitHub enforces.
 *
 * The merge queue is GitHub's GraphQL (no REST endpoint enqueues): `POST /graphql`
 * answers the two operations tron sends — `enqueuePullRequest` (refused unless the queue
 * is on for the base branch, the head is `expectedHeadOid` and the pull's required checks
 * are green, as GitHub refuses them) and a pull request's `merged`, `mergeCommit`,
 * `mergeQueueEntry` and `RemovedFromMergeQueueEvent`s. The queue itself is modelled as
 * GitHub runs it: it makes a merge group commit (a merge of the pull's head into its base,
 * on `gh-readonly-queue/<base>/pr-<n>-<base sha>`), waits for the base's required checks on
 * that commit (hosted CI reports them: `onMergeGroup`), then fast-forwards the base to it
 * and marks the pull merged — or takes the pull out, with a reason, when a check is red,
 * the head moved, or the merge conflicts. `holdQueue` keeps a pull queued (never merged)
 * for as long as a test wants.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import {
  type App,
  type Association,
  checkRunOf,
  labelEventOf,
  type LabelEvent,
  permissionOf,
  type Role,
  selfOf,
  combinedStatusOf,
  commentOf,
  issueOf,
  pullOf,
  reviewOf,
  statusOf,
  type CheckRun,
  type Comment,
  type Issue,
  type Pull,
  type Review,
  type Status,
  type Urls,
} from './shapes.ts';

const run = promisify(execFile);

/** A fault the server answers one request with instead of serving it. */
export interface Fault {
  status: number;
  headers?: Record<string, string>;
  message?: string;
  /** Only requests whose `METHOD /path` matches (default: any). */
  match?: RegExp;
}

/** One request as the server saw it (for tests: what the client asked, how it was answered). */
export interface Seen {
  method: string;
  path: string;
  status: number;
  /** Whether GitHub would count it against the rate limit (a 304 is free). */
  counted: boolean;
}

export interface GitHubServer {
  /** The API's base URL (what Octokit takes as `baseUrl`). */
  url: string;
  owner: string;
  repo: string;
  /** The token every request must carry (`Authorization: token …` or `Bearer …`). */
  token: string;
  /** The account the token speaks as (`GET /user`): its comments and pulls are that login's. */
  login: string;
  /** The app the token's check runs are reported by (hosted CI). */
  ciApp: App;
  /** A token that speaks as GitHub App `app` (an installation token): the check runs it reports are that app's. */
  appToken(app: App): string;
  /** Says who `login` is on the repository: their author association and role (default MEMBER, write). */
  person(login: string, p: { association?: Association; role?: Role }): void;
  /** Every request so far, in order. */
  seen: Seen[];
  /** Answers the next requests (that match) with these faults, one each, in order. */
  fault(...faults: Fault[]): void;
  /** Opens an issue as a person would; returns its number. */
  openIssue(i: { title: string; body?: string; labels?: string[]; user?: string; labelledBy?: string }): number;
  /** Edits an issue as a person would. */
  editIssue(
    number: number,
    patch: { title?: string; body?: string; state?: 'open' | 'closed'; labels?: string[]; by?: string; comment?: string },
  ): void;
  issue(number: number): Issue | undefined;
  comments(number: number): Comment[];
  pulls(): Pull[];
  /** A person reviews a pull: APPROVED, CHANGES_REQUESTED or COMMENTED, on its current head. */
  review(number: number, r: { state: Review['state']; body?: string; user?: string }): Promise<void>;
  /** A person closes a pull without merging it, with a comment. */
  closePull(number: number, comment?: string, user?: string): void;
  /** Hosted CI reports a check run on `sha`. */
  check(
    sha: string,
    c: { name: string; conclusion: CheckRun['conclusion']; status?: CheckRun['status']; text?: string; summary?: string; app?: App },
  ): void;
  /** Hosted CI reports a commit status on `sha`. */
  status(sha: string, s: { context: string; state: Status['state']; description?: string }): void;
  /** Protects `branch`, requiring these checks to pass: a context, or a context from one app (`app_id`). */
  protect(branch: string, checks: (string | { context: string; app_id: number })[]): void;
  /** Turns the merge queue on for `branch`. */
  mergeQueue(branch: string): void;
  /** Hosted CI for merge groups: called with each group's commit when the queue makes it. */
  onMergeGroup(f: (sha: string, pull: number) => void | Promise<void>): void;
  /** While held, the queue makes groups but neither merges nor removes anything. */
  holdQueue(held: boolean): void;
  /** The queue's entries now (for tests). */
  queue(): { pull: number; group?: string }[];
  close(): Promise<void>;
}

interface Store {
  next: number;
  nextId: number;
  issues: Map<number, Issue>;
  comments: Comment[];
  labels: Map<string, { id: number; name: string; color: string; description: string | null }>;
  pulls: Map<number, Pull>;
  reviews: Review[];
  checks: CheckRun[];
  statuses: Status[];
  protection: Map<string, { context: string; app_id: number | null }[]>;
  people: Map<string, { association: Association; role: Role }>;
  labelEvents: LabelEvent[];
  /** Branches whose merge queue is on. */
  queued: Set<string>;
  /** The merge queue's entries, in order. */
  entries: { pull: number; head: string; base?: string; group?: string }[];
  /** RemovedFromMergeQueueEvents: pull, reason. */
  removals: { pull: number; reason: string }[];
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** Starts the server for repository `owner/repo`, whose git repository is the bare `gitDir`. */
export async function startGitHubServer(opts: {
  gitDir: string;
  owner?: string;
  repo?: string;
  token?: string;
  /** Sees each request once its answer is sent: where a test kills the client right after the forge acted. */
  onServed?: (seen: Seen) => void;
}): Promise<GitHubServer> {
  const owner = opts.owner ?? 'acme';
  const repo = opts.repo ?? 'app';
  const token = opts.token ?? 'ghp_testtoken0000000000000000000000000000';
  const login = 'tron-bot';
  const ciApp: App = { id: 15368, slug: 'github-actions' };
  /** Installation tokens, each speaking as its app. */
  const appTokens = new Map<string, App>();
  const store: Store = {
    next: 1,
    nextId: 1000,
    issues: new Map(),
    comments: [],
    labels: new Map(),
    pulls: new Map(),
    reviews: [],
    checks: [],
    statuses: [],
    protection: new Map(),
    people: new Map(),
    labelEvents: [],
    queued: new Set(),
    entries: [],
    removals: [],
  };
  let onMergeGroup: ((sha: string, pull: number) => void | Promise<void>) | undefined;
  let queueTurn: Promise<void> = Promise.resolve();
  let held = false;
  const faults: Fault[] = [];
  const seen: Seen[] = [];
  let urls: Urls = { api: '', html: '', owner, repo };
  const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const id = () => store.nextId++;
  const association = (user: string): Association => store.people.get(user)?.association ?? 'MEMBER';
  const roleOf = (user: string): Role => store.people.get(user)?.role ?? 'write';

  const git = async (...args: string[]) =>
    (
      await run('git', args, {
        cwd: opts.gitDir,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
      })
    ).stdout.trim();
  const resolve = async (ref: string): Promise<string | undefined> => {
    try {
      return await git('rev-parse', '--verify', '--quiet', `${ref}^{commit}`);
    } catch {
      return undefined;
    }
  };
  const isAncestor = async (a: string, b: string) =>
    run('git', ['merge-base', '--is-ancestor', a, b], { cwd: opts.gitDir }).then(
      () => true,
      () => false,
    );

  /** A pull follows its head branch, and is merged once its head is in its base branch. */
  async function refresh(pull: Pull): Promise<void> {
    if (pull.state !== 'open') return;
    const head = await resolve(`refs/heads/${pull.head.ref}`);
    if (head) pull.head.sha = head;
    const base = await resolve(`refs/heads/${pull.base.ref}`);
    if (base) pull.base.sha = base;
    if (base && (await isAncestor(pull.head.sha, base))) {
      pull.state = 'closed';
      pull.merged = true;
      pull.merged_at = pull.closed_at = now();
      pull.merge_commit_sha = pull.head.sha;
      const issue = store.issues.get(pull.number)!;
      issue.state = 'closed';
      issue.closed_at = pull.closed_at;
    }
  }

  /** Takes `pull` out of the queue with `reason`, as a RemovedFromMergeQueueEvent says. */
  async function dequeue(entry: Store['entries'][number], reason: string): Promise<void> {
    store.entries.splice(store.entries.indexOf(entry), 1);
    store.removals.push({ pull: entry.pull, reason });
    if (entry.group) await git('update-ref', '-d', groupRef(entry)).catch(() => undefined);
  }
  const groupRef = (e: Store['entries'][number]) =>
    `refs/heads/gh-readonly-queue/${store.pulls.get(e.pull)!.base.ref}/pr-${e.pull}-${e.base}`;

  /** One turn of the queue, as GitHub runs it: the first entry's group is made, checked, and merged or removed. */
  async function runQueue(): Promise<void> {
    const entry = store.entries[0];
    if (!entry) return;
    const pull = store.pulls.get(entry.pull)!;
    const head = await resolve(`refs/heads/${pull.head.ref}`);
    const base = (await resolve(`refs/heads/${pull.base.ref}`))!;
    if (held) {
      if (!entry.group) await makeGroup(entry, base);
      return;
    }
    if (head !== entry.head) return dequeue(entry, 'the head branch was updated');
    if (entry.group && entry.base !== base) {
      // The base moved under the group: made again on the new base, as GitHub rebuilds it.
      await git('update-ref', '-d', groupRef(entry));
      entry.group = undefined;
    }
    if (!entry.group) {
      if (!(await makeGroup(entry, base))) return dequeue(entry, 'merge conflict');
      return;
    }
    const required = store.protection.get(pull.base.ref) ?? [];
    const runs = required.map((r) => latestRun(entry.group!, r));
    const red = required.filter(
      (_, i) => runs[i]?.status === 'completed' && !['success', 'neutral', 'skipped'].includes(runs[i]!.conclusion ?? ''),
    );
    if (red.length > 0) return dequeue(entry, `the required check ${red.map((r) => r.context).join(', ')} failed on the merge group`);
    if ((await missingChecks(pull.base.ref, entry.group)).length > 0) return;
    await git('update-ref', `refs/heads/${pull.base.ref}`, entry.group, base);
    await git('update-ref', '-d', groupRef(entry));
    store.entries.shift();
    pull.state = 'closed';
    pull.merged = true;
    pull.merged_at = pull.closed_at = now();
    pull.merge_commit_sha = entry.group;
    pull.base.sha = entry.group;
    const issue = store.issues.get(pull.number)!;
    issue.state = 'closed';
    issue.closed_at = pull.closed_at;
  }

  /** The merge group commit: the pull's head merged into `base` (false: they conflict). */
  async function makeGroup(entry: Store['entries'][number], base: string): Promise<boolean> {
    let tree: string;
    try {
      tree = (await git('merge-tree', '--write-tree', base, entry.head)).split('\n')[0]!;
    } catch {
      return false;
    }
    const pull = store.pulls.get(entry.pull)!;
    const group = (
      await run(
        'git',
        ['commit-tree', tree, '-p', base, '-p', entry.head, '-m', `Merge pull request #${pull.number} from ${owner}/${pull.head.ref}`],
        {
          cwd: opts.gitDir,
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            GIT_CONFIG_NOSYSTEM: '1',
            GIT_CONFIG_GLOBAL: '/dev/null',
            GIT_AUTHOR_NAME: 'GitHub',
            GIT_AUTHOR_EMAIL: 'noreply@github.com',
            GIT_COMMITTER_NAME: 'GitHub',
            GIT_COMMITTER_EMAIL: 'noreply@github.com',
          },
        },
      )
    ).stdout.trim();
    entry.base = base;
    entry.group = group;
    await git('update-ref', groupRef(entry), group);
    await onMergeGroup?.(group, pull.number);
    return true;
  }

  /** GitHub's GraphQL, for the two operations of the merge queue tron sends. */
  async function graphql(body: Record<string, unknown>): Promise<unknown> {
    const query = String(body.query ?? '');
    const vars = (body.variables ?? {}) as Record<string, unknown>;
    const fail = (type: string, message: string) => ({ data: null, errors: [{ type, message, path: ['enqueuePullRequest'] }] });
    if (query.includes('enqueuePullRequest')) {
      const pull = [...store.pulls.values()].find((p) => `PR_${p.id}` === vars.id);
      if (!pull) return fail('NOT_FOUND', `Could not resolve to a node with the global id of '${String(vars.id)}'`);
      await refresh(pull);
      if (pull.state !== 'open') return fail('UNPROCESSABLE', 'Pull request is closed');
      if (!store.queued.has(pull.base.ref)) return fail('UNPROCESSABLE', 'Merge queue is not enabled for this branch');
      if (vars.sha && vars.sha !== pull.head.sha) return fail('UNPROCESSABLE', 'Head sha did not match expected head sha');
      const missing = await missingChecks(pull.base.ref, pull.head.sha);
      if (missing.length > 0) return fail('UNPROCESSABLE', `Required status checks ${missing.join(', ')} have not succeeded`);
      let entry = store.entries.find((e) => e.pull === pull.number);
      if (!entry) {
        entry = { pull: pull.number, head: pull.head.sha };
        store.entries.push(entry);
      }
      return { data: { enqueuePullRequest: { mergeQueueEntry: { state: 'QUEUED', position: store.entries.indexOf(entry) + 1 } } } };
    }
    if (query.includes('mergeQueueEntry')) {
      const pull = store.pulls.get(Number(vars.number));
      if (!pull)
        return {
          data: { repository: { pullRequest: null } },
          errors: [{ type: 'NOT_FOUND', message: 'Could not resolve to a PullRequest' }],
        };
      const entry = store.entries.find((e) => e.pull === pull.number);
      const removed = store.removals.filter((r) => r.pull === pull.number).slice(-1);
      return {
        data: {
          repository: {
            pullRequest: {
              merged: pull.merged,
              mergeCommit: pull.merged && pull.merge_commit_sha ? { oid: pull.merge_commit_sha } : null,
              mergeQueueEntry: entry
                ? { state: entry.group ? 'AWAITING_CHECKS' : 'QUEUED', position: store.entries.indexOf(entry) + 1 }
                : null,
              timelineItems: { nodes: removed.map((r) => ({ reason: r.reason })) },
            },
          },
        },
      };
    }
    return { data: null, errors: [{ type: 'UNSUPPORTED', message: 'this test server answers the merge queue operations only' }] };
  }

  function issueOr404(n: number): Issue {
    const issue = store.issues.get(n);
    if (!issue) throw new HttpError(404, 'Not Found');
    return issue;
  }
  async function pullOr404(n: number): Promise<Pull> {
    const pull = store.pulls.get(n);
    if (!pull) throw new HttpError(404, 'Not Found');
    await refresh(pull);
    return pull;
  }
  function label(name: string) {
    let l = store.labels.get(name);
    if (!l) {
      l = { id: id(), name, color: 'ededed', description: null };
      store.labels.set(name, l);
    }
    return l;
  }
  /** Sets `issue`'s labels as `actor` did: each one put on or taken off is an issue event. */
  function setLabels(issue: Issue, names: string[], actor: string) {
    const before = new Set(issue.labels.map((l) => l.name));
    issue.labels = [...new Set(names)].map((n) => label(n));
    const after = new Set(issue.labels.map((l) => l.name));
    const event = (e: LabelEvent['event'], name: string) =>
      store.labelEvents.push({
        id: id(),
        issue: issue.number,
        event: e,
        label: { name, color: label(name).color },
        actor,
        created_at: now(),
      });
    for (const n of after) if (!before.has(n)) event('labeled', n);
    for (const n of before) if (!after.has(n)) event('unlabeled', n);
  }

  type Handler = (m: RegExpMatchArray, q: URLSearchParams, body: Record<string, unknown>) => Promise<unknown> | unknown;
  const R = `/repos/${owner}/${repo}`;
  const routes: [string, RegExp, Handler][] = [
    ['GET', /^\/rate_limit$/, () => ({ resources: { core: { limit: 5000, remaining: 4999, reset: 0, used: 1 } } })],
    ['POST', /^\/graphql$/, (_m, _q, b) => graphql(b)],
    [
      'GET',
      new RegExp(`^${R}/issues$`),
      (_m, q) => {
        const state = q.get('state') ?? 'open';
        const wanted = (q.get('labels') ?? '').split(',').filter(Boolean);
        const since = q.get('since');
        return [...store.issues.values()]
          .filter((i) => state === 'all' || i.state === state)
          .filter((i) => wanted.every((w) => i.labels.some((l) => l.name === w)))
          .filter((i) => !since || i.updated_at >= since)
          .sort((a, b) => b.number - a.number)
          .map((i) => issueOf(urls, i, association(i.user)));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/issues/(\\d+)$`),
      (m) => {
        const issue = issueOr404(Number(m[1]));
        return issueOf(urls, issue, association(issue.user));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/issues/(\\d+)/events$`),
      (m) => {
        issueOr404(Number(m[1]));
        return store.labelEvents.filter((e) => e.issue === Number(m[1])).map((e) => labelEventOf(urls, e));
      },
    ],
    ['GET', /^\/user$/, () => selfOf(urls, login)],
    [
      'GET',
      new RegExp(`^${R}/collaborators/([^/]+)/permission$`),
      (m) => {
        const user = decodeURIComponent(m[1]!);
        return permissionOf(urls, user, roleOf(user));
      },
    ],
    [
      'PATCH',
      new RegExp(`^${R}/issues/(\\d+)$`),
      (m, _q, b) => {
        const issue = issueOr404(Number(m[1]));
        if (typeof b.title === 'string') issue.title = b.title;
        if (typeof b.body === 'string') issue.body = b.body;
        if (b.state === 'open' || b.state === 'closed') {
          issue.state = b.state;
          issue.closed_at = b.state === 'closed' ? now() : null;
          issue.state_reason = b.state === 'closed' ? ((b.state_reason as string) ?? 'completed') : null;
          issue.closed_by = b.state === 'closed' ? login : null;
        }
        if (Array.isArray(b.labels)) setLabels(issue, b.labels as string[], login);
        issue.updated_at = now();
        return issueOf(urls, issue, association(issue.user));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/issues/(\\d+)/comments$`),
      (m) => {
        issueOr404(Number(m[1]));
        return store.comments.filter((c) => c.issue === Number(m[1])).map((c) => commentOf(urls, c, association(c.user)));
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/issues/(\\d+)/comments$`),
      (m, _q, b) => {
        const issue = issueOr404(Number(m[1]));
        if (typeof b.body !== 'string' || b.body === '')
          throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'IssueComment', code: 'missing_field', field: 'body' }] });
        const c: Comment = { id: id(), issue: issue.number, body: b.body, user: login, created_at: now(), updated_at: now() };
        store.comments.push(c);
        issue.comments++;
        issue.updated_at = now();
        return [201, commentOf(urls, c, association(login))];
      },
    ],
    [
      'PATCH',
      new RegExp(`^${R}/issues/comments/(\\d+)$`),
      (m, _q, b) => {
        const c = store.comments.find((x) => x.id === Number(m[1]));
        if (!c) throw new HttpError(404, 'Not Found');
        c.body = String(b.body);
        c.updated_at = now();
        return commentOf(urls, c, association(c.user));
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/issues/(\\d+)/labels$`),
      (m, _q, b) => {
        const issue = issueOr404(Number(m[1]));
        setLabels(issue, [...issue.labels.map((l) => l.name), ...((b.labels as string[]) ?? [])], login);
        return issue.labels;
      },
    ],
    [
      'DELETE',
      new RegExp(`^${R}/issues/(\\d+)/labels/([^/]+)$`),
      (m) => {
        const issue = issueOr404(Number(m[1]));
        const name = decodeURIComponent(m[2]!);
        if (!issue.labels.some((l) => l.name === name)) throw new HttpError(404, 'Label does not exist');
        setLabels(
          issue,
          issue.labels.map((l) => l.name).filter((n) => n !== name),
          login,
        );
        return issue.labels;
      },
    ],
    ['GET', new RegExp(`^${R}/labels$`), () => [...store.labels.values()]],
    [
      'POST',
      new RegExp(`^${R}/labels$`),
      (_m, _q, b) => {
        const name = String(b.name);
        if (store.labels.has(name))
          throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'Label', code: 'already_exists', field: 'name' }] });
        const l = label(name);
        if (typeof b.color === 'string') l.color = b.color;
        return [201, l];
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pulls$`),
      async (_m, q) => {
        const state = q.get('state') ?? 'open';
        const head = q.get('head');
        const base = q.get('base');
        for (const p of store.pulls.values()) await refresh(p);
        return [...store.pulls.values()]
          .filter((p) => state === 'all' || p.state === state)
          .filter((p) => !head || head === `${owner}:${p.head.ref}`)
          .filter((p) => !base || base === p.base.ref)
          .sort((a, b) => b.number - a.number)
          .map((p) => pullOf(urls, p, store.issues.get(p.number)!, association(login)));
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/pulls$`),
      async (_m, _q, b) => {
        const head = String(b.head ?? '').replace(new RegExp(`^${owner}:`), '');
        const base = String(b.base ?? '');
        const headSha = await resolve(`refs/heads/${head}`);
        const baseSha = await resolve(`refs/heads/${base}`);
        if (!headSha || !baseSha)
          throw new HttpError(422, 'Validation Failed', {
            errors: [{ resource: 'PullRequest', field: headSha ? 'base' : 'head', code: 'invalid' }],
          });
        for (const p of store.pulls.values()) await refresh(p);
        if ([...store.pulls.values()].some((p) => p.state === 'open' && p.head.ref === head && p.base.ref === base))
          throw new HttpError(422, 'Validation Failed', {
            errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${head}.` }],
          });
        if (await isAncestor(headSha, baseSha))
          throw new HttpError(422, 'Validation Failed', {
            errors: [{ resource: 'PullRequest', code: 'custom', message: `No commits between ${base} and ${head}` }],
          });
        const number = store.next++;
        const issue: Issue = {
          id: id(),
          number,
          title: String(b.title ?? head),
          body: typeof b.body === 'string' ? b.body : null,
          state: 'open',
          state_reason: null,
          labels: [],
          user: login,
          comments: 0,
          created_at: now(),
          updated_at: now(),
          closed_at: null,
          pull: true,
        };
        store.issues.set(number, issue);
        const pull: Pull = {
          id: id(),
          number,
          state: 'open',
          head: { ref: head, sha: headSha },
          base: { ref: base, sha: baseSha },
          merged: false,
          merged_at: null,
          closed_at: null,
          merge_commit_sha: null,
          draft: b.draft === true,
        };
        store.pulls.set(number, pull);
        return [201, pullOf(urls, pull, issue, association(login))];
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pulls/(\\d+)$`),
      async (m) => pullOf(urls, await pullOr404(Number(m[1])), store.issues.get(Number(m[1]))!, association(login)),
    ],
    [
      'PATCH',
      new RegExp(`^${R}/pulls/(\\d+)$`),
      async (m, _q, b) => {
        const pull = await pullOr404(Number(m[1]));
        const issue = store.issues.get(pull.number)!;
        if (typeof b.title === 'string') issue.title = b.title;
        if (typeof b.body === 'string') issue.body = b.body;
        if (b.state === 'closed' && pull.state === 'open') {
          pull.state = issue.state = 'closed';
          pull.closed_at = issue.closed_at = now();
        }
        issue.updated_at = now();
        return pullOf(urls, pull, issue, association(issue.user));
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/pulls/(\\d+)/reviews$`),
      async (m) => {
        await pullOr404(Number(m[1]));
        return store.reviews.filter((r) => r.pull === Number(m[1])).map((r) => reviewOf(urls, r, association(r.user)));
      },
    ],
    [
      'PUT',
      new RegExp(`^${R}/pulls/(\\d+)/merge$`),
      async (m, _q, b) => {
        const pull = await pullOr404(Number(m[1]));
        if (pull.state !== 'open') throw new HttpError(405, 'Pull Request is not mergeable');
        if (typeof b.sha === 'string' && b.sha !== pull.head.sha)
          throw new HttpError(409, 'Head branch was modified. Review and try the merge again.');
        // Only a fast-forward keeps the tested sha: the one merge this server performs.
        if (!(await isAncestor(pull.base.sha, pull.head.sha))) throw new HttpError(405, 'Pull Request is not mergeable');
        const missing = await missingChecks(pull.base.ref, pull.head.sha);
        if (missing.length > 0)
          throw new HttpError(
            405,
            `Required status check${missing.length > 1 ? 's' : ''} ${missing.map((c) => `"${c}"`).join(', ')} ${missing.length > 1 ? 'are' : 'is'} expected.`,
          );
        await git('update-ref', `refs/heads/${pull.base.ref}`, pull.head.sha, pull.base.sha);
        await refresh(pull);
        return { sha: pull.head.sha, merged: true, message: 'Pull Request successfully merged' };
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commits/(.+)/check-runs$`),
      async (m) => {
        const sha = await shaOr404(decodeURIComponent(m[1]!));
        const runs = store.checks.filter((c) => c.head_sha === sha).map((c) => checkRunOf(urls, c));
        return { total_count: runs.length, check_runs: runs };
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/check-runs$`),
      (_m, _q, b) => {
        const c: CheckRun = {
          app: caller,
          id: id(),
          name: String(b.name),
          head_sha: String(b.head_sha),
          status: (b.status as CheckRun['status']) ?? (b.conclusion ? 'completed' : 'queued'),
          conclusion: (b.conclusion as CheckRun['conclusion']) ?? null,
          output: { title: null, summary: null, text: null, ...(b.output as object) },
          started_at: now(),
          completed_at: b.conclusion ? now() : null,
        };
        store.checks.push(c);
        return [201, checkRunOf(urls, c)];
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/commits/(.+)/status$`),
      async (m) => {
        const sha = await shaOr404(decodeURIComponent(m[1]!));
        return combinedStatusOf(urls, sha, latestStatuses(sha));
      },
    ],
    [
      'POST',
      new RegExp(`^${R}/statuses/([0-9a-f]{40})$`),
      (m, _q, b) => {
        const s: Status = {
          id: id(),
          sha: m[1]!,
          context: String(b.context ?? 'default'),
          state: b.state as Status['state'],
          description: typeof b.description === 'string' ? b.description : null,
          target_url: typeof b.target_url === 'string' ? b.target_url : null,
          created_at: now(),
        };
        store.statuses.push(s);
        return [201, statusOf(urls, s)];
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/branches/([^/]+)/protection/required_status_checks$`),
      (m) => {
        const checks = store.protection.get(decodeURIComponent(m[1]!));
        if (!checks) throw new HttpError(404, 'Branch not protected');
        return {
          url: `${urls.api}${R}/branches/${m[1]}/protection/required_status_checks`,
          strict: true,
          contexts: checks.map((c) => c.context),
          checks,
        };
      },
    ],
    [
      'GET',
      new RegExp(`^${R}/git/ref/(.+)$`),
      async (m) => {
        const ref = `refs/${decodeURIComponent(m[1]!)}`;
        const sha = await resolve(ref);
        if (!sha) throw new HttpError(404, 'Not Found');
        return {
          ref,
          node_id: `REF_${ref}`,
          url: `${urls.api}${R}/git/${ref}`,
          object: { sha, type: 'commit', url: `${urls.api}${R}/git/commits/${sha}` },
        };
      },
    ],
    [
      'PATCH',
      new RegExp(`^${R}/git/refs/(.+)$`),
      async (m, _q, b) => {
        const ref = `refs/${decodeURIComponent(m[1]!)}`;
        const old = await resolve(ref);
        const sha = String(b.sha);
        if (!old) throw new HttpError(422, 'Reference does not exist');
        if (!(await resolve(sha))) throw new HttpError(422, 'Object does not exist');
        if (b.force !== true && !(await isAncestor(old, sha))) throw new HttpError(422, 'Update is not a fast forward');
        if (ref.startsWith('refs/heads/')) {
          const missing = await missingChecks(ref.slice('refs/heads/'.length), sha);
          if (missing.length > 0) throw new HttpError(422, `Required status checks ${missing.join(', ')} are expected.`);
        }
        await git('update-ref', ref, sha, old);
        return {
          ref,
          node_id: `REF_${ref}`,
          url: `${urls.api}${R}/git/${ref}`,
          object: { sha, type: 'commit', url: `${urls.api}${R}/git/commits/${sha}` },
        };
      },
    ],
  ];

  async function shaOr404(ref: string): Promise<string> {
    const sha = /^[0-9a-f]{40}$/.test(ref) ? ref : await resolve(`refs/heads/${ref}`);
    if (!sha) throw new HttpError(422, `No commit found for SHA: ${ref}`);
    return sha;
  }
  function latestStatuses(sha: string): Status[] {
    const latest = new Map<string, Status>();
    for (const s of store.statuses) if (s.sha === sha) latest.set(s.context, s);
    return [...latest.values()];
  }
  /** The latest run of a required check on `sha`: of its app, when the protection names one. */
  function latestRun(sha: string, r: { context: string; app_id: number | null }): CheckRun | undefined {
    return store.checks.filter((c) => c.head_sha === sha && c.name === r.context && (r.app_id === null || c.app.id === r.app_id)).at(-1);
  }
  /** The required contexts of `branch` not green on `sha` (a check run — of the named app — or a status of that name). */
  async function missingChecks(branch: string, sha: string): Promise<string[]> {
    const required = store.protection.get(branch) ?? [];
    const statuses = latestStatuses(sha);
    return required
      .filter((r) => {
        const run = latestRun(sha, r);
        if (run)
          return !(
            run.status === 'completed' &&
            (run.conclusion === 'success' || run.conclusion === 'neutral' || run.conclusion === 'skipped')
          );
        return r.app_id !== null || statuses.find((s) => s.context === r.context)?.state !== 'success';
      })
      .map((r) => r.context);
  }

  /** The app the request's token speaks as (set per request, before its handler runs). */
  let caller: App = ciApp;

  function send(res: ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}) {
    const text = payload === undefined ? '' : JSON.stringify(payload);
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'x-github-api-version-selected': '2022-11-28',
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      'x-ratelimit-resource': 'core',
      ...headers,
    });
    res.end(text);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', urls.api);
    const method = req.method ?? 'GET';
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const record = (status: number, counted = true) => {
      const one = { method, path: url.pathname + url.search, status, counted };
      seen.push(one);
      if (opts.onServed) res.once('finish', () => opts.onServed!(one));
    };
    const auth = req.headers.authorization ?? '';
    const presented = auth.replace(/^(token|bearer) /i, '');
    if (presented !== token && !appTokens.has(presented)) {
      record(401);
      return send(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' });
    }
    const fi = faults.findIndex((f) => !f.match || f.match.test(`${method} ${url.pathname}`));
    if (fi >= 0) {
      const [f] = faults.splice(fi, 1);
      record(f!.status);
      return send(
        res,
        f!.status,
        { message: f!.message ?? 'Server Error', documentation_url: 'https://docs.github.com/rest', status: String(f!.status) },
        f!.headers,
      );
    }
    // The queue moves between requests, as GitHub's moves on its own: one turn at a time.
    queueTurn = queueTurn.then(runQueue, runQueue);
    await queueTurn.catch(() => undefined);
    const route = routes.find(([m, re]) => m === method && re.test(url.pathname));
    if (!route) {
      record(404);
      return send(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest', status: '404' });
    }
    let body: Record<string, unknown> = {};
    caller = appTokens.get(presented) ?? ciApp;
    try {
      body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
    } catch {
      record(400);
      return send(res, 400, { message: 'Problems parsing JSON', status: '400' });
    }
    try {
      const out = await route[2](url.pathname.match(route[1])!, url.searchParams, body);
      let [status, payload] =
        Array.isArray(out) && typeof out[0] === 'number' && out.length === 2 ? (out as [number, unknown]) : [200, out];
      const headers: Record<string, string> = {};
      if (method === 'GET' && Array.isArray(payload)) {
        const perPage = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30)));
        const page = Math.max(1, Number(url.searchParams.get('page') ?? 1));
        const last = Math.max(1, Math.ceil(payload.length / perPage));
        const link = (p: number, rel: string) => {
          const u = new URL(url);
          u.searchParams.set('per_page', String(perPage));
          u.searchParams.set('page', String(p));
          return `<${u}>; rel="${rel}"`;
        };
        const links = [
          ...(page > 1 ? [link(page - 1, 'prev'), link(1, 'first')] : []),
          ...(page < last ? [link(page + 1, 'next'), link(last, 'last')] : []),
        ];
        if (links.length) headers.link = links.join(', ');
        payload = payload.slice((page - 1) * perPage, page * perPage);
      }
      if (method === 'GET') {
        const etag = `W/"${createHash('sha1').update(JSON.stringify(payload)).digest('hex')}"`;
        headers.etag = etag;
        if (req.headers['if-none-match'] === etag) {
          record(304, false);
          res.writeHead(304, { etag });
          return void res.end();
        }
      }
      record(status);
      send(res, status, payload, headers);
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      record(err.status);
      send(res, err.status, {
        message: err.message,
        documentation_url: 'https://docs.github.com/rest',
        status: String(err.status),
        ...err.extra,
      });
    }
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      seen.push({ method: req.method ?? '', path: req.url ?? '', status: 500, counted: true });
      if (!res.headersSent) send(res, 500, { message: String(err) });
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as AddressInfo).port;
  urls = { api: `http://127.0.0.1:${port}`, html: `http://127.0.0.1:${port}/html`, owner, repo };

  return {
    url: urls.api,
    owner,
    repo,
    token,
    login,
    ciApp,
    seen,
    fault: (...f) => faults.push(...f),
    appToken(app) {
      const t = `ghs_${app.slug.replace(/[^A-Za-z0-9]/g, '')}${String(app.id).padStart(8, '0')}`;
      appTokens.set(t, app);
      return t;
    },
    person(user, p) {
      const role = p.role ?? roleOf(user);
      const fallback: Association = ['none', 'read'].includes(role) ? 'NONE' : 'COLLABORATOR';
      store.people.set(user, { role, association: p.association ?? fallback });
    },
    openIssue(i) {
      const number = store.next++;
      const issue: Issue = {
        id: id(),
        number,
        title: i.title,
        body: i.body ?? null,
        state: 'open',
        state_reason: null,
        labels: [],
        user: i.user ?? 'octocat',
        comments: 0,
        created_at: now(),
        updated_at: now(),
        closed_at: null,
        pull: false,
      };
      store.issues.set(number, issue);
      setLabels(issue, i.labels ?? [], i.labelledBy ?? issue.user);
      return number;
    },
    editIssue(number, patch) {
      const issue = issueOr404(number);
      if (patch.title !== undefined) issue.title = patch.title;
      if (patch.body !== undefined) issue.body = patch.body;
      const by = patch.by ?? 'octocat';
      if (patch.comment) {
        store.comments.push({ id: id(), issue: number, body: patch.comment, user: by, created_at: now(), updated_at: now() });
        issue.comments++;
      }
      if (patch.state !== undefined) {
        issue.state = patch.state;
        issue.closed_at = patch.state === 'closed' ? now() : null;
        issue.closed_by = patch.state === 'closed' ? by : null;
      }
      if (patch.labels !== undefined) setLabels(issue, patch.labels, by);
      issue.updated_at = now();
    },
    issue: (n) => store.issues.get(n),
    comments: (n) => store.comments.filter((c) => c.issue === n),
    pulls: () => [...store.pulls.values()],
    async review(number, r) {
      const pull = await pullOr404(number);
      store.reviews.push({
        id: id(),
        pull: number,
        state: r.state,
        body: r.body ?? '',
        user: r.user ?? 'reviewer',
        commit_id: pull.head.sha,
        submitted_at: now(),
      });
    },
    closePull(number, comment, user = 'maintainer') {
      const pull = store.pulls.get(number);
      const issue = store.issues.get(number);
      if (!pull || !issue) throw new Error(`no pull #${number}`);
      if (comment) {
        store.comments.push({ id: id(), issue: number, body: comment, user, created_at: now(), updated_at: now() });
        issue.comments++;
      }
      pull.state = issue.state = 'closed';
      pull.closed_at = issue.closed_at = now();
      issue.closed_by = user;
    },
    check(sha, c) {
      store.checks.push({
        app: c.app ?? ciApp,
        id: id(),
        name: c.name,
        head_sha: sha,
        status: c.status ?? 'completed',
        conclusion: c.status && c.status !== 'completed' ? null : c.conclusion,
        output: { title: c.name, summary: c.summary ?? null, text: c.text ?? null },
        started_at: now(),
        completed_at: now(),
      });
    },
    status(sha, s) {
      store.statuses.push({
        id: id(),
        sha,
        context: s.context,
        state: s.state,
        description: s.description ?? null,
        target_url: null,
        created_at: now(),
      });
    },
    protect: (branch, checks) =>
      void store.protection.set(
        branch,
        checks.map((c) => (typeof c === 'string' ? { context: c, app_id: null } : c)),
      ),
    mergeQueue: (branch) => void store.queued.add(branch),
    onMergeGroup: (f) => {
      onMergeGroup = f;
    },
    holdQueue: (h) => {
      held = h;
    },
    queue: () => store.entries.map((e) => ({ pull: e.pull, ...(e.group && { group: e.group }) })),
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
