/**
 * The test GitHub server's records, and the JSON it answers with for each: the fields of
 * GitHub's OpenAPI schemas (`issue`, `issue-comment`, `pull-request`, `pull-request-review`,
 * `check-run`, `simple-commit-status`, `combined-commit-status`) that a client reads, with
 * their names and types as published. Each builder is checked against the schema's type in
 * `@octokit/openapi-types` (the same description, compiled): a renamed or retyped field
 * does not compile.
 */
import type { components } from '@octokit/openapi-types';

type S = components['schemas'];

export interface Urls {
  api: string;
  html: string;
  owner: string;
  repo: string;
}

export interface Issue {
  id: number;
  number: number;
  title: string;
  body: string | null;
  state: 'open' | 'closed';
  state_reason: string | null;
  labels: { id: number; name: string; color: string; description: string | null }[];
  user: string;
  comments: number;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  /** Who closed it (GitHub's `closed_by`), while it is closed. */
  closed_by?: string | null;
  /** Whether this issue is a pull request's (GitHub lists pulls among issues). */
  pull: boolean;
}

export interface Comment {
  id: number;
  issue: number;
  body: string;
  user: string;
  created_at: string;
  updated_at: string;
}

export interface Pull {
  id: number;
  number: number;
  state: 'open' | 'closed';
  head: { ref: string; sha: string };
  base: { ref: string; sha: string };
  merged: boolean;
  merged_at: string | null;
  closed_at: string | null;
  merge_commit_sha: string | null;
  draft: boolean;
}

export interface Review {
  id: number;
  pull: number;
  state: 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'DISMISSED';
  body: string;
  user: string;
  commit_id: string;
  submitted_at: string;
}

/** A person's standing as GitHub's `author_association` says it. */
export type Association = S['author-association'];

/** A GitHub App, as a check run names the app that reported it. */
export interface App {
  id: number;
  slug: string;
}

/** A label put on or taken off an issue, and by whom (an issue event). */
export interface LabelEvent {
  id: number;
  issue: number;
  event: 'labeled' | 'unlabeled';
  label: { name: string; color: string };
  actor: string;
  created_at: string;
}

export interface CheckRun {
  app: App;
  id: number;
  name: string;
  head_sha: string;
  status: 'queued' | 'in_progress' | 'completed';
  conclusion: 'success' | 'failure' | 'neutral' | 'cancelled' | 'skipped' | 'timed_out' | 'action_required' | null;
  output: { title: string | null; summary: string | null; text: string | null };
  started_at: string;
  completed_at: string | null;
}

export interface Status {
  id: number;
  sha: string;
  context: string;
  state: 'error' | 'failure' | 'pending' | 'success';
  description: string | null;
  target_url: string | null;
  created_at: string;
}

function userOf(u: Urls, login: string): S['simple-user'] {
  const url = `${u.api}/users/${login}`;
  return {
    login,
    id: login.length * 1000 + login.charCodeAt(0),
    node_id: `U_${login}`,
    avatar_url: `${u.html}/avatars/${login}`,
    gravatar_id: null,
    url,
    html_url: `${u.html}/${login}`,
    followers_url: `${url}/followers`,
    following_url: `${url}/following{/other_user}`,
    gists_url: `${url}/gists{/gist_id}`,
    starred_url: `${url}/starred{/owner}{/repo}`,
    subscriptions_url: `${url}/subscriptions`,
    organizations_url: `${url}/orgs`,
    repos_url: `${url}/repos`,
    events_url: `${url}/events{/privacy}`,
    received_events_url: `${url}/received_events`,
    type: login.endsWith('-bot') ? 'Bot' : 'User',
    site_admin: false,
  };
}

const repoPath = (u: Urls) => `${u.api}/repos/${u.owner}/${u.repo}`;

