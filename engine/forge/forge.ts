/**
 * What tron needs of a forge (DESIGN §3): issues to take work from, comments to say how
 * it goes, one pull request per block, the reviews and hosted checks on a sha. GitHub is
 * the first implementation (`github.ts`); another forge implements the same interface.
 *
 * Every call that writes is idempotent by lookup: a pull request is found by its head
 * branch before one is opened, and every comment tron posts carries a marker (`marker()`)
 * that is looked for before posting. So a crash at any instant — after the forge acted
 * and before tron recorded it — never opens a second pull request or posts a comment
 * twice: the next try finds the first.
 *
 * Failures are typed (`ForgeError`): a rate limit with the wait the forge asked for, a
 * transient failure (5xx, unreachable) to try again after a backoff, a refusal of the
 * token, or a refusal of the request itself.
 */

export interface ForgeIssue {
  number: number;
  title: string;
  body: string;
  labels: string[];
  state: 'open' | 'closed';
  url: string;
  /** The issue's author, as the forge names them. */
  author: string;
  /** Who closed it, while it is closed (when the forge says). */
  closedBy?: string;
  /** The author's standing on the repository as the forge says it (GitHub's `author_association`). */
  association?: string;
  /** When it last changed (any edit, label or closing): what a verdict about it is cached by. */
  updatedAt?: string;
}

export interface ForgeComment {
  /** The forge's id of the comment (Linear's is a uuid). */
  id: number | string;
  body: string;
  author: string;
  /** How people know the author, where `author` is an id they would not (Linear's display name). */
  authorName?: string;
  url: string;
  /** The author's standing on the repository (GitHub's `author_association`). */
  association?: string;
}

export interface ForgePull {
  number: number;
  /** The forge's global id of the pull request (GitHub's GraphQL node id). */
  nodeId?: string;
  url: string;
  state: 'open' | 'closed';
  merged: boolean;
  head: string;
  headSha: string;
  base: string;
  /**
   * Who closed it, when the forge says so on the pull request itself (GitLab's merge
   * request `closed_by`; '' when it does not name them). Absent (GitHub): a pull request is
   * an issue of the same number, whose `closedBy` says it.
   */
  closedBy?: string;
}

export interface ForgeReview {
  state: 'APPROVED' | 'CHANGES_REQUESTED' | 'COMMENTED' | 'DISMISSED' | 'PENDING';
  body: string;
  author: string;
  /** The sha the review was given on. */
  sha: string;
  /** The author's standing on the repository (GitHub's `author_association`). */
  association?: string;
}

/**
 * A check that must be green: its name, and the app that must report it (GitHub's app id,
 * or its slug). Without an app, every app's latest run of the name counts, and any red wins.
 */
export interface RequiredCheck {
  name: string;
  app?: number | string;
}

/** A person's role on the repository, as the forge grants it (GitHub's `role_name`), lowest first. */
export const ROLES = ['none', 'read', 'triage', 'write', 'maintain', 'admin'] as const;
export type ForgeRole = (typeof ROLES)[number];

/** Who last set or took off a label on an issue (the forge's issue events), and which. */
export interface LabelChange {
  action: 'labeled' | 'unlabeled';
  actor: string;
}

/** One required check on a sha: green, red (with what it said), or not (yet) reported. */
export interface ForgeCheck {
  name: string;
  state: 'success' | 'failure' | 'pending' | 'missing';
  /** A red check's own words: its output's summary and text, or its description. */
  text?: string;
  url?: string;
  /** Apps whose runs of this name were passed over: the check counts only from the app it names. */
  ignored?: string[];
}

/**
 * Where a pull request is in the forge's merge queue: not there, waiting in it, merged by
 * it (`commit`: the commit the base branch moved to), or taken out of it (`reason`).
 */
export type ForgeQueue =
  | { state: 'none' }
  | { state: 'queued'; position?: number }
  | { state: 'merged'; commit: string }
  | { state: 'removed'; reason: string };

/** Issues with a label; `unchanged` when the forge says nothing changed since `etag`. */
export type IssueList = { issues: ForgeIssue[]; etag?: string } | 'unchanged';

/**
 * Where issues come from and what tron tells them: what intake (sync.ts, watch.ts) and the
 * issues' telling (progress.ts) need. Every forge is one; so is Linear (linear.ts), which
 * takes issues in but lands nothing: its code lands through the remote or the forge.
 */
