/**
 * The test GitHub server answers the real client: every route tron's forge uses, called
 * through Octokit, with pagination, ETags, faults and a real git repository behind refs,
 * pulls and merges.
 */
import { Octokit } from '@octokit/rest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeBareRemote, type BareRemote } from '../remote-server.ts';
import { makeRepo, type TestRepo } from '../repo.ts';
import { startGitHubServer, type GitHubServer } from './server.ts';

let bare: BareRemote;
let clone: TestRepo;
let gh: GitHubServer;
let api: Octokit;
const repo = () => ({ owner: gh.owner, repo: gh.repo });

/** Octokit's status of a failed call, with its retry-after header. */
async function failure(p: Promise<unknown>): Promise<{ status: number; retryAfter?: string; remaining?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as { status: number; message: string; response?: { headers: Record<string, string> } };
    return {
      status: e.status,
      message: e.message,
      retryAfter: e.response?.headers['retry-after'],
      remaining: e.response?.headers['x-ratelimit-remaining'],
    };
  }
  throw new Error('the call succeeded');
}

/** Commits a file on a new branch of the clone and pushes it to the bare remote; the new head. */
async function pushBranch(name: string, file: string): Promise<string> {
  await clone.git('fetch', '-q', bare.dir, 'main');
  await clone.git('checkout', '-q', '-B', name, 'FETCH_HEAD');
  await clone.write(file, `${name}\n`);
  const sha = await clone.commitAll(`${name}: ${file}`);
  await clone.git('push', '-q', bare.dir, `+${name}:${name}`);
  await clone.git('checkout', '-q', 'main');
  return sha;
}

beforeEach(async () => {
  bare = await makeBareRemote();
  clone = await makeRepo({ 'README.md': 'app\n' });
  await clone.git('push', '-q', bare.dir, 'main');
  gh = await startGitHubServer({ gitDir: bare.dir });
  api = new Octokit({ auth: gh.token, baseUrl: gh.url, request: { retries: 0 } });
});

afterEach(async () => {
  await gh.close();
  await Promise.all([bare.cleanup(), clone.cleanup()]);
});

