/**
 * The GitLab forge against the test GitLab server, through the real client
 * (@gitbeaker/rest with tron's requester): every method of the Forge interface, lists
 * across pages by X-Next-Page, writes idempotent by lookup, and every failure typed —
 * with the token in no message.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitLabServer, type GitLabServer } from '../testing/gitlab/server.ts';
import { makeBareRemote, type BareRemote } from '../testing/remote-server.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { commentOnce, ForgeError, marker, upsertPull } from './forge.ts';
import { GitLabForge, PIPELINE_CHECK, roleOfAccessLevel } from './gitlab.ts';
import { takeIssuesIn } from './sync.ts';

let bare: BareRemote;
let clone: TestRepo;
let gl: GitLabServer;
let forge: GitLabForge;
const NOW = 1_700_000_000_000;

beforeEach(async () => {
  bare = await makeBareRemote();
  clone = await makeRepo({ 'README.md': 'app\n' });
  await clone.git('push', '-q', bare.dir, 'main');
  gl = await startGitLabServer({ gitDir: bare.dir });
  forge = new GitLabForge({ repo: gl.path, token: gl.token, apiUrl: gl.url, now: () => NOW });
});

afterEach(async () => {
  await gl.close();
  await Promise.all([bare.cleanup(), clone.cleanup()]);
});

async function failure(p: Promise<unknown>): Promise<ForgeError> {
  try {
    await p;
  } catch (err) {
    return err as ForgeError;
  }
  throw new Error('the call succeeded');
}

/** A branch pushed to the project's repository, with one commit on it: its sha. */
async function pushBranch(name: string, file = `${name}.txt`): Promise<string> {
  await clone.git('checkout', '-q', '-b', name, 'main');
  await clone.write(file, `${name}\n`);
  await clone.git('add', '-A');
  await clone.git('commit', '-qm', name);
  await clone.git('push', '-q', bare.dir, name);
  const sha = await clone.git('rev-parse', 'HEAD');
  await clone.git('checkout', '-q', 'main');
  return sha;
}

