/**
 * A person withdraws a block on GitLab while tron runs (in process): closing its issue
 * stops its running turn and abandons the block, naming them and their last note; taking
 * the label off (a resource label event) abandons a block before it lands.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { startCommand } from '../commands/start.ts';
import type { TronEvent } from '../core/events.ts';
import { replay } from '../core/replay.ts';
import { systemClock } from '../os/clock.ts';
import { allRuns } from '../testing/crash.ts';
import { ctx } from '../testing/driver.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType } from '../testing/project.ts';

/** Builds at once, unless the block is "slow": then it waits (its turn runs) until it is stopped. */
const BUILDER = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"done"}}'; exit 0 ;;
esac
case "$TRON_BLOCK" in
  *slow*) sleep 120 ;;
esac
echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"; git add -A; git commit -qm "$TRON_BLOCK"
echo ">>DONE"
`;

async function setup(): Promise<GitLabProject> {
  const p = await gitlabProject({ builder: BUILDER, intake: 'poll = "100ms"\n' });
  onTestFinished(() => p.cleanup());
  return p;
}

function start(p: GitLabProject): Promise<number> {
  return startCommand({
    repo: p.repo.dir,
    clock: systemClock,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env },
    print: () => {},
  });
}

const events = (p: GitLabProject): TronEvent[] => allRuns(p.repo).at(-1) ?? [];

async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (done()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('a block withdrawn on GitLab while it runs', () => {
  it('stops the running turn and abandons the block, naming who closed its issue and their last note', async () => {
    const p = await setup();
    p.gl.openIssue({ title: 'A slow one', description: '- [ ] slow.txt', labels: ['tron'] });
    const running = start(p);
    await until(() => ofType(events(p), 'worker.spawned').length > 0, 'the builder to start');
    p.gl.note(1, { body: 'We dropped this from the release.', author: 'ada' });
    p.gl.editIssue(1, { state: 'closed', by: 'ada' });
    expect(await running).toBe(3);
    const run = events(p);
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
    const running = start(p);
    await until(() => ofType(events(p), 'worker.spawned').length > 0, 'the builder to start');
    p.gl.editIssue(1, { labels: [], by: 'bob' });
    expect(await running).toBe(3);
    const run = events(p);
    expect(ofType(run, 'issue.withdrawn')).toEqual([expect.objectContaining({ block: 'gl-1-a-slow-one', action: 'unlabelled' })]);
    expect(ofType(run, 'block.abandoned')).toEqual([expect.objectContaining({ reason: 'the intake label was taken off its issue #1' })]);
    expect(p.gl.issue(1)!.state).toBe('opened');
  });
});