export interface IssueTracker {
  /** What its issues are named by in messages: "owner/name" (GitLab: the project's path or id; Linear: its team). */
  readonly repo: string;
  /** What the block ids of its issues start with: "gh" (GitHub, the default), "gl" (GitLab), "lin-<team>" (Linear). */
  readonly issuePrefix?: string;
  /** Open issues carrying `label` (not pull requests), oldest first. */
  listIssues(label: string, etag?: string): Promise<IssueList>;
  issue(number: number): Promise<ForgeIssue | undefined>;
  comments(issue: number): Promise<ForgeComment[]>;
  comment(issue: number, body: string): Promise<ForgeComment>;
  /** Says the issue is done: closed (a forge), or moved to its team's completed state (Linear). */
  closeIssue(issue: number): Promise<void>;
  /** The account the token speaks as: tron's comments are the ones it posted. */
  self(): Promise<string>;
}

export interface Forge extends IssueTracker {
  /** "owner/name" (GitLab: the project's path or id). */
  readonly repo: string;
  /** A pull request's comments where they are not its issue's (GitLab's merge request notes); absent: `comments(pull)`. */
  pullComments?(pull: number): Promise<ForgeComment[]>;
  /** The pull request whose head is `branch` (open first, else the latest closed one). */
  findPull(branch: string): Promise<ForgePull | undefined>;
  openPull(p: { head: string; base: string; title: string; body: string }): Promise<ForgePull>;
  updatePull(number: number, p: { title: string; body: string }): Promise<void>;
  pull(number: number): Promise<ForgePull>;
  reviews(pull: number): Promise<ForgeReview[]>;
  /** The checks `branch`'s protection requires, each with the app it names (empty when it has none). */
  requiredChecks(branch: string): Promise<RequiredCheck[]>;
  /** The state on `sha` of each required check: a check run (of its app, when one is named) or a commit status of that name. */
  checks(sha: string, required: readonly RequiredCheck[]): Promise<ForgeCheck[]>;
  /** `login`'s role on the repository. */
  role(login: string): Promise<ForgeRole>;
  /** The last change of `label` on `issue` (who added or took it off), if the forge recorded one. */
  labelChange(issue: number, label: string): Promise<LabelChange | undefined>;
  /** Puts pull request `pull` in its base branch's merge queue, only while its head is `headSha`. */
  enqueue(pull: ForgePull, headSha: string): Promise<void>;
  /** Where pull request `number` is in the merge queue. */
  queueState(number: number): Promise<ForgeQueue>;
}

export type ForgeErrorKind = 'rate_limited' | 'transient' | 'auth' | 'refused';

export class ForgeError extends Error {
  constructor(
    readonly kind: ForgeErrorKind,
    message: string,
    /** How long the forge asked tron to wait (rate limits), or undefined. */
    readonly retryAfterMs?: number,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ForgeError';
  }
}

/** The hidden line that makes a comment findable: one per (block, kind, key). */
export function marker(block: string, kind: string, key = ''): string {
  return `<!-- tron:${block}:${kind}${key ? `:${key}` : ''} -->`;
}

/** Whether `c` is one of tron's own comments: posted by the token's account and marked. Never the text alone. */
export function isOwnComment(c: ForgeComment, self: string): boolean {
  return c.author === self && c.body.includes('<!-- tron:');
}

/**
 * Posts `body` (with `mark` appended) on `issue` unless a comment with that mark, posted
 * by tron's own account, is already there: the id of the comment that says it, and
 * whether it is new. Anyone can write the marker; only tron's account makes it tron's.
 */
export async function commentOnce(
  forge: IssueTracker,
  issue: number,
  mark: string,
  body: string,
): Promise<{ id: number | string; url: string; posted: boolean }> {
  const self = await forge.self();
  const found = (await forge.comments(issue)).find((c) => c.author === self && c.body.includes(mark));
  if (found) return { id: found.id, url: found.url, posted: false };
  const c = await forge.comment(issue, `${body}\n\n${mark}`);
  return { id: c.id, url: c.url, posted: true };
}

/** Finds the pull request of `head` (open) and updates it, or opens it: never two. */
export async function upsertPull(
  forge: Forge,
  p: { head: string; base: string; title: string; body: string },
): Promise<{ pull: ForgePull; opened: boolean }> {
  const found = await forge.findPull(p.head);
  if (found && found.state === 'open') {
    await forge.updatePull(found.number, { title: p.title, body: p.body });
    return { pull: found, opened: false };
  }
  // A closed, unmerged pull was closed by a person: that is their answer, never reopened.
  // A merged one (the merge queue merged it) is the block's landing: never a second pull.
  if (found) return { pull: found, opened: false };
  return { pull: await forge.openPull(p), opened: true };
}
