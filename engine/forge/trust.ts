/**
 * Who tron listens to on the forge (issue #44): anyone can review a public pull request,
 * comment on an issue, or — with an installed app — report a check run. What tron acts
 * on must come from people the team trusts: `[forge] trusted` — "write" (the default:
 * write, maintain or admin on the repository), "maintain" (maintain or admin), or a list
 * of logins. The forge's `author_association` rules a stranger out without a call (NONE,
 * a contributor, a first-timer); anyone else's role is asked of the forge
 * (`GET /repos/{o}/{r}/collaborators/{user}/permission`), and kept a few minutes.
 *
 * `TrustingForge` wraps a forge so that everything the engine reads of people passes
 * through that filter — reviews, comments (the words a closing is given with), who
 * closed an issue or a pull request, who put the intake label on or took it off — and
 * notes, once per person, kind and issue, what it ignored (`forge.ignored`). tron's own
 * comments are the ones its token's account posted (`Forge.self`), never text alone.
 * Which app a required check must come from is the forge client's (`checks`); the runs
 * of other apps it passed over are noted here too.
 */
import type { EventBody } from '../core/events.ts';
import type { Forge, ForgeCheck, ForgeComment, ForgeIssue, ForgePull, ForgeReview, ForgeRole, IssueList, RequiredCheck } from './forge.ts';
import { ROLES } from './forge.ts';

/** `[forge] trusted`: a least role on the repository, or exactly these logins. */
export type Trusted = 'write' | 'maintain' | readonly string[];

/** Associations that never hold write access: a stranger, whoever they are, without asking. */
const STRANGERS = new Set(['NONE', 'FIRST_TIMER', 'FIRST_TIME_CONTRIBUTOR', 'CONTRIBUTOR', 'MANNEQUIN']);

/** How long a person's role, once asked, is believed (a role taken away counts within this). */
const ROLE_TTL_MS = 5 * 60_000;

export type IgnoredWhat = 'review' | 'comment' | 'closing' | 'label' | 'check';
type Ignored = Extract<EventBody, { type: 'forge.ignored' }>;

/** Whom the team trusts, asked of the forge and kept a while; and what was ignored, noted once. */
export class People {
  private readonly roles = new Map<string, { at: number; trusted: Promise<boolean> }>();
  private readonly noted = new Set<string>();
  private pending: Ignored[] = [];
  private sink: { record: (body: EventBody) => boolean; print: (line: string) => void } | undefined;

