/**
 * The JSON a GitLab REST v4 server answers with, for the test GitLab server: the shapes
 * GitLab's API documentation gives for a user (basic), issue, note, resource label event,
 * merge request, merge request approvals, reviewer, pipeline, job, project member and
 * project — trimmed to the fields a client reads, with GitLab's names and states
 * (`opened`, not `open`; a merge request's `sha`; access levels as numbers).
 */

export interface User {
  id: number;
  username: string;
}

export interface Issue {
  id: number;
  iid: number;
  title: string;
  description: string;
  state: 'opened' | 'closed';
  labels: string[];
  author: string;
  closedBy?: string;
  createdAt: string;
  updatedAt: string;
}

export interface Note {
  id: number;
  body: string;
  author: string;
  system: boolean;
  on: 'Issue' | 'MergeRequest';
  iid: number;
  createdAt: string;
}

export interface LabelEvent {
  id: number;
  issue: number;
  label: string;
  action: 'add' | 'remove';
  user: string;
  createdAt: string;
}

export interface MergeRequest {
  id: number;
  iid: number;
  title: string;
  description: string;
  state: 'opened' | 'closed' | 'merged';
  source: string;
  target: string;
  author: string;
  /** The source branch's head when it was last read (the server reads git before answering). */
  sha: string;
  mergeCommitSha: string | null;
  autoMerge: boolean;
  closedBy?: string;
  approvedBy: string[];
  reviewers: { user: string; state: 'unreviewed' | 'reviewed' | 'requested_changes' | 'approved' }[];
  /** Each head the source branch had, as GitLab's merge request diff versions record it, newest last. */
  versions: { id: number; sha: string; createdAt: string }[];
  createdAt: string;
  updatedAt: string;
}

export interface Job {
  id: number;
  name: string;
  status: string;
  trace: string;
}

export interface Pipeline {
  id: number;
  iid: number;
  sha: string;
  ref: string;
  status: string;
  jobs: Job[];
  createdAt: string;
}

export interface Urls {
  api: string;
  web: string;
  projectId: number;
}

export function userOf(u: User, urls: Urls) {
  return {
    id: u.id,
    username: u.username,
    name: u.username,
    state: 'active',
    locked: false,
    avatar_url: null,
    web_url: `${urls.web}/${u.username}`,
  };
}

export function issueOf(i: Issue, users: (name: string) => User, urls: Urls) {
  return {
    id: i.id,
    iid: i.iid,
    project_id: urls.projectId,
    title: i.title,
    description: i.description,
    state: i.state,
    created_at: i.createdAt,
    updated_at: i.updatedAt,
    closed_at: i.state === 'closed' ? i.updatedAt : null,
    closed_by: i.state === 'closed' && i.closedBy ? userOf(users(i.closedBy), urls) : null,
    labels: i.labels,
    milestone: null,
    assignees: [],
    assignee: null,
    author: userOf(users(i.author), urls),
    type: 'ISSUE',
    issue_type: 'issue',
    user_notes_count: 0,
    merge_requests_count: 0,
    upvotes: 0,
    downvotes: 0,
    due_date: null,
    confidential: false,
    discussion_locked: null,
    web_url: `${urls.web}/-/issues/${i.iid}`,
    references: { short: `#${i.iid}`, relative: `#${i.iid}`, full: `acme/app#${i.iid}` },
    _links: {
      self: `${urls.api}/projects/${urls.projectId}/issues/${i.iid}`,
      notes: `${urls.api}/projects/${urls.projectId}/issues/${i.iid}/notes`,
      award_emoji: `${urls.api}/projects/${urls.projectId}/issues/${i.iid}/award_emoji`,
      project: `${urls.api}/projects/${urls.projectId}`,
    },
  };
}

export function noteOf(n: Note, users: (name: string) => User, urls: Urls) {
  return {
    id: n.id,
    type: null,
    body: n.body,
    attachment: null,
    author: userOf(users(n.author), urls),
    created_at: n.createdAt,
    updated_at: n.createdAt,
    system: n.system,
    noteable_id: n.iid,
    noteable_type: n.on,
    project_id: urls.projectId,
    noteable_iid: n.iid,
    resolvable: false,
    confidential: false,
    internal: false,
  };
}

