/**
 * GitLab merge requests with people in them, end to end: tron runs (in process) while the
 * test acts as the team on the test GitLab server — a reviewer requesting changes, an
 * approval, a person closing the merge request (their words on the merge request, which
 * GitLab numbers apart from issues), a stranger closing it — and as a GitLab that
 * rate-limits and fails mid-run.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType } from '../testing/project.ts';
import { latestEvents, startIn, until } from '../testing/in-process.ts';

/** Writes "hi", or "hello" once a person asked for it. */
const BUILDER = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt greets"}}'; exit 0 ;;
esac
case "$prompt" in
  *"say hello, not hi"*) echo hello > greeting.txt ;;
  *) echo hi > greeting.txt ;;
esac
git add -A; git commit -qm "$TRON_BLOCK: greeting"
echo ">>DONE"
`;

async function setup(forge: string): Promise<GitLabProject> {
  const p = await gitlabProject({ builder: BUILDER, forge: `land = "pr"\n${forge}` });
  onTestFinished(() => p.cleanup());
  await p.ci('test', 'test -s greeting.txt');
  p.gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt greets', labels: ['tron'] });
  return p;
}

const waits = (p: GitLabProject) => ofType(latestEvents(p), 'pr.wait').length;

describe('GitLab merge requests with people', () => {
  it('turns a reviewer\'s "request changes" into a build with their note, and lands once a person approves the fixed head', async () => {
    const p = await setup('require_human_approval = true\n');
    const running = startIn(p);
    await until(() => waits(p) > 0, 'tron to wait for an approval');
    const mr = p.gl.mergeRequests()[0]!;
    await p.gl.requestChanges(mr.iid, 'ada', 'Please say hello, not hi.');
    await until(
      () => ofType(latestEvents(p), 'gate.failed').some((e) => e.facts.some((f) => f.name === 'changes_requested')),
      'the changes to reach the builder',
    );
    const fixed = () => p.bare.git('show', 'refs/heads/tron/gl-1-add-a-greeting:greeting.txt').catch(() => '');
    for (let i = 0; i < 1200 && (await fixed()) !== 'hello'; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await fixed()).toBe('hello');
    // ada's state is still requested_changes on GitLab: it was of the old head, and the new push answers it.
    p.gl.approve(mr.iid, 'ada');
    expect(await running).toBe(0);
    expect(await p.bare.git('show', 'main:greeting.txt')).toBe('hello');
    expect(p.gl.mergeRequests()).toHaveLength(1);
    const feedback = ofType(latestEvents(p), 'gate.failed').filter((e) => e.facts.some((f) => f.name === 'changes_requested'));
    expect(feedback).toHaveLength(1);
    expect(feedback[0]!.facts[0]!.evidence).toContain('Please say hello, not hi.');
  });

  it('abandons the block, with their words from the merge request, when a person closes it', async () => {
    const p = await setup('require_human_approval = true\n');
    const running = startIn(p);
    await until(() => waits(p) > 0, 'tron to wait for an approval');
    p.gl.closeMergeRequest(p.gl.mergeRequests()[0]!.iid, 'ada', 'We will not do this: the greeting moves to the app shell.');
    expect(await running).toBe(3);
    const [abandoned] = ofType(latestEvents(p), 'block.abandoned');
    expect(abandoned).toMatchObject({ block: 'gl-1-add-a-greeting', reason: expect.stringContaining('We will not do this') });
    expect(ofType(latestEvents(p), 'land.intent')).toEqual([]);
    expect(p.gl.notes(1).some((n) => n.body.includes('tron abandoned') && n.body.includes('We will not do this'))).toBe(true);
  });

  it('goes on as if open when a guest closes the merge request, and notes it', async () => {
    const p = await setup('require_human_approval = true\n');
    p.gl.person('mallory', 10);
    const running = startIn(p);
    await until(() => waits(p) > 0, 'tron to wait for an approval');
    const iid = p.gl.mergeRequests()[0]!.iid;
    p.gl.closeMergeRequest(iid, 'mallory', 'closing this');
    await until(
      () => ofType(latestEvents(p), 'forge.ignored').some((e) => e.who === 'mallory' && e.what === 'closing'),
      'the closing to be ignored',
    );
    p.gl.approve(iid, 'ada');
    expect(await running).toBe(0);
    expect(ofType(latestEvents(p), 'block.abandoned')).toEqual([]);
    expect(ofType(latestEvents(p), 'block.landed')).toHaveLength(1);
  });

  it('waits out a 429 for as long as Retry-After says, and a 5xx with its backoff, as timer events, then lands', async () => {
    const p = await setup('');
    p.gl.fault(
      { status: 429, headers: { 'retry-after': '1' }, match: /^GET \/api\/v4\/projects\/[^/]+\/merge_requests$/ },
      { status: 502, message: '502 Bad Gateway', match: /^GET .*\/pipelines$/ },
    );
    expect(await startIn(p)).toBe(0);
    const failed = ofType(latestEvents(p), 'pr.failed');
    expect(failed.map((e) => e.kind)).toEqual(['rate_limited', 'transient']);
    const waited = ofType(latestEvents(p), 'pr.wait');
    expect(waited[0]).toMatchObject({ wait_ms: 1000, reason: expect.stringContaining('rate limited') });
    expect(waited[1]).toMatchObject({ wait_ms: 50 });
    expect(ofType(latestEvents(p), 'block.landed')).toHaveLength(1);
    expect(p.gl.mergeRequests()).toHaveLength(1);
    expect(failed.every((e) => !e.message.includes(p.gl.token))).toBe(true);
  });
});
