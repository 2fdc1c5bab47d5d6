/**
 * A person withdraws a block in Linear while tron runs (in process): moving its issue to
 * a canceled state stops its running turn and abandons the block, with their last
 * comment; taking the label off abandons it too. Moving it to another open state does not.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { latestEvents, startIn, until } from '../testing/in-process.ts';
import { type LinearProject, linearProject } from '../testing/linear/project.ts';
import { ofType } from '../testing/project.ts';
import { stoppableBuilder } from '../testing/workers.ts';

async function setup(): Promise<LinearProject> {
  const p = await linearProject({ builder: stoppableBuilder, intake: 'poll = "100ms"\n' });
  onTestFinished(() => p.cleanup());
  p.linear.openIssue({ title: 'A slow one', description: '- [ ] slow.txt', labels: ['tron'] });
  return p;
}

const spawned = (p: LinearProject) => () => ofType(latestEvents(p), 'worker.spawned').length > 0;

describe('a block withdrawn in Linear while it runs', () => {
  it('stops the running turn and abandons the block when its issue is canceled, with the last comment there', async () => {
    const p = await setup();
    const running = startIn(p);
    await until(spawned(p), 'the builder to start');
    p.linear.comment(1, 'We dropped this from the cycle.', '6f1d0c1e-ada', 'Ada');
    p.linear.editIssue(1, { state: 'Canceled' });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([
      expect.objectContaining({
        block: 'lin-eng-1-a-slow-one',
        issue: 1,
        action: 'closed',
        words: 'Ada: We dropped this from the cycle.',
      }),
    ]);
    expect(ofType(run, 'block.abandoned')[0]!.reason).toContain('We dropped this from the cycle.');
    expect(ofType(run, 'block.landed')).toEqual([]);
    expect(p.linear.issue(1)!.comments.some((c) => c.user === p.linear.viewer && c.body.includes('tron abandoned'))).toBe(true);
    // tron does not move an issue it did not land: it stays where the person put it.
    expect(p.linear.issue(1)!.state.name).toBe('Canceled');
    expect(replay(run, ctx)).toMatchObject({ ok: true });
  });

  it('abandons the block when the label is taken off, and not when the issue only moves to another open state', async () => {
    const p = await setup();
    const running = startIn(p);
    await until(spawned(p), 'the builder to start');
    p.linear.editIssue(1, { state: 'In Progress' });
    await until(() => p.linear.seen.filter((s) => s.operation === 'TronIssues').length > 3, 'a few polls');
    expect(ofType(latestEvents(p), 'issue.withdrawn')).toEqual([]);
    p.linear.editIssue(1, { labels: ['bug'] });
    expect(await running).toBe(3);
    const run = latestEvents(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([expect.objectContaining({ block: 'lin-eng-1-a-slow-one', action: 'unlabelled' })]);
    expect(ofType(run, 'block.abandoned')).toEqual([expect.objectContaining({ reason: 'the intake label was taken off its issue #1' })]);
  });
});