export function labelEventOf(e: LabelEvent, users: (name: string) => User, urls: Urls) {
  return {
    id: e.id,
    user: userOf(users(e.user), urls),
    created_at: e.createdAt,
    resource_type: 'Issue',
    resource_id: e.issue,
    label: { id: labelId(e.label), name: e.label, color: '#428BCA', description: null },
    action: e.action,
  };
}

function labelId(name: string): number {
  let h = 7;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) % 100_000;
  return h;
}

export function mergeRequestOf(m: MergeRequest, users: (name: string) => User, urls: Urls) {
  return {
    id: m.id,
    iid: m.iid,
    project_id: urls.projectId,
    title: m.title,
    description: m.description,
    state: m.state,
    created_at: m.createdAt,
    updated_at: m.updatedAt,
    merged_at: m.state === 'merged' ? m.updatedAt : null,
    closed_at: m.state === 'closed' ? m.updatedAt : null,
    closed_by: m.state === 'closed' && m.closedBy ? userOf(users(m.closedBy), urls) : null,
    target_branch: m.target,
    source_branch: m.source,
    source_project_id: urls.projectId,
    target_project_id: urls.projectId,
    author: userOf(users(m.author), urls),
    reviewers: m.reviewers.map((r) => userOf(users(r.user), urls)),
    labels: [],
    draft: false,
    work_in_progress: false,
    merge_when_pipeline_succeeds: m.autoMerge,
    detailed_merge_status: m.state === 'opened' ? 'mergeable' : 'not_open',
    sha: m.sha,
    merge_commit_sha: m.mergeCommitSha,
    squash_commit_sha: null,
    squash: false,
    web_url: `${urls.web}/-/merge_requests/${m.iid}`,
    references: { short: `!${m.iid}`, relative: `!${m.iid}`, full: `acme/app!${m.iid}` },
  };
}

export function approvalsOf(m: MergeRequest, users: (name: string) => User, urls: Urls) {
  return {
    id: m.id,
    iid: m.iid,
    project_id: urls.projectId,
    title: m.title,
    description: m.description,
    state: m.state,
    created_at: m.createdAt,
    updated_at: m.updatedAt,
    merge_status: 'can_be_merged',
    approved: m.approvedBy.length > 0,
    approvals_required: 0,
    approvals_left: 0,
    approved_by: m.approvedBy.map((u) => ({ user: userOf(users(u), urls) })),
  };
}

export function reviewerOf(r: MergeRequest['reviewers'][number], users: (name: string) => User, urls: Urls, at: string) {
  return { user: userOf(users(r.user), urls), state: r.state, created_at: at };
}

export function versionOf(v: MergeRequest['versions'][number], m: MergeRequest) {
  return {
    id: v.id,
    head_commit_sha: v.sha,
    base_commit_sha: v.sha,
    start_commit_sha: v.sha,
    created_at: v.createdAt,
    merge_request_id: m.id,
    state: 'collected',
    real_size: '1',
    patch_id_sha: v.sha,
  };
}

export function pipelineOf(p: Pipeline, urls: Urls) {
  return {
    id: p.id,
    iid: p.iid,
    project_id: urls.projectId,
    sha: p.sha,
    ref: p.ref,
    status: p.status,
    source: 'push',
    created_at: p.createdAt,
    updated_at: p.createdAt,
    web_url: `${urls.web}/-/pipelines/${p.id}`,
  };
}

export function jobOf(j: Job, p: Pipeline, urls: Urls) {
  return {
    id: j.id,
    status: j.status,
    stage: 'test',
    name: j.name,
    ref: p.ref,
    tag: false,
    coverage: null,
    allow_failure: false,
    created_at: p.createdAt,
    started_at: p.createdAt,
    finished_at: p.createdAt,
    duration: 1,
    failure_reason: j.status === 'failed' ? 'script_failure' : undefined,
    commit: { id: p.sha, short_id: p.sha.slice(0, 8) },
    pipeline: { id: p.id, project_id: urls.projectId, ref: p.ref, sha: p.sha, status: p.status },
    web_url: `${urls.web}/-/jobs/${j.id}`,
  };
}

export function memberOf(u: User, accessLevel: number, urls: Urls) {
  return { ...userOf(u, urls), access_level: accessLevel, created_at: '2026-01-01T00:00:00.000Z', expires_at: null };
}
