/**
 * A GitLab REST v4 server for tests, on 127.0.0.1: the subset tron's GitLab forge speaks
 * (the current user; a project's issues, notes, resource label events; merge requests,
 * their approvals, reviewers, notes and merge; pipelines by sha, their jobs and job logs;
 * commit statuses as external CI reports them; users by username and members with
 * inherited access), answering the real client (@gitbeaker/rest) in GitLab's wire
 * format (`shapes.ts`).
 *
 * What a real GitLab does that a fake usually skips is here on purpose: the project is
 * found by its numeric id or its URL-encoded full path (`acme%2Fapp`); lists paginate by
 * `page`/`per_page` (default 20, at most 100) with `X-Page`, `X-Per-Page`, `X-Total`,
 * `X-Total-Pages`, `X-Next-Page`, `X-Prev-Page` and a `Link` header; the token goes in
 * `PRIVATE-TOKEN` (or `Authorization: Bearer`), and a wrong one is a 401; faults can be
 * queued — a 429 with `Retry-After` and `RateLimit-*`, a 5xx. The repository is a real
 * bare git repository: a merge request's `sha` is its source branch's head as git has it,
 * and one whose head has reached its target branch (a push of trunk) is marked merged,
 * as GitLab does. An external CI's commit status (`POST /projects/:id/statuses/:sha`)
 * makes or updates the pipeline of that sha, one job per status name, as GitLab does.
 */
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import {
  approvalsOf,
  versionOf,
  type Issue,
  issueOf,
  jobOf,
  type LabelEvent,
  labelEventOf,
  type MergeRequest,
  memberOf,
  mergeRequestOf,
  type Note,
  noteOf,
  type Pipeline,
  pipelineOf,
  reviewerOf,
  type Urls,
  type User,
  userOf,
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

/** One request as the server saw it. */
export interface Seen {
  method: string;
  path: string;
  status: number;
}

export interface GitLabServer {
  /** The REST base, ending in /api/v4 (`[forge] api_url`). */
  url: string;
  /** The project's full path. */
  path: string;
  /** Its numeric id. */
  projectId: number;
  token: string;
  /** The account the token speaks as (`GET /user`). */
  username: string;
  seen: Seen[];
  fault(...faults: Fault[]): void;
  /** Says a person's access level on the project (10 guest … 50 owner; default 30, developer; 0: not a member). */
  person(username: string, accessLevel: number): void;
  openIssue(i: { title: string; description?: string; labels?: string[]; author?: string; labelledBy?: string }): number;
  /** A person edits an issue: closes or reopens it, or sets its labels (a label event each). */
  editIssue(iid: number, patch: { state?: 'opened' | 'closed'; labels?: string[]; by?: string }): void;
  issue(iid: number): Issue | undefined;
  /** An issue's notes, system ones too. */
  notes(iid: number, on?: 'Issue' | 'MergeRequest'): Note[];
  /** A person (or GitLab, `system`) writes a note. */
  note(iid: number, n: { body: string; author?: string; system?: boolean; on?: 'Issue' | 'MergeRequest' }): void;
  mergeRequests(): MergeRequest[];
  approve(iid: number, username: string): void;
  /** A reviewer requests changes on the merge request's head as git has it now, with a note (and GitLab's system note). */
  requestChanges(iid: number, username: string, body?: string): Promise<void>;
  /** A person closes a merge request without merging it, with a note when `words` are given. */
  closeMergeRequest(iid: number, by: string, words?: string): void;
  /** A pipeline on `sha` with these jobs (its status: failed if any failed, running if any runs, else success). */
  pipeline(sha: string, jobs: { name: string; status: string; trace?: string }[], ref?: string): Pipeline;
  pipelines(): Pipeline[];
  /** While held, merge requests set to merge when the pipeline succeeds stay set, never merged. */
  holdAutoMerge(held: boolean): Promise<void>;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function startGitLabServer(opts: {
  gitDir: string;
  path?: string;
  projectId?: number;
  token?: string;
  onServed?: (seen: Seen) => void;
}): Promise<GitLabServer> {
  const path = opts.path ?? 'acme/platform/app';
  const projectId = opts.projectId ?? 4711;
  const token = opts.token ?? 'glpat-testtoken00000000000';
  const username = 'tron-bot';
  const users = new Map<string, User>();
  const access = new Map<string, number>();
  let nextId = 100;
  const user = (name: string): User => {
    let u = users.get(name);
    if (!u) {
      u = { id: nextId++, username: name };
      users.set(name, u);
    }
    return u;
  };
  user(username);
  const issues = new Map<number, Issue>();
  const notes: Note[] = [];
  const labelEvents: LabelEvent[] = [];
  const mrs = new Map<number, MergeRequest>();
  const pipelines: Pipeline[] = [];
  const faults: Fault[] = [];
  let autoMergeHeld = false;
  const seen: Seen[] = [];
  let tick = 0;
  const now = () => new Date(Date.UTC(2026, 0, 1) + ++tick * 1000).toISOString();
  // GitLab numbers issues and merge requests each in their own sequence.
  let nextIid = 1;
  let nextMrIid = 1;
  const git = async (...args: string[]) => (await run('git', ['--git-dir', opts.gitDir, ...args])).stdout.trim();
  const head = (branch: string) => git('rev-parse', '--verify', '-q', `refs/heads/${branch}`).catch(() => '');

  const server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const urls: Urls = { api: `${base}/api/v4`, web: `${base}/${path}`, projectId };

  const label = (iid: number, name: string, action: 'add' | 'remove', by: string) =>
    labelEvents.push({ id: nextId++, issue: iid, label: name, action, user: by, createdAt: now() });

  /** A merge request whose head reached its target is merged, as GitLab marks it on a push of the target. */
  async function refresh(m: MergeRequest): Promise<void> {
    const sha = await head(m.source);
    if (sha && sha !== m.sha) m.versions.push({ id: nextId++, sha, createdAt: now() });
    if (sha) m.sha = sha;
    if (m.state !== 'opened') return;
    const target = await head(m.target);
    if (
      target &&
      m.sha &&
      (await git('merge-base', '--is-ancestor', m.sha, target).then(
        () => true,
        () => false,
      ))
    ) {
      m.state = 'merged';
      m.mergeCommitSha = null;
      m.updatedAt = now();
    }
  }

  function paged(req: URL, res: ServerResponse, rows: unknown[]): void {
    const perPage = Math.min(100, Math.max(1, Number(req.searchParams.get('per_page') ?? 20) || 20));
    const page = Math.max(1, Number(req.searchParams.get('page') ?? 1) || 1);
    const pages = Math.max(1, Math.ceil(rows.length / perPage));
    const at = (p: number) => {
      const u = new URL(req);
      u.searchParams.set('page', String(p));
      u.searchParams.set('per_page', String(perPage));
      return u.toString();
    };
    const links = [
      ...(page < pages ? [`<${at(page + 1)}>; rel="next"`] : []),
      ...(page > 1 ? [`<${at(page - 1)}>; rel="prev"`] : []),
      `<${at(1)}>; rel="first"`,
      `<${at(pages)}>; rel="last"`,
    ];
    send(res, 200, rows.slice((page - 1) * perPage, page * perPage), {
      'x-page': String(page),
      'x-per-page': String(perPage),
      'x-total': String(rows.length),
      'x-total-pages': String(pages),
      'x-next-page': page < pages ? String(page + 1) : '',
      'x-prev-page': page > 1 ? String(page - 1) : '',
      link: links.join(', '),
    });
  }

  function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json', ...headers });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  }

  const issueOr404 = (iid: number) => issues.get(iid) ?? fail(404, '404 Issue Not Found');
  const mrOr404 = (iid: number) => mrs.get(iid) ?? fail(404, '404 Merge Request Not Found');
  const fail = (status: number, message: string): never => {
    throw new HttpError(status, message);
  };

  async function route(method: string, u: URL, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
    const parts = u.pathname.replace(/^\/api\/v4\//, '').split('/');
    const q = (k: string) => u.searchParams.get(k);
    if (method === 'GET' && parts.join('/') === 'user') return send(res, 200, userOf(user(username), urls));
    if (method === 'GET' && parts.join('/') === 'users') {
      const name = q('username');
      return paged(u, res, name && users.has(name) ? [userOf(users.get(name)!, urls)] : []);
    }
    if (parts[0] !== 'projects' || parts.length < 2) return fail(404, '404 Not Found');
    const id = decodeURIComponent(parts[1]!);
    if (id !== String(projectId) && id !== path) return fail(404, '404 Project Not Found');
    const rest = parts.slice(2).join('/');
    const as = username;
    let m: RegExpExecArray | null;
    if (method === 'GET' && rest === '')
      return send(res, 200, {
        id: projectId,
        name: path.split('/').at(-1),
        path: path.split('/').at(-1),
        path_with_namespace: path,
        default_branch: 'main',
        web_url: urls.web,
        only_allow_merge_if_pipeline_succeeds: true,
      });
    if (method === 'GET' && rest === 'issues') {
      const want = (q('labels') ?? '').split(',').filter(Boolean);
      const state = q('state');
      const rows = [...issues.values()]
        .filter((i) => (state && state !== 'all' ? i.state === state : true) && want.every((l) => i.labels.includes(l)))
        .sort((a, b) => (q('sort') === 'asc' ? a.iid - b.iid : b.iid - a.iid));
      return paged(
        u,
        res,
        rows.map((i) => issueOf(i, user, urls)),
      );
    }
    m = /^issues\/(\d+)$/.exec(rest);
    if (m) {
      const i = issueOr404(Number(m[1]));
      if (method === 'PUT') {
        if (body.state_event === 'close' && i.state === 'opened') {
          i.state = 'closed';
          i.closedBy = as;
          notes.push({ id: nextId++, body: 'closed', author: as, system: true, on: 'Issue', iid: i.iid, createdAt: now() });
        }
        if (body.state_event === 'reopen') i.state = 'opened';
        i.updatedAt = now();
      }
      return send(res, 200, issueOf(i, user, urls));
    }
    m = /^(issues|merge_requests)\/(\d+)\/notes$/.exec(rest);
    if (m) {
      const on = m[1] === 'issues' ? 'Issue' : 'MergeRequest';
      const iid = Number(m[2]);
      if (on === 'Issue') issueOr404(iid);
      else mrOr404(iid);
      if (method === 'POST') {
        if (typeof body.body !== 'string' || !body.body) return fail(400, '400 Bad request - body is missing');
        const n: Note = { id: nextId++, body: body.body, author: as, system: false, on, iid, createdAt: now() };
        notes.push(n);
        return send(res, 201, noteOf(n, user, urls));
      }
      const rows = notes.filter((n) => n.on === on && n.iid === iid);
      if (q('sort') !== 'asc') rows.reverse();
      return paged(
        u,
        res,
        rows.map((n) => noteOf(n, user, urls)),
      );
    }
    m = method === 'GET' ? /^issues\/(\d+)\/resource_label_events$/.exec(rest) : null;
    if (m) {
      const iid = issueOr404(Number(m[1])).iid;
      return paged(
        u,
        res,
        labelEvents.filter((e) => e.issue === iid).map((e) => labelEventOf(e, user, urls)),
      );
    }
    if (rest === 'merge_requests') {
      if (method === 'POST') {
        const source = String(body.source_branch ?? '');
        const target = String(body.target_branch ?? '');
        if (!source || !target || !body.title) return fail(400, '400 Bad request - source_branch, target_branch, title are missing');
        if (!(await head(source))) return fail(400, `400 Bad request - source branch ${source} does not exist`);
        if ([...mrs.values()].some((x) => x.source === source && x.target === target && x.state === 'opened'))
          return fail(409, `409 Conflict: Another open merge request already exists for this source branch`);
        const iid = nextMrIid++;
        const mr: MergeRequest = {
          id: nextId++,
          iid,
          title: String(body.title),
          description: String(body.description ?? ''),
          state: 'opened',
          source,
          target,
          author: as,
          sha: '',
          mergeCommitSha: null,
          autoMerge: false,
          approvedBy: [],
          reviewers: [],
          versions: [],
          createdAt: now(),
          updatedAt: now(),
        };
        mrs.set(iid, mr);
        await refresh(mr);
        return send(res, 201, mergeRequestOf(mr, user, urls));
      }
      const state = q('state');
      const rows = [...mrs.values()].filter(
        (x) => (!q('source_branch') || x.source === q('source_branch')) && (!state || state === 'all' || x.state === state),
      );
      for (const x of rows) await refresh(x);
      return paged(
        u,
        res,
        rows.sort((a, b) => b.iid - a.iid).map((x) => mergeRequestOf(x, user, urls)),
      );
    }
    m = /^merge_requests\/(\d+)(\/[a-z_]+)?$/.exec(rest);
    if (m) {
      const mr = mrOr404(Number(m[1]));
      await refresh(mr);
      const sub = m[2] ?? '';
      if (sub === '' && method === 'PUT') {
        if (typeof body.title === 'string') mr.title = body.title;
        if (typeof body.description === 'string') mr.description = body.description;
        if (body.state_event === 'close' && mr.state === 'opened') {
          mr.state = 'closed';
          mr.closedBy = as;
        }
        mr.updatedAt = now();
      }
      if (sub === '/approvals' && method === 'GET') return send(res, 200, approvalsOf(mr, user, urls));
      if (sub === '/versions' && method === 'GET')
        return send(
          res,
          200,
          [...mr.versions].reverse().map((x) => versionOf(x, mr)),
        );
      if (sub === '/reviewers' && method === 'GET')
        return send(
          res,
          200,
          mr.reviewers.map((r) => reviewerOf(r, user, urls, mr.updatedAt)),
        );
      if (sub === '/merge' && method === 'PUT') {
        if (mr.state !== 'opened') return fail(405, '405 Method Not Allowed');
        if (body.sha !== undefined && body.sha !== mr.sha) return fail(409, 'SHA does not match HEAD of source branch');
        mr.autoMerge = body.merge_when_pipeline_succeeds === true || body.auto_merge === true;
        if (!mr.autoMerge) return fail(422, 'Branch cannot be merged');
        await autoMerge();
        return send(res, 200, mergeRequestOf(mr, user, urls));
      }
      if (sub !== '') return fail(404, '404 Not Found');
      return send(res, 200, mergeRequestOf(mr, user, urls));
    }
    if (method === 'GET' && rest === 'pipelines') {
      const rows = pipelines.filter((p) => (!q('sha') || p.sha === q('sha')) && (!q('ref') || p.ref === q('ref')));
      rows.sort((a, b) => (q('sort') === 'asc' ? a.id - b.id : b.id - a.id));
      return paged(
        u,
        res,
        rows.map((p) => pipelineOf(p, urls)),
      );
    }
    m = method === 'GET' ? /^pipelines\/(\d+)\/jobs$/.exec(rest) : null;
    if (m) {
      const p = pipelines.find((x) => x.id === Number(m![1])) ?? fail(404, '404 Not found');
      return paged(
        u,
        res,
        p.jobs.map((j) => jobOf(j, p, urls)),
      );
    }
    m = method === 'GET' ? /^jobs\/(\d+)\/trace$/.exec(rest) : null;
    if (m) {
      const job = pipelines.flatMap((p) => p.jobs).find((j) => j.id === Number(m![1])) ?? fail(404, '404 Not found');
      return send(res, 200, job.trace);
    }
    m = method === 'POST' ? /^statuses\/([0-9a-f]{40})$/.exec(rest) : null;
    if (m) {
      const sha = m[1]!;
      const name = String(body.name ?? body.context ?? 'default');
      const state = String(body.state ?? '');
      if (!['pending', 'running', 'success', 'failed', 'canceled'].includes(state))
        return fail(400, '400 Bad request - state does not have a valid value');
      const ref = String(body.ref ?? '');
      let p = pipelines.filter((x) => x.sha === sha).at(-1);
      if (!p) p = makePipeline(sha, [], ref);
      const job = p.jobs.find((j) => j.name === name);
      if (job) {
        job.status = state;
        job.trace = String(body.description ?? '');
      } else p.jobs.push({ id: nextId++, name, status: state, trace: String(body.description ?? '') });
      p.status = statusOf(p.jobs);
      await autoMerge();
      return send(res, 201, {
        id: nextId++,
        sha,
        ref,
        status: state,
        name,
        description: body.description ?? null,
        target_url: body.target_url ?? null,
      });
    }
    m = method === 'GET' ? /^members\/all\/(\d+)$/.exec(rest) : null;
    if (m) {
      const who = [...users.values()].find((x) => x.id === Number(m![1]));
      const level = who ? (access.get(who.username) ?? 30) : 0;
      if (!who || level === 0) return fail(404, '404 Member Not Found');
      return send(res, 200, memberOf(who, level, urls));
    }
    return fail(404, '404 Not Found');
  }

  /**
   * "Merge when the pipeline succeeds": each merge request set to it whose head's latest
   * pipeline is green is merged — fast-forward, as a project with the fast-forward merge
   * method does (the target moves to exactly the head); one that cannot be is taken off
   * auto-merge. A red pipeline takes it off too, as GitLab does.
   */
  async function autoMerge(): Promise<void> {
    if (autoMergeHeld) return;
    for (const mr of mrs.values()) {
      if (!mr.autoMerge || mr.state !== 'opened') continue;
      await refresh(mr);
      const p = pipelines.filter((x) => x.sha === mr.sha).at(-1);
      if (!p || !['success', 'failed', 'canceled'].includes(p.status)) continue;
      mr.autoMerge = false;
      if (p.status !== 'success') continue;
      const target = await head(mr.target);
      const ff = await git('merge-base', '--is-ancestor', target, mr.sha).then(
        () => true,
        () => false,
      );
      if (!ff) continue;
      await git('update-ref', `refs/heads/${mr.target}`, mr.sha, target);
      mr.state = 'merged';
      mr.mergeCommitSha = null;
      mr.updatedAt = now();
    }
  }

  function makePipeline(sha: string, jobs: Pipeline['jobs'], ref: string): Pipeline {
    const p: Pipeline = { id: nextId++, iid: pipelines.length + 1, sha, ref, status: statusOf(jobs), jobs, createdAt: now() };
    pipelines.push(p);
    return p;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const u = new URL(req.url ?? '/', base);
    const one: Seen = { method, path: `${u.pathname}${u.search}`, status: 0 };
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      const given = req.headers['private-token'] ?? req.headers.authorization?.replace(/^Bearer /, '');
      if (given !== token) throw new HttpError(401, '401 Unauthorized');
      const fi = faults.findIndex((f) => !f.match || f.match.test(`${method} ${u.pathname}`));
      if (fi >= 0) {
        const [f] = faults.splice(fi, 1);
        one.status = f!.status;
        send(res, f!.status, f!.status === 429 ? (f!.message ?? 'Retry later') : { message: f!.message ?? `${f!.status}` }, f!.headers);
        return;
      }
      if (!u.pathname.startsWith('/api/v4/')) throw new HttpError(404, '404 Not Found');
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      await route(method, u, body, res);
      one.status = res.statusCode;
    } catch (err) {
      const status = err instanceof HttpError ? err.status : 500;
      one.status = status;
      if (!res.headersSent)
        send(res, status, { message: err instanceof HttpError ? err.message : `500 Internal Server Error: ${String(err)}` });
    } finally {
      seen.push(one);
      opts.onServed?.(one);
    }
  }

  return {
    url: urls.api,
    path,
    projectId,
    token,
    username,
    seen,
    fault: (...f) => faults.push(...f),
    person: (name, level) => {
      user(name);
      access.set(name, level);
    },
    openIssue: (i) => {
      const iid = nextIid++;
      const author = i.author ?? 'ada';
      user(author);
      issues.set(iid, {
        id: nextId++,
        iid,
        title: i.title,
        description: i.description ?? '',
        state: 'opened',
        labels: [...(i.labels ?? [])],
        author,
        createdAt: now(),
        updatedAt: now(),
      });
      for (const l of i.labels ?? []) label(iid, l, 'add', i.labelledBy ?? author);
      return iid;
    },
    editIssue: (iid, patch) => {
      const i = issueOr404(iid);
      const by = patch.by ?? i.author;
      user(by);
      if (patch.labels) {
        for (const l of patch.labels) if (!i.labels.includes(l)) label(iid, l, 'add', by);
        for (const l of i.labels) if (!patch.labels.includes(l)) label(iid, l, 'remove', by);
        i.labels = [...patch.labels];
      }
      if (patch.state === 'closed' && i.state === 'opened') i.closedBy = by;
      if (patch.state) i.state = patch.state;
      i.updatedAt = now();
    },
    issue: (iid) => issues.get(iid),
    notes: (iid, on = 'Issue') => notes.filter((n) => n.iid === iid && n.on === on),
    note: (iid, n) => {
      user(n.author ?? 'ada');
      notes.push({
        id: nextId++,
        body: n.body,
        author: n.author ?? 'ada',
        system: n.system ?? false,
        on: n.on ?? 'Issue',
        iid,
        createdAt: now(),
      });
    },
    mergeRequests: () => [...mrs.values()],
    approve: (iid, name) => {
      user(name);
      const mr = mrOr404(iid);
      mr.approvedBy.push(name);
      // GitLab 17: approving sets the reviewer's state.
      for (const r of mr.reviewers) if (r.user === name) r.state = 'approved';
    },
    requestChanges: async (iid, name, body) => {
      user(name);
      const mr = mrOr404(iid);
      await refresh(mr);
      notes.push({ id: nextId++, body: 'requested changes', author: name, system: true, on: 'MergeRequest', iid, createdAt: now() });
      mr.reviewers = [...mr.reviewers.filter((r) => r.user !== name), { user: name, state: 'requested_changes' }];
      // Requesting changes takes back the reviewer's approval, as GitLab does.
      mr.approvedBy = mr.approvedBy.filter((u) => u !== name);
      if (body) notes.push({ id: nextId++, body, author: name, system: false, on: 'MergeRequest', iid, createdAt: now() });
    },
    closeMergeRequest: (iid, by, words) => {
      const mr = mrOr404(iid);
      user(by);
      if (words) notes.push({ id: nextId++, body: words, author: by, system: false, on: 'MergeRequest', iid, createdAt: now() });
      mr.state = 'closed';
      mr.closedBy = by;
      mr.updatedAt = now();
    },
    pipeline: (sha, jobs, ref = '') =>
      makePipeline(
        sha,
        jobs.map((j) => ({ id: nextId++, name: j.name, status: j.status, trace: j.trace ?? '' })),
        ref,
      ),
    pipelines: () => pipelines,
    holdAutoMerge: async (held) => {
      autoMergeHeld = held;
      await autoMerge();
    },
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

/** A pipeline's status from its jobs, as GitLab composes it. */
function statusOf(jobs: { status: string }[]): string {
  if (jobs.length === 0) return 'created';
  if (jobs.some((j) => j.status === 'failed')) return 'failed';
  if (jobs.some((j) => j.status === 'running')) return 'running';
  if (jobs.some((j) => j.status === 'pending' || j.status === 'created')) return 'pending';
  if (jobs.some((j) => j.status === 'canceled')) return 'canceled';
  return 'success';
}