describe('the GitLab forge', () => {
  it('lists the labelled open issues oldest first across pages by X-Next-Page, and says unchanged when nothing changed', async () => {
    for (let i = 0; i < 230; i++) gl.openIssue({ title: `t${i}`, description: '- [ ] x', labels: i % 2 === 0 ? ['tron'] : ['bug'] });
    const closed = gl.openIssue({ title: 'done', labels: ['tron'] });
    gl.editIssue(closed, { state: 'closed' });
    const first = await forge.listIssues('tron');
    if (first === 'unchanged') throw new Error('unchanged');
    expect(first.issues.map((i) => i.number)).toEqual(Array.from({ length: 115 }, (_, k) => 1 + 2 * k));
    expect(first.issues[0]).toMatchObject({ title: 't0', body: '- [ ] x', labels: ['tron'], state: 'open', author: 'ada' });
    expect(first.issues[0]!.url).toBe(`${gl.url.replace('/api/v4', '')}/${gl.path}/-/issues/1`);
    // Two pages of 100: the second asked for because the first said X-Next-Page: 2.
    const lists = gl.seen.filter((s) => s.path.includes('/issues?'));
    expect(lists.map((s) => new URLSearchParams(s.path.split('?')[1]).get('page'))).toEqual(['1', '2']);
    expect(lists[0]!.path).toContain(`/projects/${encodeURIComponent(gl.path)}/issues?`);
    expect(await forge.listIssues('tron', first.etag)).toBe('unchanged');
    gl.editIssue(3, { labels: ['tron', 'urgent'] });
    expect(await forge.listIssues('tron', first.etag)).not.toBe('unchanged');
  });

  it('finds the project by its numeric id as well as its path', async () => {
    const byId = new GitLabForge({ repo: String(gl.projectId), token: gl.token, apiUrl: gl.url });
    const n = gl.openIssue({ title: 'by id', labels: ['tron'] });
    expect((await byId.issue(n))?.title).toBe('by id');
    expect(gl.seen.at(-1)!.path).toBe(`/api/v4/projects/${gl.projectId}/issues/${n}`);
  });

  it('reads an issue, closed and by whom, and none for an issue that does not exist', async () => {
    const n = gl.openIssue({ title: 'Fix it', description: 'body', labels: ['tron'] });
    gl.editIssue(n, { state: 'closed', by: 'bob' });
    expect(await forge.issue(n)).toMatchObject({ number: n, state: 'closed', closedBy: 'bob', body: 'body', author: 'ada' });
    expect(await forge.issue(999)).toBeUndefined();
  });

  it("posts notes as comments, leaves GitLab's system notes out, and comments once per marker across retries", async () => {
    const n = gl.openIssue({ title: 'x', labels: ['tron'] });
    gl.note(n, { body: 'added ~tron label', system: true });
    gl.note(n, { body: 'Please hurry', author: 'ada' });
    const mark = marker('gl-1-x', 'started');
    const first = await commentOnce(forge, n, mark, 'Started.');
    const again = await commentOnce(forge, n, mark, 'Started.');
    expect(first.posted).toBe(true);
    expect(again).toMatchObject({ posted: false, id: first.id });
    const comments = await forge.comments(n);
    expect(comments.map((c) => [c.author, c.body.split('\n')[0]])).toEqual([
      ['ada', 'Please hurry'],
      ['tron-bot', 'Started.'],
    ]);
    expect(comments[1]!.url).toMatch(new RegExp(`/-/issues/${n}#note_${first.id}$`));
    expect(await forge.self()).toBe('tron-bot');
  });

  it('closes an issue', async () => {
    const n = gl.openIssue({ title: 'x', labels: ['tron'] });
    await forge.closeIssue(n);
    expect(gl.issue(n)).toMatchObject({ state: 'closed', closedBy: 'tron-bot' });
  });

  it('reads who last put a label on or took it off from the resource label events', async () => {
    const n = gl.openIssue({ title: 'x', labels: ['tron'], labelledBy: 'mallory' });
    expect(await forge.labelChange(n, 'tron')).toEqual({ action: 'labeled', actor: 'mallory' });
    gl.editIssue(n, { labels: [], by: 'bob' });
    expect(await forge.labelChange(n, 'tron')).toEqual({ action: 'unlabeled', actor: 'bob' });
    expect(await forge.labelChange(n, 'other')).toBeUndefined();
  });

  it("maps a member's access level, inherited from groups too, to a role, and a stranger to none", async () => {
    gl.person('dev', 30);
    gl.person('lead', 40);
    gl.person('reporter', 20);
    gl.person('outsider', 0);
    expect(await forge.role('dev')).toBe('write');
    expect(await forge.role('lead')).toBe('maintain');
    expect(await forge.role('reporter')).toBe('triage');
    expect(await forge.role('outsider')).toBe('none');
    expect(await forge.role('nobody-at-all')).toBe('none');
    expect(gl.seen.some((s) => s.path.includes('/members/all/'))).toBe(true);
    expect([5, 10, 15, 20, 30, 40, 50].map(roleOfAccessLevel)).toEqual(['none', 'read', 'triage', 'triage', 'write', 'maintain', 'admin']);
  });

  it('opens one merge request per branch, finds and updates it, and sees it merged once its head reaches the target', async () => {
    const sha = await pushBranch('tron/a');
    const p = { head: 'tron/a', base: 'main', title: 'Block a', body: 'first' };
    const one = await upsertPull(forge, p);
    const two = await upsertPull(forge, { ...p, body: 'second' });
    expect(one.opened).toBe(true);
    expect(two).toMatchObject({ opened: false, pull: { number: one.pull.number } });
    expect(gl.mergeRequests()).toHaveLength(1);
    expect(gl.mergeRequests()[0]!.description).toBe('second');
    expect(await forge.pull(one.pull.number)).toMatchObject({ state: 'open', merged: false, head: 'tron/a', headSha: sha, base: 'main' });
    expect(one.pull.url).toMatch(/\/-\/merge_requests\/1$/);
    await clone.git('push', '-q', bare.dir, `${sha}:refs/heads/main`);
    expect(await forge.findPull('tron/a')).toMatchObject({ state: 'closed', merged: true });
    expect(await forge.findPull('tron/none')).toBeUndefined();
  });

  it('reads approvals as approving reviews of the head, and a reviewer requesting changes with their words, of the head they asked on', async () => {
    const sha = await pushBranch('tron/b');
    const { pull } = await upsertPull(forge, { head: 'tron/b', base: 'main', title: 'b', body: '' });
    gl.approve(pull.number, 'lead');
    await gl.requestChanges(pull.number, 'bob', 'Rename the function, please.');
    expect(await forge.reviews(pull.number)).toEqual([
      { state: 'CHANGES_REQUESTED', body: 'Rename the function, please.', author: 'bob', sha },
      { state: 'APPROVED', body: '', author: 'lead', sha },
    ]);
    // GitLab keeps the reviewer's state across a push: the request stays of the head it was made on.
    await clone.git('checkout', '-q', 'tron/b');
    await clone.write('fix.txt', 'renamed\n');
    await clone.git('add', '-A');
    await clone.git('commit', '-qm', 'rename');
    await clone.git('push', '-q', bare.dir, 'tron/b');
    const fixed = await clone.git('rev-parse', 'HEAD');
    expect((await forge.pull(pull.number)).headSha).toBe(fixed);
    expect(await forge.reviews(pull.number)).toEqual([
      { state: 'CHANGES_REQUESTED', body: 'Rename the function, please.', author: 'bob', sha },
      { state: 'APPROVED', body: '', author: 'lead', sha: fixed },
    ]);
    // bob approves the new head: GitLab sets his state, and only the approval is left.
    gl.approve(pull.number, 'bob');
    expect(await forge.reviews(pull.number)).toEqual([
      { state: 'APPROVED', body: '', author: 'lead', sha: fixed },
      { state: 'APPROVED', body: '', author: 'bob', sha: fixed },
    ]);
  });

  it("takes the project's pipeline on exactly the sha as the check, green, pending, red with a failed job's last log lines, or missing", async () => {
    const sha = await pushBranch('tron/c');
    const other = await pushBranch('tron/d');
    const required = await forge.requiredChecks('main');
    expect(required).toEqual([{ name: PIPELINE_CHECK }]);
    expect(await forge.checks(sha, required)).toEqual([{ name: 'pipeline', state: 'missing' }]);
    gl.pipeline(other, [{ name: 'test', status: 'success' }]);
    expect(await forge.checks(sha, required)).toEqual([{ name: 'pipeline', state: 'missing' }]);
    gl.pipeline(sha, [{ name: 'test', status: 'running' }]);
    expect(await forge.checks(sha, required)).toMatchObject([{ name: 'pipeline', state: 'pending' }]);
    const lines = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
    gl.pipeline(sha, [
      { name: 'lint', status: 'success' },
      { name: 'test', status: 'failed', trace: `${lines}\nAssertionError: expected 2 to be 3\n` },
    ]);
    const [red] = await forge.checks(sha, required);
    expect(red).toMatchObject({ name: 'pipeline', state: 'failure' });
    expect(red!.text).toContain('AssertionError: expected 2 to be 3');
    expect(red!.text).toContain('job test (failed)');
    expect(red!.text).not.toContain('line 10\n');
    expect(red!.text).not.toContain('lint');
    // A required check of another name is that job of the latest pipeline.
    expect(await forge.checks(sha, [{ name: 'lint' }, { name: 'e2e' }])).toMatchObject([
      { name: 'lint', state: 'success' },
      { name: 'e2e', state: 'missing' },
    ]);
    gl.pipeline(sha, [{ name: 'test', status: 'success' }]);
    expect(await forge.checks(sha, required)).toMatchObject([{ name: 'pipeline', state: 'success' }]);
  });

  it('hands a merge request to "merge when the pipeline succeeds" only while its head is the sha given', async () => {
    const sha = await pushBranch('tron/e');
    const { pull } = await upsertPull(forge, { head: 'tron/e', base: 'main', title: 'e', body: '' });
    expect(await forge.queueState(pull.number)).toEqual({ state: 'none' });
    const moved = await failure(forge.enqueue(pull, '0'.repeat(40)));
    expect(moved).toMatchObject({ kind: 'refused', status: 409 });
    await forge.enqueue(pull, sha);
    expect(await forge.queueState(pull.number)).toEqual({ state: 'queued' });
    await clone.git('push', '-q', bare.dir, `${sha}:refs/heads/main`);
    expect(await forge.queueState(pull.number)).toEqual({ state: 'merged', commit: sha });
  });

  it('takes labelled issues in as blocks and tells a malformed one once', async () => {
    gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
    const bad = gl.openIssue({ title: 'Vague', description: 'make it nice', labels: ['tron'] });
    const intake = await takeIssuesIn(forge, 'tron');
    if (intake === 'unchanged') throw new Error('unchanged');
    expect(intake.blocks.map((b) => b.id)).toEqual(['gl-1-add-a-greeting']);
    await takeIssuesIn(forge, 'tron');
    expect(gl.notes(bad).filter((n) => !n.system)).toHaveLength(1);
  });
});