export function issueOf(u: Urls, i: Issue, association: Association) {
  return {
    id: i.id,
    node_id: `I_${i.id}`,
    url: `${repoPath(u)}/issues/${i.number}`,
    repository_url: repoPath(u),
    comments_url: `${repoPath(u)}/issues/${i.number}/comments`,
    html_url: `${u.html}/${u.owner}/${u.repo}/${i.pull ? 'pull' : 'issues'}/${i.number}`,
    number: i.number,
    state: i.state,
    state_reason: i.state_reason as S['issue']['state_reason'],
    title: i.title,
    body: i.body,
    user: userOf(u, i.user),
    labels: i.labels.map((l) => ({
      ...l,
      node_id: `L_${l.id}`,
      url: `${repoPath(u)}/labels/${encodeURIComponent(l.name)}`,
      default: false,
    })),
    assignee: null,
    assignees: [],
    milestone: null,
    locked: false,
    comments: i.comments,
    closed_at: i.closed_at,
    closed_by: i.state === 'closed' && i.closed_by ? userOf(u, i.closed_by) : null,
    created_at: i.created_at,
    updated_at: i.updated_at,
    author_association: association,
    ...(i.pull && {
      pull_request: {
        url: `${repoPath(u)}/pulls/${i.number}`,
        html_url: `${u.html}/${u.owner}/${u.repo}/pull/${i.number}`,
        diff_url: null,
        patch_url: null,
      },
    }),
  } satisfies Partial<S['issue']>;
}

export function commentOf(u: Urls, c: Comment, association: Association) {
  return {
    id: c.id,
    node_id: `IC_${c.id}`,
    url: `${repoPath(u)}/issues/comments/${c.id}`,
    html_url: `${u.html}/${u.owner}/${u.repo}/issues/${c.issue}#issuecomment-${c.id}`,
    issue_url: `${repoPath(u)}/issues/${c.issue}`,
    body: c.body,
    user: userOf(u, c.user),
    created_at: c.created_at,
    updated_at: c.updated_at,
    author_association: association,
  } satisfies Partial<S['issue-comment']>;
}

export function pullOf(u: Urls, p: Pull, i: Issue, association: Association) {
  const branch = (b: { ref: string; sha: string }) => ({ label: `${u.owner}:${b.ref}`, ref: b.ref, sha: b.sha, user: userOf(u, u.owner) });
  return {
    id: p.id,
    node_id: `PR_${p.id}`,
    url: `${repoPath(u)}/pulls/${p.number}`,
    html_url: `${u.html}/${u.owner}/${u.repo}/pull/${p.number}`,
    issue_url: `${repoPath(u)}/issues/${p.number}`,
    number: p.number,
    state: p.state,
    locked: false,
    title: i.title,
    body: i.body,
    user: userOf(u, i.user),
    labels: [],
    created_at: i.created_at,
    updated_at: i.updated_at,
    closed_at: p.closed_at,
    merged_at: p.merged_at,
    merge_commit_sha: p.merge_commit_sha,
    head: branch(p.head),
    base: branch(p.base),
    draft: p.draft,
    merged: p.merged,
    author_association: association,
  } satisfies Partial<Omit<S['pull-request'], 'head' | 'base'>> & { head: unknown; base: unknown };
}

export function reviewOf(u: Urls, r: Review, association: Association) {
  return {
    id: r.id,
    node_id: `PRR_${r.id}`,
    user: userOf(u, r.user),
    body: r.body,
    state: r.state,
    html_url: `${u.html}/${u.owner}/${u.repo}/pull/${r.pull}#pullrequestreview-${r.id}`,
    pull_request_url: `${repoPath(u)}/pulls/${r.pull}`,
    submitted_at: r.submitted_at,
    commit_id: r.commit_id,
    author_association: association,
  } satisfies Partial<S['pull-request-review']>;
}

export function checkRunOf(u: Urls, c: CheckRun) {
  return {
    id: c.id,
    node_id: `CR_${c.id}`,
    head_sha: c.head_sha,
    external_id: null,
    url: `${repoPath(u)}/check-runs/${c.id}`,
    html_url: `${u.html}/${u.owner}/${u.repo}/runs/${c.id}`,
    details_url: `${u.html}/${u.owner}/${u.repo}/runs/${c.id}`,
    status: c.status,
    conclusion: c.conclusion,
    started_at: c.started_at,
    completed_at: c.completed_at,
    output: { ...c.output, annotations_count: 0, annotations_url: `${repoPath(u)}/check-runs/${c.id}/annotations` },
    name: c.name,
    pull_requests: [],
    app: appOf(u, c.app),
  } satisfies Partial<S['check-run']>;
}

