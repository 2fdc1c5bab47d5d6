/**
 * GitLab with `land = "pr"`, end to end: `tron start` against the test GitLab server over
 * a real remote whose post-receive hook plays an external CI (commit statuses, which
 * GitLab makes the sha's pipeline). A block lands only when tron's own test and the
 * pipeline on the merge request's head sha are green on the same sha; a red pipeline's
 * job log reaches the builder; one merge request per block; a missing pipeline never lands.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType, runTron } from '../testing/project.ts';
import { GitLabForge } from './gitlab.ts';
import { statusCommand } from '../commands/status.ts';
import { systemClock } from '../os/clock.ts';

const CI = `test "$(cat greeting.txt 2>/dev/null)" = hello || { echo "greeting.test.js: expected hello, got $(cat greeting.txt 2>/dev/null)"; exit 1; }`;

/** A builder that writes "helo" until its prompt carries the pipeline's words, then "hello". */
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

async function setup(opts: { ci?: boolean; forge?: string; builder?: () => string }): Promise<GitLabProject> {
  const p = await gitlabProject({ builder: opts.builder ?? learningBuilder, forge: `land = "pr"\n${opts.forge ?? ''}` });
  onTestFinished(() => p.cleanup());
  if (opts.ci !== false) await p.ci('test', CI);
  p.gl.openIssue({ title: 'Add a greeting', description: 'greeting.txt says hello.\n\n- [ ] greeting.txt says hello', labels: ['tron'] });
  return p;
}

function ownGreenShas(events: readonly TronEvent[]): Set<string> {
  const out = new Set<string>();
  for (const e of events) {
    if (e.type === 'candidate.tested' && e.ok) out.add(e.sha);
    if (e.type === 'gate.passed') out.add(e.sha);
  }
  return out;
}

describe('GitLab merge requests, end to end', () => {
  it("lands through one merge request only when tron's test and the pipeline are green on the same sha, after a red pipeline's log reached the builder", async () => {
    const p = await setup({});
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(0);

    const observed = ofType(run.events, 'pr.observed');
    const red = observed.find((e) => e.checks.some((c) => c.state === 'failure'))!;
    expect(red.checks[0]).toMatchObject({ name: 'pipeline', state: 'failure', text: expect.stringContaining('expected hello, got helo') });
    const feedback = ofType(run.events, 'gate.failed').find((e) => e.facts.some((f) => f.name === 'hosted_checks'))!;
    expect(feedback.facts[0]!.evidence).toContain('expected hello, got helo');

    const [intent] = ofType(run.events, 'land.intent');
    const [landed] = ofType(run.events, 'block.landed');
    expect(ofType(run.events, 'land.intent')).toHaveLength(1);
    const green = observed.filter((e) => e.checks.every((c) => c.state === 'success')).map((e) => e.sha);
    expect(green).toContain(intent!.sha);
    expect(ownGreenShas(run.events).has(intent!.sha)).toBe(true);
    // The pipeline that was green ran on exactly that sha.
    expect(p.gl.pipelines().find((x) => x.sha === intent!.sha)?.status).toBe('success');
    expect(await p.bare.git('rev-parse', 'main')).toBe(intent!.sha);

    // One merge request for the block across both pushes; GitLab marks it merged once trunk holds its head.
    expect(p.gl.mergeRequests()).toHaveLength(1);
    const forge = new GitLabForge({ repo: p.gl.path, token: p.gl.token, apiUrl: p.gl.url });
    expect(await forge.pull(p.gl.mergeRequests()[0]!.iid)).toMatchObject({
      head: 'tron/gl-1-add-a-greeting',
      base: 'main',
      merged: true,
      headSha: intent!.sha,
    });
    expect(replay(run.events, ctx)).toMatchObject({ ok: true });

    // tron status names the block's GitLab issue and merge request (each numbered in its own sequence, as GitLab does).
    const said: string[] = [];
    await statusCommand({ repo: p.repo.dir, json: false, clock: systemClock, print: (l) => said.push(l) });
    expect(said.join('\n')).toMatch(
      /gl-1-add-a-greeting[\s\S]*issue: #1 http:\S+\/-\/issues\/1\n\s+pull request: #1 http:\S+\/-\/merge_requests\/1 \(merged\)/,
    );

    const told = p.gl.notes(1).filter((n) => !n.system);
    expect(told.some((n) => n.body.includes(`Landed on \`main\` in ${landed!.sha}`))).toBe(true);
    expect(p.gl.issue(1)!.state).toBe('closed');

    // Started again: still one merge request, and no note twice.
    const notes = told.length;
    await runTron(p.repo, { env: p.env });
    expect(p.gl.mergeRequests()).toHaveLength(1);
    expect(p.gl.notes(1).filter((n) => !n.system)).toHaveLength(notes);
  });

  it('never lands past a pipeline that stays red: the block goes back to build until its budget is spent, then is parked', async () => {
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
    expect(p.gl.mergeRequests()).toHaveLength(1);
    expect(p.gl.notes(1).some((n) => n.body.includes('tron parked'))).toBe(true);
  });

  it('never lands past a pipeline that never comes: it asks again, then pages the operator', async () => {
    const p = await setup({ ci: false, forge: 'retries = 2\n' });
    const before = await p.bare.git('rev-parse', 'main');
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'land.intent')).toEqual([]);
    expect(ofType(run.events, 'escalation.raised').at(-1)!.detail).toContain('pipeline never reported');
    expect(await p.bare.git('rev-parse', 'main')).toBe(before);
    expect(p.gl.mergeRequests()).toHaveLength(1);
  });
});