describe('GitLab failures, typed', () => {
  it('a 429 is a rate limit with the Retry-After wait, or until RateLimit-Reset', async () => {
    gl.fault({ status: 429, headers: { 'retry-after': '7', 'ratelimit-remaining': '0' } });
    expect(await failure(forge.issue(1))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 7000, status: 429 });
    gl.fault({ status: 429, headers: { 'ratelimit-reset': String(NOW / 1000 + 42) } });
    expect(await failure(forge.comments(1))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 42_000 });
    // Sent once each: gitbeaker's own retries are not in the way.
    expect(gl.seen.filter((s) => s.status === 429)).toHaveLength(2);
  });

  it('a 5xx is transient, and asked once', async () => {
    gl.fault({ status: 502 });
    const e = await failure(forge.listIssues('tron'));
    expect(e).toBeInstanceOf(ForgeError);
    expect(e).toMatchObject({ kind: 'transient', status: 502 });
    expect(gl.seen).toHaveLength(1);
  });

  it('an unreachable server is transient', async () => {
    const gone = new GitLabForge({ repo: gl.path, token: gl.token, apiUrl: 'http://127.0.0.1:1/api/v4' });
    expect(await failure(gone.self())).toMatchObject({ kind: 'transient' });
  });

  it('a refused token is an auth failure whose message never holds the token; another 4xx a refused request', async () => {
    const wrong = new GitLabForge({ repo: gl.path, token: 'glpat-wrong-secret-value', apiUrl: gl.url });
    const e = await failure(wrong.self());
    expect(e).toMatchObject({ kind: 'auth', status: 401 });
    expect(e.message).not.toContain('glpat-wrong-secret-value');
    gl.fault({ status: 403, message: `403 Forbidden - token ${gl.token} lacks the api scope` });
    const f = await failure(forge.closeIssue(1));
    expect(f).toMatchObject({ kind: 'auth', status: 403 });
    expect(f.message).not.toContain(gl.token);
    expect(f.message).toContain('***');
    expect(await failure(forge.pull(77))).toMatchObject({ kind: 'refused', status: 404 });
  });
});
