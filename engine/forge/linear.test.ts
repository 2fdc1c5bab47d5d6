/** The Linear tracker (through @linear/sdk) against the test Linear server: what it reads, writes, and how it fails. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type LinearServer, startLinearServer } from '../testing/linear/server.ts';
import { commentOnce, ForgeError, isOwnComment, marker } from './forge.ts';
import { LinearTracker } from './linear.ts';

let server: LinearServer;
let tracker: LinearTracker;
beforeEach(async () => {
  server = await startLinearServer();
  tracker = new LinearTracker({ team: 'ENG', apiKey: server.key, apiUrl: server.url, timeoutMs: 5_000 });
});
afterEach(async () => {
  expect(server.invalid).toEqual([]);
  await server.close();
});

const failure = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('the Linear tracker', () => {
  it("lists the team's open issues with the label, oldest first, as the forge's issues", async () => {
    server.openIssue({ title: 'First', description: '- [ ] one', labels: ['tron', 'bug'], creator: 'Ada' });
    server.openIssue({ title: 'Unlabelled', labels: ['bug'] });
    server.openIssue({ title: 'Done already', labels: ['tron'], state: 'Done' });
    server.openIssue({ title: 'Dropped', labels: ['tron'], state: 'Canceled' });
    server.openIssue({ title: 'Second', labels: ['tron'], state: 'In Progress' });
    const list = await tracker.listIssues('tron');
    expect(list).not.toBe('unchanged');
    if (list === 'unchanged') return;
    expect(list.issues.map((i) => [i.number, i.title, i.state])).toEqual([
      [1, 'First', 'open'],
      [5, 'Second', 'open'],
    ]);
    expect(list.issues[0]).toMatchObject({
      body: '- [ ] one',
      labels: ['tron', 'bug'],
      author: 'Ada',
      url: expect.stringContaining('ENG-1'),
    });
    expect(tracker.issuePrefix).toBe('lin-eng');
    // Its own digest stands in for an ETag: the same list is unchanged, an edit changes it.
    expect(await tracker.listIssues('tron', list.etag)).toBe('unchanged');
    server.comment(1, 'A thought.', 'someone');
    expect(await tracker.listIssues('tron', list.etag)).not.toBe('unchanged');
  });

  it('narrows the list to one workflow state when `state` is given', async () => {
    const inTodo = new LinearTracker({ team: 'ENG', state: 'Todo', apiKey: server.key, apiUrl: server.url });
    server.openIssue({ title: 'Ready', labels: ['tron'] });
    server.openIssue({ title: 'Not ready', labels: ['tron'], state: 'Backlog' });
    const list = await inTodo.listIssues('tron');
    expect(list !== 'unchanged' && list.issues.map((i) => i.title)).toEqual(['Ready']);
  });

  it("comments once per marker, written so Linear keeps it, and moves a landed issue to the team's Done", async () => {
    const n = server.openIssue({ title: 'Fix login', labels: ['tron'] });
    const mark = marker('lin-eng-1-fix-login', 'landed');
    const first = await commentOnce(tracker, n, mark, 'Landed on `main` in abc123.');
    const again = await commentOnce(tracker, n, mark, 'Landed on `main` in abc123.');
    expect(first.posted).toBe(true);
    expect(again).toMatchObject({ posted: false, id: first.id });
    const stored = server.issue(n)!.comments;
    expect(stored).toHaveLength(1);
    expect(stored[0]!.body).toBe('Landed on `main` in abc123.\n\n`tron:lin-eng-1-fix-login:landed`');
    const read = await tracker.comments(n);
    expect(read.every((c) => isOwnComment(c, server.viewer))).toBe(true);
    // A person's comment that quotes the marker is not tron's.
    server.comment(n, 'Look: `tron:lin-eng-1-fix-login:landed`', 'mallory');
    expect((await tracker.comments(n)).filter((c) => isOwnComment(c, server.viewer))).toHaveLength(1);

    await tracker.closeIssue(n);
    expect(server.issue(n)!.state).toMatchObject({ name: 'Done', type: 'completed' });
    expect(await tracker.issue(n)).toMatchObject({ number: n, state: 'closed' });
    expect(await tracker.issue(99)).toBeUndefined();
  });

  it('fails typed: a rate limit with the wait Linear asked for, a refused key, an issue that is not there, an unreachable API', async () => {
    server.rateLimit(1, 2_000);
    const limited = await failure(tracker.self());
    expect(limited).toBeInstanceOf(ForgeError);
    expect(limited).toMatchObject({ kind: 'rate_limited' });
    expect((limited as ForgeError).retryAfterMs).toBeGreaterThan(1_000);
    expect(await tracker.self()).toBe(server.viewer);

    const stranger = new LinearTracker({ team: 'ENG', apiKey: 'lin_api_wrong', apiUrl: server.url });
    const refused = await failure(stranger.listIssues('tron'));
    expect(refused).toMatchObject({ kind: 'auth' });
    expect((refused as Error).message).not.toContain('lin_api_wrong');

    expect(await failure(tracker.comment(42, 'hello'))).toMatchObject({ kind: 'refused' });

    const gone = new LinearTracker({ team: 'ENG', apiKey: server.key, apiUrl: 'http://127.0.0.1:1/graphql' });
    expect(await failure(gone.self())).toMatchObject({ kind: 'transient' });
  });

  it('finds the team by its key, and its Done state by type and position; a team it cannot see is said so', async () => {
    expect(await tracker.team()).toMatchObject({ id: expect.any(String), done: expect.any(String) });
    const other = new LinearTracker({ team: 'OPS', apiKey: server.key, apiUrl: server.url });
    expect(await failure(other.team())).toMatchObject({ message: expect.stringContaining('no team with the key OPS') });
  });
});
