/**
 * A person withdraws a block on the forge while tron runs (in process, without --watch):
 * closing its issue stops its running turn and abandons it, naming them; taking the label
 * off a block waiting for its pull request's approval abandons it and lands nothing; the
 * issue tron closed itself after a landing changes nothing.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { forgeProject, type ForgeProject } from '../testing/github/project.ts';
import { ofType } from '../testing/project.ts';
import { latestEvents, startIn, until } from '../testing/in-process.ts';
import { stoppableBuilder } from '../testing/workers.ts';

async function setup(forge = ''): Promise<ForgeProject> {
  const p = await forgeProject({ builder: stoppableBuilder, forge, intake: 'poll = "100ms"\n' });
  onTestFinished(() => p.cleanup());
  return p;
}

describe('a block withdrawn on the forge while it runs', () => {
  it('stops the running turn and abandons the block, naming who closed its issue and their last words', async () => {
    const p = await setup();
    p.gh.openIssue({ title: 'A slow one', body: '- [ ] slow.txt', labels: ['tron'] });
    const running = startIn(p);
    await until(() => ofType(latestEvents(p), 'worker.spawned').length > 0, 'the builder to start');
    p.gh.editIssue(1, { state: 'closed', by: 'ada', comment: 'We dropped this from the release.' });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([
      expect.objectContaining({ block: 'gh-1-a-slow-one', issue: 1, action: 'closed', by: 'ada' }),
    ]);
    expect(ofType(run, 'block.abandoned')[0]!.reason).toBe(
      'ada closed its issue #1 (the last comment there, ada: We dropped this from the release.)',
    );
    // The turn was stopped, not waited out: its reply was never acted on.
    expect(ofType(run, 'reply.accepted')).toEqual([]);
    expect(ofType(run, 'block.landed')).toEqual([]);
    expect(p.gh.comments(1).some((c) => c.body.includes('tron abandoned'))).toBe(true);
    // The person's action entered the run as a recorded input: replay re-derives every decision.
    expect(replay(run, ctx)).toMatchObject({ ok: true });
  });

  it('abandons a block waiting on its pull request when the label is taken off, and leaves a landed block whose issue tron closed alone', async () => {
    const p = await setup('land = "pr"\nrequire_human_approval = true\n');
    p.gh.openIssue({ title: 'First', body: '- [ ] first.txt', labels: ['tron'] });
    // After the first: its pull request is the second one the lane opens, whichever block builds faster.
    p.gh.openIssue({ title: 'Second', body: '- [ ] second.txt\n\ndepends on #1', labels: ['tron'] });
    const running = startIn(p);
    const pullOf = (head: string) => p.gh.pulls().find((x) => x.head.ref === head);
    await until(() => pullOf('tron/gh-1-first') !== undefined && ofType(latestEvents(p), 'pr.wait').length > 0, 'the first pull request');
    await p.gh.review(pullOf('tron/gh-1-first')!.number, { state: 'APPROVED', user: 'ada' });
    await until(() => p.gh.issue(1)!.state === 'closed', 'tron to close the landed issue');
    await until(() => pullOf('tron/gh-2-second') !== undefined, 'the second pull request');
    p.gh.editIssue(2, { labels: [], by: 'bob' });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'block.landed').map((e) => e.block)).toEqual(['gh-1-first']);
    expect(ofType(run, 'issue.withdrawn')).toEqual([expect.objectContaining({ block: 'gh-2-second', action: 'unlabelled' })]);
    expect(ofType(run, 'block.abandoned')).toEqual([
      expect.objectContaining({ block: 'gh-2-second', reason: 'the intake label was taken off its issue #2' }),
    ]);
    expect(await p.bare.git('ls-tree', '--name-only', 'main')).not.toContain('gh-2-second.txt');
    expect(p.gh.issue(2)!.state).toBe('open');
  });
});
