/**
 * GitLab with `merge = "queue"`: "merge when the pipeline succeeds", end to end. tron (in
 * process) hands the merge request to GitLab only once its own test and the pipeline are
 * green on the head sha, with that sha; never counts "set to auto-merge" as landed; and
 * records the landing once GitLab moved trunk to exactly the tree it tested.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { startCommand } from '../commands/start.ts';
import { replay } from '../core/replay.ts';
import { systemClock } from '../os/clock.ts';
import { ctx } from '../testing/driver.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType } from '../testing/project.ts';
import { latestEvents, until } from '../testing/in-process.ts';

const BUILDER = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt greets"}}'; exit 0 ;;
esac
echo hello > greeting.txt
git add -A; git commit -qm "$TRON_BLOCK: greeting"
echo ">>DONE"
`;

const ID = 'gl-1-add-a-greeting';

async function setup(): Promise<GitLabProject> {
  const p = await gitlabProject({ builder: BUILDER, forge: 'land = "pr"\nmerge = "queue"\n' });
  onTestFinished(() => p.cleanup());
  await p.ci('test', 'test -s greeting.txt');
  p.gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt greets', labels: ['tron'] });
  return p;
}

describe('GitLab merge when the pipeline succeeds', () => {
  it('lands only once GitLab moved trunk to exactly the tested sha, never while the merge request is only set to auto-merge', async () => {
    const p = await setup();
    const before = await p.bare.git('rev-parse', 'main');
    await p.gl.holdAutoMerge(true);
    const running = startCommand({
      repo: p.repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env },
      print: () => {},
    });
    await until(() => p.gl.mergeRequests().some((m) => m.autoMerge), 'the merge request to be set to auto-merge');
    for (let asks = ofType(latestEvents(p), 'pr.requested').length; ofType(latestEvents(p), 'pr.requested').length < asks + 2; )
      await new Promise((r) => setTimeout(r, 50));
    expect(ofType(latestEvents(p), 'block.landed')).toEqual([]);
    expect(ofType(latestEvents(p), 'land.intent')).toEqual([]);
    expect(await p.bare.git('rev-parse', 'main')).toBe(before);
    await p.gl.holdAutoMerge(false);
    expect(await running).toBe(0);

    const run = latestEvents(p);
    const head = await p.bare.git('rev-parse', `refs/heads/tron/${ID}`);
    // GitLab moved trunk (fast-forward), to the head tron tested and handed over.
    expect(await p.bare.git('rev-parse', 'main')).toBe(head);
    expect(ofType(run, 'pr.requested').find((e) => e.queue === 'enqueue')).toMatchObject({ sha: head });
    expect(ofType(run, 'pr.observed').some((e) => e.sha === head && e.checks.every((c) => c.state === 'success'))).toBe(true);
    expect(ofType(run, 'block.landed')).toEqual([expect.objectContaining({ block: ID, sha: head })]);
    expect(p.gl.mergeRequests()).toHaveLength(1);
    expect(p.gl.mergeRequests()[0]).toMatchObject({ state: 'merged' });
    expect(p.gl.issue(1)!.state).toBe('closed');
    expect(p.gl.notes(1).some((n) => n.body.includes(head))).toBe(true);
    expect(replay(run, ctx)).toMatchObject({ ok: true });
  });
});
