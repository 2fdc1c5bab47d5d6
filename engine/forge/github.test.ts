/**
 * The GitHub forge against the test GitHub server, through the real client: what tron
 * reads and writes, every write idempotent by lookup, and every failure typed.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startGitHubServer, type GitHubServer } from '../testing/github/server.ts';
import { makeBareRemote, type BareRemote } from '../testing/remote-server.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { commentOnce, type ForgeError, marker, upsertPull } from './forge.ts';
import { classify, GitHubForge } from './github.ts';
import { takeIssuesIn } from './sync.ts';

let bare: BareRemote;
let clone: TestRepo;
let gh: GitHubServer;
let forge: GitHubForge;

beforeEach(async () => {
  bare = await makeBareRemote();
  clone = await makeRepo({ 'README.md': 'app\n' });
  await clone.git('push', '-q', bare.dir, 'main');
  gh = await startGitHubServer({ gitDir: bare.dir });
  forge = new GitHubForge({ repo: `${gh.owner}/${gh.repo}`, token: gh.token, apiUrl: gh.url, now: () => 1_700_000_000_000 });
});

afterEach(async () => {
  await gh.close();
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

describe('the GitHub forge', () => {
  it('lists the labelled open issues, oldest first, without pull requests, over several pages, and says unchanged on a 304', async () => {
    for (let i = 0; i < 105; i++) gh.openIssue({ title: `t${i}`, body: '- [ ] x', labels: i % 3 === 0 ? ['tron'] : [] });
    const closed = gh.openIssue({ title: 'done', labels: ['tron'] });
    gh.editIssue(closed, { state: 'closed' });
    const first = await forge.listIssues('tron');
    if (first === 'unchanged') throw new Error('unchanged');
    expect(first.issues.map((i) => i.number)).toEqual(Array.from({ length: 35 }, (_, k) => 1 + 3 * k));
    expect(await forge.listIssues('tron', first.etag)).toBe('unchanged');
    expect(gh.seen.at(-1)).toMatchObject({ status: 304, counted: false });
  });

  it('types every failure: a primary rate limit waits until the reset, a secondary one as long as retry-after says, 5xx is transient, 401 is auth', async () => {
    gh.fault(
      {
        status: 403,
        message: 'API rate limit exceeded',
        headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(1_700_000_000 + 90) },
      },
      { status: 403, message: 'You have exceeded a secondary rate limit', headers: { 'retry-after': '7' } },
      { status: 429, message: 'Too many requests' },
      { status: 503, message: 'Unavailable' },
    );
    expect(await failure(forge.comments(1))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 90_000 });
    expect(await failure(forge.comments(1))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 7000 });
    expect(await failure(forge.comments(1))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 60_000 });
    expect(await failure(forge.comments(1))).toMatchObject({ kind: 'transient', status: 503 });
    const stranger = new GitHubForge({ repo: 'acme/app', token: 'nope', apiUrl: gh.url });
    expect(await failure(stranger.listIssues('tron'))).toMatchObject({ kind: 'auth' });
    expect(classify(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))).toMatchObject({ kind: 'transient' });
  });

  it('posts a marked comment once: the second call finds it', async () => {
    const n = gh.openIssue({ title: 'x' });
    const a = await commentOnce(forge, n, marker('gh-1-x', 'started'), 'tron started');
    const b = await commentOnce(forge, n, marker('gh-1-x', 'started'), 'tron started');
    expect(a).toMatchObject({ posted: true });
    expect(b).toMatchObject({ posted: false, id: a.id });
    expect(gh.comments(n)).toHaveLength(1);
  });

  it('opens one pull request per head: finds and updates it the second time, and never reopens one a person closed', async () => {
    await clone.git('checkout', '-q', '-b', 'tron/a');
    await clone.write('a.txt', 'a\n');
    await clone.commitAll('a');
    await clone.git('push', '-q', bare.dir, 'tron/a');
    const first = await upsertPull(forge, { head: 'tron/a', base: 'main', title: 'A', body: 'one' });
    const again = await upsertPull(forge, { head: 'tron/a', base: 'main', title: 'A', body: 'two' });
    expect(first.opened).toBe(true);
    expect(again).toMatchObject({ opened: false, pull: { number: first.pull.number } });
    expect(gh.pulls()).toHaveLength(1);
    expect(gh.issue(first.pull.number)!.body).toBe('two');
    gh.closePull(first.pull.number, 'no thanks');
    const closed = await upsertPull(forge, { head: 'tron/a', base: 'main', title: 'A', body: 'three' });
    expect(closed).toMatchObject({ opened: false, pull: { state: 'closed', merged: false } });
    expect(gh.pulls()).toHaveLength(1);
  });

  it('reads the required checks of a protected branch, and each one on a sha: check runs and statuses, red with their words, missing when unreported', async () => {
    const sha = await clone.git('rev-parse', 'main');
    gh.protect('main', ['ci/test', 'lint', 'e2e', 'docs']);
    expect(await forge.requiredChecks('main')).toEqual([{ name: 'ci/test' }, { name: 'lint' }, { name: 'e2e' }, { name: 'docs' }]);
    expect(await forge.requiredChecks('other')).toEqual([]);
    gh.check(sha, { name: 'ci/test', conclusion: 'failure', summary: '1 failed', text: 'FAIL sum.test.js: expected 3, got 4' });
    gh.status(sha, { context: 'lint', state: 'success' });
    gh.check(sha, { name: 'e2e', conclusion: null, status: 'in_progress' });
    expect(await forge.checks(sha, [{ name: 'ci/test' }, { name: 'lint' }, { name: 'e2e' }, { name: 'docs' }])).toMatchObject([
      { name: 'ci/test', state: 'failure', text: '1 failed\nFAIL sum.test.js: expected 3, got 4' },
      { name: 'lint', state: 'success' },
      { name: 'e2e', state: 'pending' },
      { name: 'docs', state: 'missing' },
    ]);
  });

  it('takes labelled issues in as blocks, and comments exactly once on a malformed one, however often it is read', async () => {
    const good = gh.openIssue({ title: 'Add login', body: 'Brief.\n\n- [ ] login works', labels: ['tron'] });
    const bad = gh.openIssue({ title: 'Make it nice', body: 'Please.', labels: ['tron'] });
    const next = gh.openIssue({ title: 'Logout', body: '- [ ] logout works\n\ndepends on #1', labels: ['tron'] });
    for (let i = 0; i < 3; i++) {
      const intake = await takeIssuesIn(forge, 'tron');
      if (intake === 'unchanged') throw new Error('unchanged');
      expect(intake.blocks.map((b) => [b.id, b.dependsOn])).toEqual([
        ['gh-1-add-login', []],
        ['gh-3-logout', ['gh-1-add-login']],
      ]);
      expect(intake.refused.map((r) => r.number)).toEqual([bad]);
    }
    expect(gh.comments(good)).toEqual([]);
    expect(gh.comments(next)).toEqual([]);
    expect(gh.comments(bad)).toHaveLength(1);
    expect(gh.comments(bad)[0]!.body).toMatch(/no acceptance criteria[\s\S]*- \[ \]/);
  });

  it('enqueues in the merge queue only as GitHub allows — queue on, the head named, its required checks green — and reads queued, merged or removed', async () => {
    await clone.git('switch', '-q', '-c', 'tron/a');
    await clone.write('a.txt', 'a\n');
    await clone.git('add', '-A');
    await clone.git('commit', '-qm', 'a');
    await clone.git('push', '-q', bare.dir, 'tron/a');
    const head = await clone.git('rev-parse', 'HEAD');
    const { pull } = await upsertPull(forge, { head: 'tron/a', base: 'main', title: 'A', body: 'a' });
    expect(await forge.queueState(pull.number)).toEqual({ state: 'none' });
    const refused = async () => (await failure(forge.enqueue(pull, head))).message;
    expect(await refused()).toContain('Merge queue is not enabled');
    gh.mergeQueue('main');
    gh.protect('main', ['ci']);
    expect(await refused()).toContain('Required status checks ci have not succeeded');
    gh.check(head, { name: 'ci', conclusion: 'success' });
    expect(await failure(forge.enqueue(pull, '0'.repeat(40)))).toMatchObject({
      kind: 'refused',
      message: expect.stringContaining('Head sha'),
    });
    gh.holdQueue(true);
    await forge.enqueue(pull, head);
    expect(await forge.queueState(pull.number)).toMatchObject({ state: 'queued' });
    const group = gh.queue()[0]!.group!;
    gh.check(group, { name: 'ci', conclusion: 'failure' });
    gh.holdQueue(false);
    expect(await forge.queueState(pull.number)).toEqual({ state: 'removed', reason: 'the required check ci failed on the merge group' });
    gh.onMergeGroup((sha) => gh.check(sha, { name: 'ci', conclusion: 'success' }));
    await forge.enqueue(pull, head);
    await forge.queueState(pull.number);
    const merged = await forge.queueState(pull.number);
    expect(merged).toMatchObject({ state: 'merged' });
    expect(await bare.git('rev-parse', 'main')).toBe((merged as { commit: string }).commit);
    expect((await forge.pull(pull.number)).merged).toBe(true);
  });
});
