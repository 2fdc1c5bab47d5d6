/**
 * PR mode with people in it, end to end: tron runs (in process) while the test acts as
 * the team on the test GitHub server — requesting changes, approving, closing a pull
 * request — and as a forge that rate-limits and fails mid-run.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { forgeProject, type ForgeProject } from '../testing/github/project.ts';
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

async function setup(forge: string): Promise<ForgeProject> {
  const p = await forgeProject({ builder: BUILDER, forge: `land = "pr"\n${forge}` });
  onTestFinished(() => p.cleanup());
  p.gh.protect('main', ['ci/test']);
  await p.ci('ci/test', 'test -s greeting.txt');
  p.gh.openIssue({ title: 'Add a greeting', body: '- [ ] greeting.txt greets', labels: ['tron'] });
  return p;
}

const waits = (p: ForgeProject) => ofType(latestEvents(p), 'pr.wait').length;

describe('PR mode with people', () => {
  it('turns "changes requested" into a build with the notes, and lands once a person approves the fixed head', async () => {
    const p = await setup('require_human_approval = true\n');
    const running = startIn(p);
    await until(() => waits(p) > 0, 'tron to wait for an approval');
    const first = p.gh.pulls()[0]!;
    await p.gh.review(first.number, { state: 'CHANGES_REQUESTED', body: 'Please say hello, not hi.', user: 'ada' });
    await until(
      () => ofType(latestEvents(p), 'gate.failed').some((e) => e.facts.some((f) => f.name === 'changes_requested')),
      'the changes to reach the builder',
    );
    const fixed = () => p.bare.git('show', 'refs/heads/tron/gh-1-add-a-greeting:greeting.txt').catch(() => '');
    for (let i = 0; i < 1200 && (await fixed()) !== 'hello'; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await fixed()).toBe('hello');
    await p.gh.review(first.number, { state: 'APPROVED', body: 'Thanks!', user: 'ada' });
    expect(await running).toBe(0);
    expect(await p.bare.git('show', 'main:greeting.txt')).toBe('hello');
    expect(p.gh.pulls()).toHaveLength(1);
    const feedback = ofType(latestEvents(p), 'gate.failed').find((e) => e.facts.some((f) => f.name === 'changes_requested'))!;
    expect(feedback.facts[0]!.evidence).toBe('ada requested changes on the pull request: Please say hello, not hi.');
  });

  it('abandons the block, with their words, when a person closes its pull request', async () => {
    const p = await setup('require_human_approval = true\n');
    const running = startIn(p);
    await until(() => waits(p) > 0, 'tron to wait for an approval');
    p.gh.closePull(p.gh.pulls()[0]!.number, 'We will not do this: the greeting moves to the app shell.');
    expect(await running).toBe(3);
    const [abandoned] = ofType(latestEvents(p), 'block.abandoned');
    expect(abandoned).toMatchObject({ block: 'gh-1-add-a-greeting', reason: expect.stringContaining('We will not do this') });
    expect(ofType(latestEvents(p), 'land.intent')).toEqual([]);
    expect(p.gh.comments(1).some((c) => c.body.includes('tron abandoned') && c.body.includes('We will not do this'))).toBe(true);
  });

  it('waits out a rate limit for as long as GitHub asks, and a 5xx with its backoff, as timer events, then lands', async () => {
    const p = await setup('');
    p.gh.fault(
      {
        status: 403,
        message: 'You have exceeded a secondary rate limit.',
        headers: { 'retry-after': '1' },
        match: /^GET \/repos\/acme\/app\/pulls$/,
      },
      { status: 502, message: 'Server Error', match: /^GET .*\/check-runs$/ },
    );
    expect(await startIn(p)).toBe(0);
    const failed = ofType(latestEvents(p), 'pr.failed');
    expect(failed.map((e) => e.kind)).toEqual(['rate_limited', 'transient']);
    const waited = ofType(latestEvents(p), 'pr.wait');
    expect(waited[0]).toMatchObject({ wait_ms: 1000, reason: expect.stringContaining('rate limited') });
    expect(waited[1]).toMatchObject({ wait_ms: 50 });
    expect(ofType(latestEvents(p), 'pr.waited')).toHaveLength(2);
    expect(ofType(latestEvents(p), 'block.landed')).toHaveLength(1);
    expect(p.gh.pulls()).toHaveLength(1);
  });
});