  constructor(
    private readonly forge: Forge,
    private readonly trusted: Trusted,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether `login` (with the forge's association for them, when known) is someone the team trusts. */
  async trusts(login: string, association?: string): Promise<boolean> {
    if (!login) return false;
    if (typeof this.trusted !== 'string') return this.trusted.includes(login);
    if (association !== undefined && STRANGERS.has(association)) return false;
    const known = this.roles.get(login);
    if (known && this.now() - known.at < ROLE_TTL_MS) return known.trusted;
    const least = ROLES.indexOf(this.trusted);
    const trusted = this.forge.role(login).then((r: ForgeRole) => ROLES.indexOf(r) >= least);
    this.roles.set(login, { at: this.now(), trusted });
    trusted.catch(() => this.roles.delete(login));
    return trusted;
  }

  /** Notes, once per person, kind and issue, that something of theirs was ignored. */
  ignore(x: { who: string; what: IgnoredWhat; issue?: number; why: string }): void {
    const key = `${x.who}\u0000${x.what}\u0000${x.issue ?? ''}`;
    if (this.noted.has(key)) return;
    this.noted.add(key);
    const body: Ignored = { type: 'forge.ignored', who: x.who, what: x.what, ...(x.issue !== undefined && { issue: x.issue }), why: x.why };
    if (this.sink) this.tell(body);
    else this.pending.push(body);
  }

  /** Where notes go: the run's log and its console (until then they wait). */
  noteTo(record: (body: EventBody) => boolean, print: (line: string) => void): void {
    this.sink = { record, print };
    for (const body of this.pending.splice(0)) this.tell(body);
  }

  private tell(body: Ignored): void {
    this.sink!.record(body);
    this.sink!.print(`tron: ignored on the forge: ${body.why}`);
  }
}

/** The forge as the engine reads it: only what trusted people said counts (see the file's comment). */
export class TrustingForge implements Forge {
  readonly repo: string;
  readonly issuePrefix: string | undefined;
  readonly people: People;
  /** The intake label, once an issue list was read with it: who took it off an issue is checked too. */
  private label: string | undefined;
  /** An issue's labelling verdict, by its number and last change. */
  private readonly labelled = new Map<string, Promise<boolean>>();

  constructor(
    private readonly inner: Forge,
    trusted: Trusted,
    now: () => number = Date.now,
  ) {
    this.repo = inner.repo;
    this.issuePrefix = inner.issuePrefix;
    this.people = new People(inner, trusted, now);
  }

  async listIssues(label: string, etag?: string): Promise<IssueList> {
    this.label = label;
    const got = await this.inner.listIssues(label, etag);
    if (got === 'unchanged') return got;
    const kept: ForgeIssue[] = [];
    for (const issue of got.issues) if (await this.labelledByTrusted(issue, label)) kept.push(issue);
    return { ...got, issues: kept };
  }

  /** Whether the label on `issue` was put there by someone trusted (without an event: its author, who set it on opening). */
  private labelledByTrusted(issue: ForgeIssue, label: string): Promise<boolean> {
    const key = `${issue.number}@${issue.updatedAt ?? ''}`;
    let verdict = this.labelled.get(key);
    if (!verdict) {
      verdict = (async () => {
        const change = await this.inner.labelChange(issue.number, label);
        const who = change?.action === 'labeled' ? change.actor : issue.author;
        if (await this.people.trusts(who, who === issue.author ? issue.association : undefined)) return true;
        this.people.ignore({
          who,
          what: 'label',
          issue: issue.number,
          why: `${who} labelled issue #${issue.number} ${label}, but is not someone [forge] trusted names: it is not taken in`,
        });
        return false;
      })();
      // Only a yes is kept (until the issue changes): a no is asked again, so a trusted person's labelling counts at once.
      verdict.then(
        (yes) => {
          if (!yes) this.labelled.delete(key);
        },
        () => this.labelled.delete(key),
      );
      if (issue.updatedAt) this.labelled.set(key, verdict);
    }
    return verdict;
  }

  async issue(number: number): Promise<ForgeIssue | undefined> {
    let issue = await this.inner.issue(number);
    if (!issue) return issue;
    if (issue.state === 'closed' && issue.closedBy && !(await this.mayClose(issue.closedBy, issue.author))) {
      this.people.ignore({
        who: issue.closedBy,
        what: 'closing',
        issue: number,
        why: `${issue.closedBy} closed #${number}, but is not someone [forge] trusted names nor its author: tron goes on as if it were open`,
      });
      const { closedBy: _, ...open } = issue;
      issue = { ...open, state: 'open' };
    }
    // Open (or as good as open): the label, too, counts as its last trusted change left it.
    const label = this.label;
    if (issue.state === 'open' && label && !issue.labels.includes(label)) {
      const change = await this.inner.labelChange(number, label);
      if (change?.action === 'unlabeled' && !(await this.people.trusts(change.actor))) {
        this.people.ignore({
          who: change.actor,
          what: 'label',
          issue: number,
          why: `${change.actor} took the label ${label} off issue #${number}, but is not someone [forge] trusted names: tron goes on as if it were there`,
        });
        return { ...issue, labels: [...issue.labels, label] };
      }
    }
    return issue;
  }

  /** A closing counts from someone trusted, tron itself, or the author (the person who asked may withdraw the ask). */
  private async mayClose(who: string, author: string): Promise<boolean> {
    return who === author || who === (await this.inner.self()) || (await this.people.trusts(who));
  }

  /** tron's own comments and trusted people's: a stranger's are not read (one carrying tron's marker is noted). */
  comments(issue: number): Promise<ForgeComment[]> {
    return this.trustedComments(issue, this.inner.comments(issue));
  }

  /** A pull request's comments, as `comments` filters them. */
  pullComments(pull: number): Promise<ForgeComment[]> {
    return this.trustedComments(pull, this.inner.pullComments ? this.inner.pullComments(pull) : this.inner.comments(pull));
  }

  private async trustedComments(issue: number, all: Promise<ForgeComment[]>): Promise<ForgeComment[]> {
    const self = await this.inner.self();
    const kept: ForgeComment[] = [];
    for (const c of await all) {
      if (c.author === self || (await this.people.trusts(c.author, c.association))) kept.push(c);
      else if (c.body.includes('<!-- tron:'))
        this.people.ignore({
          who: c.author,
          what: 'comment',
          issue,
          why: `${c.author} wrote a comment on #${issue} carrying tron's marker; tron's comments are only those its own account (${self}) posts`,
        });
    }
    return kept;
  }

  comment(issue: number, body: string): Promise<ForgeComment> {
    return this.inner.comment(issue, body);
  }

  closeIssue(issue: number): Promise<void> {
    return this.inner.closeIssue(issue);
  }

  async findPull(branch: string): Promise<ForgePull | undefined> {
    const pull = await this.inner.findPull(branch);
    return pull && this.closedByTrusted(pull);
  }

  openPull(p: { head: string; base: string; title: string; body: string }): Promise<ForgePull> {
    return this.inner.openPull(p);
  }

  updatePull(number: number, p: { title: string; body: string }): Promise<void> {
    return this.inner.updatePull(number, p);
  }

  async pull(number: number): Promise<ForgePull> {
    return this.closedByTrusted(await this.inner.pull(number));
  }

  /** A pull request closed (not merged) by someone not trusted is still open to tron. */
  private async closedByTrusted(pull: ForgePull): Promise<ForgePull> {
    if (pull.state !== 'closed' || pull.merged) return pull;
    // GitLab names the closer on the merge request (tron is its author); GitHub on the pull request's issue.
    const issue = pull.closedBy !== undefined ? { closedBy: pull.closedBy, author: '' } : await this.inner.issue(pull.number);
    if (!issue?.closedBy || (await this.mayClose(issue.closedBy, issue.author))) return pull;
    this.people.ignore({
      who: issue.closedBy,
      what: 'closing',
      issue: pull.number,
      why: `${issue.closedBy} closed pull request #${pull.number}, but is not someone [forge] trusted names: tron goes on as if it were open`,
    });
    return { ...pull, state: 'open' };
  }

  /** Reviews by trusted people only: a stranger's approval or requested changes count for nothing. */
  async reviews(pull: number): Promise<ForgeReview[]> {
    const kept: ForgeReview[] = [];
    for (const v of await this.inner.reviews(pull)) {
      if (await this.people.trusts(v.author, v.association)) kept.push(v);
      else if (v.state === 'APPROVED' || v.state === 'CHANGES_REQUESTED')
        this.people.ignore({
          who: v.author,
          what: 'review',
          issue: pull,
          why: `${v.author} ${v.state === 'APPROVED' ? 'approved' : 'requested changes on'} pull request #${pull}, but is not someone [forge] trusted names: it counts for nothing`,
        });
    }
    return kept;
  }

  requiredChecks(branch: string): Promise<RequiredCheck[]> {
    return this.inner.requiredChecks(branch);
  }

  async checks(sha: string, required: readonly RequiredCheck[]): Promise<ForgeCheck[]> {
    const checks = await this.inner.checks(sha, required);
    for (const k of checks)
      for (const app of k.ignored ?? [])
        this.people.ignore({
          who: app,
          what: 'check',
          why: `the app ${app} reported the required check ${k.name}, which counts only from the app ${String(required.find((r) => r.name === k.name)?.app)}`,
        });
    return checks;
  }

  self(): Promise<string> {
    return this.inner.self();
  }

  role(login: string): Promise<ForgeRole> {
    return this.inner.role(login);
  }

  labelChange(issue: number, label: string) {
    return this.inner.labelChange(issue, label);
  }

  enqueue(pull: ForgePull, headSha: string): Promise<void> {
    return this.inner.enqueue(pull, headSha);
  }

  queueState(number: number) {
    return this.inner.queueState(number);
  }
}

/** Sends what `forge` ignored to the run's log and console (a forge that does not filter has nothing to note). */
export function noteIgnored(forge: Forge, record: (body: EventBody) => boolean, print: (line: string) => void): void {
  if (forge instanceof TrustingForge) forge.people.noteTo(record, print);
}