describe('the test GitHub server, through Octokit', () => {
  it('refuses a request without the token with 401 Bad credentials', async () => {
    const stranger = new Octokit({ baseUrl: gh.url, auth: 'ghp_wrong' });
    expect(await failure(stranger.rest.issues.listForRepo(repo()))).toMatchObject({
      status: 401,
      message: expect.stringContaining('Bad credentials'),
    });
  });

  it('lists open issues by label, newest first, and pages them with a Link header', async () => {
    for (let i = 1; i <= 7; i++) gh.openIssue({ title: `issue ${i}`, labels: i % 2 ? ['tron'] : ['bug'] });
    const first = await api.rest.issues.listForRepo({ ...repo(), labels: 'tron', per_page: 2 });
    expect(first.data.map((i) => i.number)).toEqual([7, 5]);
    expect(first.headers.link).toContain('rel="next"');
    const all = await api.paginate(api.rest.issues.listForRepo, { ...repo(), labels: 'tron', per_page: 2 });
    expect(all.map((i) => i.number)).toEqual([7, 5, 3, 1]);
    expect(gh.seen.filter((s) => s.path.startsWith(`/repos/acme/app/issues?`)).length).toBe(1 + 2);
  });

  it('answers a repeated GET with the same ETag with 304, which costs no rate limit', async () => {
    gh.openIssue({ title: 'one', labels: ['tron'] });
    const first = await api.rest.issues.listForRepo({ ...repo(), labels: 'tron' });
    const etag = first.headers.etag!;
    expect(await failure(api.rest.issues.listForRepo({ ...repo(), labels: 'tron', headers: { 'if-none-match': etag } }))).toMatchObject({
      status: 304,
    });
    expect(gh.seen.at(-1)).toMatchObject({ status: 304, counted: false });
    gh.openIssue({ title: 'two', labels: ['tron'] });
    const changed = await api.rest.issues.listForRepo({ ...repo(), labels: 'tron', headers: { 'if-none-match': etag } });
    expect(changed.data).toHaveLength(2);
  });

  it('posts, lists and edits comments, and closes an issue', async () => {
    const n = gh.openIssue({ title: 'work', body: 'do it' });
    const posted = await api.rest.issues.createComment({ ...repo(), issue_number: n, body: 'started' });
    expect(posted.status).toBe(201);
    expect(posted.data).toMatchObject({ body: 'started', issue_url: expect.stringContaining(`/issues/${n}`), user: { login: 'tron-bot' } });
    await api.rest.issues.updateComment({ ...repo(), comment_id: posted.data.id, body: 'started (edited)' });
    const listed = await api.rest.issues.listComments({ ...repo(), issue_number: n });
    expect(listed.data.map((c) => c.body)).toEqual(['started (edited)']);
    const closed = await api.rest.issues.update({ ...repo(), issue_number: n, state: 'closed' });
    expect(closed.data).toMatchObject({ state: 'closed', state_reason: 'completed', comments: 1 });
  });

  it('adds and removes labels, and creates a label once', async () => {
    const n = gh.openIssue({ title: 'x', labels: ['tron'] });
    await api.rest.issues.addLabels({ ...repo(), issue_number: n, labels: ['tron:working'] });
    await api.rest.issues.removeLabel({ ...repo(), issue_number: n, name: 'tron' });
    expect(gh.issue(n)!.labels.map((l) => l.name)).toEqual(['tron:working']);
    await api.rest.issues.createLabel({ ...repo(), name: 'tron:parked', color: 'd93f0b' });
    expect(await failure(api.rest.issues.createLabel({ ...repo(), name: 'tron:parked' }))).toMatchObject({ status: 422 });
  });

  it('opens one pull per head: finds it by head, refuses a second with 422, and follows pushes to its branch', async () => {
    const sha = await pushBranch('tron/login', 'login.txt');
    const pr = await api.rest.pulls.create({ ...repo(), head: 'tron/login', base: 'main', title: 'login', body: 'brief' });
    expect(pr.data).toMatchObject({ number: 1, state: 'open', head: { ref: 'tron/login', sha }, base: { ref: 'main' }, merged: false });
    expect(await failure(api.rest.pulls.create({ ...repo(), head: 'tron/login', base: 'main', title: 'again' }))).toMatchObject({
      status: 422,
      message: expect.stringContaining('A pull request already exists'),
    });
    const found = await api.rest.pulls.list({ ...repo(), head: 'acme:tron/login', state: 'open' });
    expect(found.data.map((p) => p.number)).toEqual([1]);
    expect((await api.rest.pulls.list({ ...repo(), head: 'acme:tron/other' })).data).toEqual([]);
    const moved = await pushBranch('tron/login', 'login2.txt');
    expect((await api.rest.pulls.get({ ...repo(), pull_number: 1 })).data.head.sha).toBe(moved);
    // GitHub lists pulls among issues, marked pull_request.
    expect((await api.rest.issues.listForRepo(repo())).data[0]).toMatchObject({ number: 1, pull_request: expect.any(Object) });
  });

  it('reports reviews, check runs, statuses and the combined status of a sha', async () => {
    const sha = await pushBranch('tron/a', 'a.txt');
    await api.rest.pulls.create({ ...repo(), head: 'tron/a', base: 'main', title: 'a' });
    await gh.review(1, { state: 'CHANGES_REQUESTED', body: 'rename it' });
    expect((await api.rest.pulls.listReviews({ ...repo(), pull_number: 1 })).data).toMatchObject([
      { state: 'CHANGES_REQUESTED', body: 'rename it', commit_id: sha, user: { login: 'reviewer' } },
    ]);
    gh.check(sha, { name: 'ci/test', conclusion: 'failure', text: 'FAIL a.test.js\n  expected 1, got 2' });
    const runs = await api.rest.checks.listForRef({ ...repo(), ref: sha });
    expect(runs.data).toMatchObject({
      total_count: 1,
      check_runs: [
        { name: 'ci/test', status: 'completed', conclusion: 'failure', output: { text: expect.stringContaining('expected 1') } },
      ],
    });
    expect((await api.rest.repos.getCombinedStatusForRef({ ...repo(), ref: sha })).data).toMatchObject({
      state: 'pending',
      total_count: 0,
    });
    await api.rest.repos.createCommitStatus({ ...repo(), sha, state: 'success', context: 'lint' });
    gh.status(sha, { context: 'e2e', state: 'failure' });
    expect((await api.rest.repos.getCombinedStatusForRef({ ...repo(), ref: 'tron/a' })).data).toMatchObject({
      state: 'failure',
      sha,
      total_count: 2,
    });
  });

  it('reads refs from the git repository and moves a branch only forward, past no missing required check', async () => {
    const main = await clone.git('rev-parse', 'main');
    expect((await api.rest.git.getRef({ ...repo(), ref: 'heads/main' })).data.object.sha).toBe(main);
    const sha = await pushBranch('tron/b', 'b.txt');
    gh.protect('main', ['ci/test']);
    expect((await api.rest.repos.getStatusChecksProtection({ ...repo(), branch: 'main' })).data).toMatchObject({ contexts: ['ci/test'] });
    expect(await failure(api.rest.git.updateRef({ ...repo(), ref: 'heads/main', sha }))).toMatchObject({ status: 422 });
    gh.check(sha, { name: 'ci/test', conclusion: 'success' });
    await api.rest.git.updateRef({ ...repo(), ref: 'heads/main', sha });
    expect(await bare.git('rev-parse', 'main')).toBe(sha);
    expect(await failure(api.rest.git.updateRef({ ...repo(), ref: 'heads/main', sha: main }))).toMatchObject({ status: 422 });
  });

  it('merges a pull only on its exact head with its required checks green, and marks a pull merged when its head is pushed to trunk', async () => {
    const sha = await pushBranch('tron/c', 'c.txt');
    await api.rest.pulls.create({ ...repo(), head: 'tron/c', base: 'main', title: 'c' });
    gh.protect('main', ['ci/test']);
    expect(await failure(api.rest.pulls.merge({ ...repo(), pull_number: 1, sha }))).toMatchObject({
      status: 405,
      message: expect.stringContaining('ci/test'),
    });
    gh.check(sha, { name: 'ci/test', conclusion: 'failure' });
    expect(await failure(api.rest.pulls.merge({ ...repo(), pull_number: 1, sha }))).toMatchObject({ status: 405 });
    gh.check(sha, { name: 'ci/test', conclusion: 'success' });
    expect(await failure(api.rest.pulls.merge({ ...repo(), pull_number: 1, sha: '0'.repeat(40) }))).toMatchObject({ status: 409 });
    expect((await api.rest.pulls.merge({ ...repo(), pull_number: 1, sha })).data).toMatchObject({ merged: true, sha });
    expect(await bare.git('rev-parse', 'main')).toBe(sha);

    const d = await pushBranch('tron/d', 'd.txt');
    await api.rest.pulls.create({ ...repo(), head: 'tron/d', base: 'main', title: 'd' });
    await clone.git('push', '-q', bare.dir, `${d}:refs/heads/main`);
    expect((await api.rest.pulls.get({ ...repo(), pull_number: 2 })).data).toMatchObject({
      state: 'closed',
      merged: true,
      merge_commit_sha: d,
    });
  });

  it('answers queued faults: a primary and a secondary rate limit, a 429 and a 502, then serves again', async () => {
    gh.fault(
      {
        status: 403,
        message: 'API rate limit exceeded for user ID 1.',
        headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '1700000000' },
      },
      { status: 403, message: 'You have exceeded a secondary rate limit.', headers: { 'retry-after': '7' } },
      { status: 429, message: 'Too many requests', headers: { 'retry-after': '3' } },
      { status: 502, message: 'Server Error', match: /^GET / },
    );
    expect(await failure(api.rest.issues.listForRepo(repo()))).toMatchObject({ status: 403, remaining: '0' });
    expect(await failure(api.rest.issues.listForRepo(repo()))).toMatchObject({ status: 403, retryAfter: '7' });
    expect(await failure(api.rest.issues.listForRepo(repo()))).toMatchObject({ status: 429, retryAfter: '3' });
    expect(await failure(api.rest.issues.listForRepo(repo()))).toMatchObject({ status: 502 });
    expect((await api.rest.issues.listForRepo(repo())).status).toBe(200);
  });

  it('closes a pull a person closed, with their comment on it', async () => {
    await pushBranch('tron/e', 'e.txt');
    await api.rest.pulls.create({ ...repo(), head: 'tron/e', base: 'main', title: 'e' });
    gh.closePull(1, 'Not needed: we dropped this feature.');
    expect((await api.rest.pulls.get({ ...repo(), pull_number: 1 })).data).toMatchObject({ state: 'closed', merged: false });
    expect((await api.rest.issues.listComments({ ...repo(), issue_number: 1 })).data[0]).toMatchObject({
      body: 'Not needed: we dropped this feature.',
      user: { login: 'maintainer' },
    });
  });

  it("models people: each one's author association on what they wrote, their role on the repository, and the token's own account", async () => {
    gh.person('mallory', { association: 'NONE', role: 'read' });
    gh.person('tess', { role: 'triage' });
    expect((await api.rest.users.getAuthenticated()).data.login).toBe(gh.login);
    const n = gh.openIssue({ title: 'x', user: 'mallory', labels: ['tron'], labelledBy: 'tess' });
    gh.editIssue(n, { comment: 'me too', by: 'mallory' });
    gh.editIssue(n, { labels: [], by: 'ada' });
    await api.rest.issues.createComment({ ...repo(), issue_number: n, body: 'hi' });
    expect((await api.rest.issues.get({ ...repo(), issue_number: n })).data.author_association).toBe('NONE');
    expect((await api.rest.issues.listComments({ ...repo(), issue_number: n })).data).toMatchObject([
      { user: { login: 'mallory' }, author_association: 'NONE' },
      { user: { login: gh.login }, author_association: 'MEMBER' },
    ]);
    expect((await api.rest.issues.listEvents({ ...repo(), issue_number: n })).data).toMatchObject([
      { event: 'labeled', actor: { login: 'tess' }, label: { name: 'tron' } },
      { event: 'unlabeled', actor: { login: 'ada' }, label: { name: 'tron' } },
    ]);
    const role = async (username: string) => (await api.rest.repos.getCollaboratorPermissionLevel({ ...repo(), username })).data;
    expect(await role('mallory')).toMatchObject({ permission: 'read', role_name: 'read' });
    expect(await role('tess')).toMatchObject({
      permission: 'read',
      role_name: 'triage',
      user: { permissions: { triage: true, push: false } },
    });
    expect(await role('ada')).toMatchObject({ permission: 'write', role_name: 'write' });
  });

  it('names the app of every check run, and lets a protection require a check from one app', async () => {
    const sha = await pushBranch('tron/c', 'c.txt');
    const other = { id: 666, slug: 'mallory-ci' };
    await new Octokit({ auth: gh.appToken(other), baseUrl: gh.url, request: { retries: 0 } }).rest.checks.create({
      ...repo(),
      name: 'ci/test',
      head_sha: sha,
      status: 'completed',
      conclusion: 'success',
    });
    gh.protect('main', [{ context: 'ci/test', app_id: gh.ciApp.id }]);
    expect((await api.rest.repos.getStatusChecksProtection({ ...repo(), branch: 'main' })).data).toMatchObject({
      contexts: ['ci/test'],
      checks: [{ context: 'ci/test', app_id: gh.ciApp.id }],
    });
    // Another app's green does not satisfy a check pinned to the CI app.
    expect((await failure(api.rest.git.updateRef({ ...repo(), ref: 'heads/main', sha }))).status).toBe(422);
    await api.rest.checks.create({ ...repo(), name: 'ci/test', head_sha: sha, status: 'completed', conclusion: 'success' });
    expect((await api.rest.checks.listForRef({ ...repo(), ref: sha })).data.check_runs.map((c) => c.app?.slug)).toEqual([
      'mallory-ci',
      'github-actions',
    ]);
    await api.rest.git.updateRef({ ...repo(), ref: 'heads/main', sha });
    expect(await bare.git('rev-parse', 'main')).toBe(sha);
  });
});
