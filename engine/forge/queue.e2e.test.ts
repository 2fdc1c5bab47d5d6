/**
 * PR mode through GitHub's merge queue, end to end: tron (in process) against the test
 * GitHub server, whose queue makes merge group commits, waits for hosted CI on them, and
 * then moves trunk itself — or takes the pull request out. tron enqueues only once its own
 * test and the required checks are green on the pinned sha, never counts "queued" as
 * merged, and records the landing only once trunk holds exactly the tree it tested.
 */
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startCommand } from '../commands/start.ts';
import { systemClock } from '../os/clock.ts';
import { replay } from '../core/replay.ts';
import { BIN } from '../testing/crash.ts';
import { ctx } from '../testing/driver.ts';
import { forgeProject, type ForgeProject } from '../testing/github/project.ts';
import { ofType } from '../testing/project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { latestEvents, startIn, until } from '../testing/in-process.ts';

/** Writes the greeting, and one more line of builds.txt each time it builds (so a rebuild is a new tree). */
const BUILDER = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt greets"}}'; exit 0 ;;
esac
echo hello > greeting.txt
echo "build $(date +%s%N)" >> builds.txt
git add -A; git commit -qm "$TRON_BLOCK: greeting"
echo ">>DONE"
`;

const ID = 'gh-1-add-a-greeting';

async function setup(): Promise<ForgeProject> {
  const p = await forgeProject({ builder: BUILDER, forge: 'land = "pr"\nmerge = "queue"\n' });
  onTestFinished(() => p.cleanup());
  p.gh.protect('main', ['ci/test']);
  p.gh.mergeQueue('main');
  await p.ci('ci/test', 'test -s greeting.txt');
  p.gh.openIssue({ title: 'Add a greeting', body: '- [ ] greeting.txt greets', labels: ['tron'] });
  return p;
}

describe('PR mode through the merge queue', () => {
  it('lands only once the queue moved trunk to exactly the tested tree, never while the pull request is only queued', async () => {
    const p = await setup();
    const before = await p.bare.git('rev-parse', 'main');
    p.gh.onMergeGroup((sha) => p.gh.check(sha, { name: 'ci/test', conclusion: 'success' }));
    p.gh.holdQueue(true);
    const running = startIn(p);
    await until(
      () => p.gh.queue().some((e) => e.group) && ofType(latestEvents(p), 'pr.wait').some((e) => e.reason === 'in the merge queue'),
      'the pull request to sit in the merge queue',
    );
    // Queued, its merge group green: GitHub would say the merge "succeeded" — tron has landed nothing.
    const group = p.gh.queue()[0]!.group!;
    for (let asks = ofType(latestEvents(p), 'pr.requested').length; ofType(latestEvents(p), 'pr.requested').length < asks + 2; )
      await new Promise((r) => setTimeout(r, 50));
    expect(ofType(latestEvents(p), 'block.landed')).toEqual([]);
    expect(ofType(latestEvents(p), 'land.intent')).toEqual([]);
    expect(await p.bare.git('rev-parse', 'main')).toBe(before);
    p.gh.holdQueue(false);
    expect(await running).toBe(0);

    const run = latestEvents(p);
    const head = await p.bare.git('rev-parse', `refs/heads/tron/${ID}`);
    // Trunk moved by the queue, to its merge group commit: exactly the tree tron tested, on the trunk it tested on.
    expect(await p.bare.git('rev-parse', 'main')).toBe(group);
    expect(await p.bare.git('rev-parse', `${group}^{tree}`)).toBe(await p.bare.git('rev-parse', `${head}^{tree}`));
    expect(await p.bare.git('rev-parse', `${group}^1`)).toBe(before);
    // The enqueue named the head tron tested, after its own test and the required check were green there.
    const asks = ofType(run, 'pr.requested');
    expect(asks.find((e) => e.queue === 'enqueue')).toMatchObject({ sha: head });
    const greenBefore = ofType(run, 'pr.observed').find((e) => e.checks.every((c) => c.state === 'success') && !e.queue);
    expect(greenBefore).toBeDefined();
    expect(ofType(run, 'land.intent')).toEqual([expect.objectContaining({ sha: group, queued: true })]);
    expect(ofType(run, 'block.landed')).toEqual([expect.objectContaining({ block: ID, sha: group, top: group })]);
    // The landed ref marks the queue's commit, on trunk's first-parent line (the block's own commit is its second parent).
    expect(await p.bare.git('rev-parse', `refs/tron/landed/${ID}`)).toBe(group);
    expect(await p.bare.git('rev-parse', `${group}^2`)).toBe(head);
    expect(await p.repo.git('rev-parse', 'main')).toBe(group);
    expect(p.gh.pulls()).toHaveLength(1);
    expect(p.gh.pulls()[0]).toMatchObject({ merged: true, merge_commit_sha: group });
    expect(p.gh.issue(1)!.state).toBe('closed');
    expect(p.gh.comments(1).some((c) => c.body.includes(group))).toBe(true);
    expect(replay(run, ctx)).toMatchObject({ ok: true });
    // Started again, tron believes the landing it recorded: nothing to do, nothing set aside.
    const said: string[] = [];
    const again = await startCommand({
      repo: p.repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env },
      print: (l) => said.push(l),
    });
    expect(again, said.join('\n')).toBe(0);
    expect(said.join('\n')).not.toContain('not believed');
    expect(said.join('\n')).toContain('nothing to do');
  });

  it('sends the block back to its builder with the reason when the queue takes it out, and lands it after the fix', async () => {
    const p = await setup();
    let groups = 0;
    // The first merge group's CI is red; the next one's green.
    p.gh.onMergeGroup((sha) => {
      groups++;
      p.gh.check(sha, {
        name: 'ci/test',
        conclusion: groups === 1 ? 'failure' : 'success',
        text: groups === 1 ? 'merge group: flaky integration test' : '',
      });
    });
    expect(await startIn(p)).toBe(0);
    const run = latestEvents(p);
    const back = ofType(run, 'gate.failed').find((e) => e.facts.some((f) => f.name === 'merge_queue'));
    expect(back?.facts[0]?.evidence).toContain('the required check ci/test failed on the merge group');
    expect(ofType(run, 'block.dispatched').filter((e) => e.block === ID && e.kind === 'build').length).toBeGreaterThanOrEqual(2);
    expect(ofType(run, 'block.landed')).toHaveLength(1);
    expect(groups).toBe(2);
    const main = await p.bare.git('rev-parse', 'main');
    expect(await p.bare.git('rev-parse', `${main}^{tree}`)).toBe(await p.bare.git('rev-parse', `refs/heads/tron/${ID}^{tree}`));
    expect(p.gh.pulls()).toHaveLength(1);
  });

  it('records the landing at the next start when the queue merged while tron was killed, pushing nothing twice', {
    timeout: 120_000,
  }, async () => {
    const p = await setup();
    const before = await p.bare.git('rev-parse', 'main');
    p.gh.onMergeGroup((sha) => p.gh.check(sha, { name: 'ci/test', conclusion: 'success' }));
    p.gh.holdQueue(true);
    const tron = () =>
      execa('node', [BIN, 'start', '--repo', p.repo.dir], {
        reject: false,
        stdin: 'ignore',
        env: { ...GIT_IDENTITY_ENV, ...p.env },
        timeout: 90_000,
      });
    const first = tron();
    await until(
      () => p.gh.queue().some((e) => e.group) && ofType(latestEvents(p), 'pr.wait').some((e) => e.reason === 'in the merge queue'),
      'the pull request to sit in the merge queue',
    );
    first.kill('SIGKILL');
    expect((await first).signal).toBe('SIGKILL');
    const group = p.gh.queue()[0]!.group!;
    // While tron is down, the queue merges it (it moves on every request GitHub serves).
    p.gh.holdQueue(false);
    for (let i = 0; i < 100 && !p.gh.pulls()[0]!.merged; i++)
      await fetch(`${p.gh.url}/rate_limit`, { headers: { authorization: `token ${p.gh.token}` } });
    expect(await p.bare.git('rev-parse', 'main')).toBe(group);
    expect(await p.repo.git('rev-parse', 'main')).toBe(before);

    const second = await tron();
    expect(
      second.exitCode,
      `${second.stdout}\n${JSON.stringify(latestEvents(p).filter((e) => e.type.startsWith('block.') || e.type.startsWith('escalation') || e.type.startsWith('recovery')))}`,
    ).toBe(0);
    const run = latestEvents(p);
    expect(ofType(run, 'remote.recovered')).toEqual([
      expect.objectContaining({ sha: group, detail: expect.stringContaining('the merge queue merged pull request') }),
    ]);
    // Nothing was pushed to trunk, landed or queued a second time.
    expect(ofType(run, 'land.intent')).toEqual([]);
    expect(ofType(run, 'pr.requested')).toEqual([]);
    expect(await p.bare.git('rev-parse', `refs/tron/landed/${ID}`)).toBe(group);
    expect(await p.bare.git('rev-parse', 'main')).toBe(group);
    expect(await p.repo.git('rev-parse', 'main')).toBe(group);
    expect(await p.repo.git('show', 'main:greeting.txt')).toBe('hello');
    expect(p.gh.pulls()).toHaveLength(1);
    expect(p.gh.issue(1)!.state).toBe('closed');
    expect(p.gh.comments(1).filter((c) => c.body.includes(':landed'))).toHaveLength(1);
  });
});
