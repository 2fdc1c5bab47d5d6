/**
 * PR mode end to end: `tron start` with `[forge] land = "pr"` against the test GitHub
 * server, over a real remote served by git daemon whose post-receive hook plays hosted CI.
 * A stack lands only when tron's own test and the required hosted checks are green on the
 * same sha; a red check's words reach the builder; a red or missing check never lands.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { GitHubForge } from './github.ts';
import { forgeProject, type ForgeProject } from '../testing/github/project.ts';
import { ofType, readRunFile, runTron } from '../testing/project.ts';
import { statusCommand } from '../commands/status.ts';
import { systemClock } from '../os/clock.ts';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import type { TronEvent } from '../core/events.ts';

const CI = `test "$(cat greeting.txt 2>/dev/null)" = hello || { echo "greeting.test.js: expected hello, got $(cat greeting.txt 2>/dev/null)"; exit 1; }`;

/** A builder that writes "helo" until its prompt carries the hosted check's words, then "hello". */
const learningBuilder = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt says hello"}}'; exit 0 ;;
esac
case "$prompt" in
  *"expected hello, got helo"*) echo hello > greeting.txt ;;
  *) echo helo > greeting.txt ;;
esac
git add -A; git commit -qm "$TRON_BLOCK: greeting"
echo ">>DONE"
`;

async function setup(opts: { forge?: string; ci?: boolean; builder?: () => string }): Promise<ForgeProject> {
  const p = await forgeProject({ builder: opts.builder ?? learningBuilder, forge: `land = "pr"\n${opts.forge ?? ''}` });
  onTestFinished(() => p.cleanup());
  p.gh.protect('main', ['ci/test']);
  if (opts.ci !== false) await p.ci('ci/test', CI);
  p.gh.openIssue({ title: 'Add a greeting', body: 'greeting.txt says hello.\n\n- [ ] greeting.txt says hello', labels: ['tron'] });
  return p;
}

/** The sha tron's own hermetic test found green for the landing: the lane's candidate, or the gate's when the lane skipped it. */
function ownGreenShas(events: readonly TronEvent[]): Set<string> {
  const out = new Set<string>();
  for (const e of events) {
    if (e.type === 'candidate.tested' && e.ok) out.add(e.sha);
    if (e.type === 'gate.passed') out.add(e.sha);
  }
  return out;
}

describe('PR mode, end to end', () => {
  it("lands an issue through one pull request only when tron's test and the hosted checks are green on the same sha, after a red check's words reached the builder", async () => {
    const p = await setup({});
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(0);

    const observed = ofType(run.events, 'pr.observed');
    const red = observed.find((e) => e.checks.some((c) => c.state === 'failure'))!;
    expect(red.checks[0]).toMatchObject({ name: 'ci/test', state: 'failure', text: expect.stringContaining('expected hello, got helo') });
    const feedback = ofType(run.events, 'gate.failed').find((e) => e.facts.some((f) => f.name === 'hosted_checks'))!;
    expect(feedback.facts[0]!.evidence).toContain('expected hello, got helo');

    const [landed] = ofType(run.events, 'block.landed');
    const [intent] = ofType(run.events, 'land.intent');
    expect(ofType(run.events, 'land.intent')).toHaveLength(1);
    const greenHosted = observed.filter((e) => e.checks.every((c) => c.state === 'success')).map((e) => e.sha);
    expect(greenHosted).toContain(intent!.sha);
    expect(ownGreenShas(run.events).has(intent!.sha)).toBe(true);
    expect(landed!.top).toBe(intent!.sha);
    expect(await p.bare.git('rev-parse', 'main')).toBe(intent!.sha);
    expect(await p.bare.git('show', 'main:greeting.txt')).toBe('hello');

    // One pull request for the block, across both pushes; marked merged once trunk held its head.
    expect(p.gh.pulls()).toHaveLength(1);
    const forge = new GitHubForge({ repo: 'acme/app', token: p.gh.token, apiUrl: p.gh.url });
    const pull = await forge.pull(p.gh.pulls()[0]!.number);
    expect(pull).toMatchObject({ merged: true, head: 'tron/gh-1-add-a-greeting', headSha: intent!.sha });
    expect(p.gh.issue(pull.number)!.body).toMatch(/greeting\.txt says hello[\s\S]*Closes/);

    // The forge entered the run only as recorded inputs: replay re-derives every decision, waits and landing included.
    expect(replay(run.events, ctx)).toMatchObject({ ok: true });

    // tron status and the report name the block's issue and pull request.
    const said: string[] = [];
    await statusCommand({ repo: p.repo.dir, json: false, clock: systemClock, print: (l) => said.push(l) });
    expect(said.join('\n')).toMatch(
      /gh-1-add-a-greeting[\s\S]*issue: #1 http:\/\/127\.0\.0\.1:\d+\/html\/acme\/app\/issues\/1\n\s+pull request: #2 http:\S+\/pull\/2 \(merged\)/,
    );
    expect(readRunFile(run.runDir, 'report.md')).toMatch(
      /## On the forge[\s\S]*\| gh-1-add-a-greeting \| \[#1\]\(http\S+\/issues\/1\) \| \[#2\]\(http\S+\/pull\/2\) \(merged\) \|/,
    );

    // The issue: told it started and where it landed, then closed.
    const told = p.gh.comments(1).map((c) => c.body);
    expect(told.some((b) => b.includes(`Landed on \`main\` in ${landed!.sha}`))).toBe(true);
    expect(p.gh.issue(1)!.state).toBe('closed');
  });

  it('never lands past a required check that stays red: the block goes back to build until its budget is spent, then is parked', async () => {
    const p = await setup({
      builder: () => learningBuilder().replace('*"expected hello, got helo"*) echo hello', '*"never matches"*) echo hello'),
    });
    const before = await p.bare.git('rev-parse', 'main');
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'land.intent')).toEqual([]);
    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(ofType(run.events, 'gate.failed').filter((e) => e.facts.some((f) => f.name === 'hosted_checks')).length).toBeGreaterThan(1);
    expect(await p.bare.git('rev-parse', 'main')).toBe(before);
    expect(p.gh.pulls()).toHaveLength(1);
    expect(p.gh.comments(1).some((c) => c.body.includes('tron parked'))).toBe(true);
  });

  it('never lands past a required check that never reports: it asks again, then pages the operator', async () => {
    const p = await setup({ ci: false, forge: 'retries = 2\n' });
    const before = await p.bare.git('rev-parse', 'main');
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'land.intent')).toEqual([]);
    expect(ofType(run.events, 'pr.wait').length).toBeGreaterThanOrEqual(2);
    expect(ofType(run.events, 'escalation.raised').at(-1)!.detail).toContain('ci/test never reported');
    expect(await p.bare.git('rev-parse', 'main')).toBe(before);
  });
});
