/**
 * A person withdraws a block on GitLab while tron runs (in process): closing its issue
 * stops its running turn and abandons the block, naming them and their last note; taking
 * the label off (a resource label event) abandons a block before it lands.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType } from '../testing/project.ts';
import { latestEvents, startIn, until } from '../testing/in-process.ts';
import { stoppableBuilder } from '../testing/workers.ts';

async function setup(): Promise<GitLabProject> {
  const p = await gitlabProject({ builder: stoppableBuilder, intake: 'poll = "100ms"\n' });
  onTestFinished(() => p.cleanup());
  return p;
}

describe('a block withdrawn on GitLab while it runs', () => {
  it('stops the running turn and abandons the block, naming who closed its issue and their last note', async () => {
    const p = await setup();
    p.gl.openIssue({ title: 'A slow one', description: '- [ ] slow.txt', labels: ['tron'] });
    const running = startIn(p);
    await until(() => ofType(latestEvents(p), 'worker.spawned').length > 0, 'the builder to start');
    p.gl.note(1, { body: 'We dropped this from the release.', author: 'ada' });
    p.gl.editIssue(1, { state: 'closed', by: 'ada' });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([
      expect.objectContaining({ block: 'gl-1-a-slow-one', issue: 1, action: 'closed', by: 'ada' }),
    ]);
    expect(ofType(run, 'block.abandoned')[0]!.reason).toBe(
      'ada closed its issue #1 (the last comment there, ada: We dropped this from the release.)',
    );
    expect(ofType(run, 'block.landed')).toEqual([]);
    expect(p.gl.notes(1).some((n) => n.body.includes('tron abandoned'))).toBe(true);
    expect(replay(run, ctx)).toMatchObject({ ok: true });
  });

  it('abandons the block when a member takes the label off its issue', async () => {
    const p = await setup();
    p.gl.openIssue({ title: 'A slow one', description: '- [ ] slow.txt', labels: ['tron'] });
    const running = startIn(p);
    await until(() => ofType(latestEvents(p), 'worker.spawned').length > 0, 'the builder to start');
    p.gl.editIssue(1, { labels: [], by: 'bob' });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([expect.objectContaining({ block: 'gl-1-a-slow-one', action: 'unlabelled' })]);
    expect(ofType(run, 'block.abandoned')).toEqual([expect.objectContaining({ reason: 'the intake label was taken off its issue #1' })]);
    expect(p.gl.issue(1)!.state).toBe('opened');
  });
});