/** A GitHub App as GitHub describes one (`integration`). */
function appOf(u: Urls, a: App): NonNullable<S['integration']> {
  return {
    id: a.id,
    slug: a.slug,
    node_id: `A_${a.id}`,
    owner: userOf(u, u.owner),
    name: a.slug,
    description: null,
    external_url: `${u.html}/apps/${a.slug}`,
    html_url: `${u.html}/apps/${a.slug}`,
    created_at: '2020-01-01T00:00:00Z',
    updated_at: '2020-01-01T00:00:00Z',
    permissions: { checks: 'write', metadata: 'read' },
    events: ['check_run'],
  };
}

export function labelEventOf(u: Urls, e: LabelEvent) {
  return {
    id: e.id,
    node_id: `LE_${e.id}`,
    url: `${repoPath(u)}/issues/events/${e.id}`,
    actor: userOf(u, e.actor),
    event: e.event,
    commit_id: null,
    commit_url: null,
    created_at: e.created_at,
    performed_via_github_app: null,
    label: e.label,
  } satisfies S['labeled-issue-event'];
}

/** `GET /user`: the account the token speaks as. */
export function selfOf(u: Urls, login: string) {
  return {
    ...userOf(u, login),
    name: login,
    company: null,
    blog: null,
    location: null,
    email: null,
    hireable: null,
    bio: null,
    public_repos: 0,
    public_gists: 0,
    followers: 0,
    following: 0,
    created_at: '2020-01-01T00:00:00Z',
    updated_at: '2020-01-01T00:00:00Z',
  } satisfies Partial<S['public-user']>;
}

/** GitHub's older `permission` word for each role (maintain reads as write, triage as read). */
const PERMISSION = { admin: 'admin', maintain: 'write', write: 'write', triage: 'read', read: 'read', none: 'none' } as const;
export type Role = keyof typeof PERMISSION;

/** `GET /repos/{o}/{r}/collaborators/{user}/permission`. */
export function permissionOf(u: Urls, login: string, role: Role) {
  const at = (r: Role) =>
    ['none', 'read', 'triage', 'write', 'maintain', 'admin'].indexOf(role) >=
    ['none', 'read', 'triage', 'write', 'maintain', 'admin'].indexOf(r);
  return {
    permission: PERMISSION[role],
    role_name: role,
    user: {
      ...userOf(u, login),
      permissions: { pull: at('read'), triage: at('triage'), push: at('write'), maintain: at('maintain'), admin: at('admin') },
      role_name: role,
    },
  } satisfies S['repository-collaborator-permission'];
}

export function statusOf(u: Urls, s: Status) {
  return {
    id: s.id,
    node_id: `SC_${s.id}`,
    url: `${repoPath(u)}/statuses/${s.sha}`,
    state: s.state,
    description: s.description,
    target_url: s.target_url,
    context: s.context,
    avatar_url: null,
    created_at: s.created_at,
    updated_at: s.created_at,
  } satisfies Partial<S['simple-commit-status']>;
}

/** failure if any context is error or failure; pending if none, or one is pending; success otherwise (GitHub's rule). */
export function combinedStatusOf(u: Urls, sha: string, statuses: Status[]) {
  const state = statuses.some((s) => s.state === 'error' || s.state === 'failure')
    ? 'failure'
    : statuses.length === 0 || statuses.some((s) => s.state === 'pending')
      ? 'pending'
      : 'success';
  return {
    state,
    statuses: statuses.map((s) => statusOf(u, s)),
    sha,
    total_count: statuses.length,
    commit_url: `${repoPath(u)}/commits/${sha}`,
    url: `${repoPath(u)}/commits/${sha}/status`,
  } satisfies Partial<S['combined-commit-status']>;
}
