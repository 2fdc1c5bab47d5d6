/**
 * GitLab intake end to end: `tron start` with `[forge] kind = "gitlab"` and [intake]
 * against the test GitLab server (through @gitbeaker/rest), its repository a real remote
 * served by git daemon. A labelled issue becomes a block, a sim worker builds it, tron
 * lands it and closes the issue with a note naming the landed sha; a malformed issue gets
 * one explanatory note and no work; the token reaches no worker.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import { ofType, runTron } from '../testing/project.ts';
import { greetingBuilder } from '../testing/workers.ts';

async function intakeProject(): Promise<GitLabProject> {
  const p = await gitlabProject({
    builder: greetingBuilder,
    builderEnv: ['GITLAB_*'],
  });
  onTestFinished(() => p.cleanup());
  return p;
}

describe('GitLab issue intake, end to end', () => {
  it('lands a labelled issue as a block, notes and closes the issue with the landed sha, and gives a malformed issue one note and no work', async () => {
    const { repo, gl, bare, out, env } = await intakeProject();
    const good = gl.openIssue({ title: 'Add a greeting', description: 'Say hello.\n\n- [ ] greeting.txt says hello', labels: ['tron'] });
    const bad = gl.openIssue({ title: 'Make it nicer', description: 'You know what I mean.', labels: ['tron'] });
    gl.openIssue({ title: 'Not for tron', description: '- [ ] nothing', labels: ['bug'] });

    const run = await runTron(repo, { env });
    expect(run.exit, JSON.stringify(run.events.filter((e) => e.type === 'block.parked' || e.type === 'escalation.raised'))).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['gl-1-add-a-greeting']);
    expect(ofType(run.events, 'block.dispatched').every((e) => e.block === 'gl-1-add-a-greeting')).toBe(true);
    expect(await bare.git('rev-parse', 'main')).toBe(landed[0]!.top);

    const told = gl.notes(good).filter((n) => !n.system);
    expect(told.map((n) => n.author)).toEqual(['tron-bot', 'tron-bot']);
    expect(told[0]!.body).toContain('started work on this issue as block `gl-1-add-a-greeting`');
    expect(told[1]!.body).toContain(`Landed on \`main\` in ${landed[0]!.sha}`);
    expect(gl.issue(good)).toMatchObject({ state: 'closed', closedBy: 'tron-bot' });
    const bads = gl.notes(bad).filter((n) => !n.system);
    expect(bads).toHaveLength(1);
    expect(bads[0]!.body).toContain('no acceptance criteria');
    expect(gl.issue(bad)!.state).toBe('opened');
    // Every call went to the project by its URL-encoded path, with the token in PRIVATE-TOKEN (a wrong one is a 401).
    expect(gl.seen.every((s) => s.status < 400)).toBe(true);
    expect(gl.seen.some((s) => s.path.startsWith(`/api/v4/projects/${encodeURIComponent(gl.path)}/issues?`))).toBe(true);

    expect(replay(run.events, ctx)).toMatchObject({ ok: true });
    // The builder's env list names GITLAB_*: the token is not in it all the same.
    const builderEnv = await readFile(join(out, 'builder-gl-1-add-a-greeting.env'), 'utf8');
    expect(builderEnv).not.toContain(gl.token);

    // Started again: nothing is noted twice.
    await runTron(repo, { env });
    expect(gl.notes(bad).filter((n) => !n.system)).toHaveLength(1);
    expect(gl.notes(good).filter((n) => !n.system)).toHaveLength(2);
  });

  it('does not take in an issue a stranger labelled: only a member with developer access or more counts', async () => {
    const { repo, gl, env } = await intakeProject();
    gl.person('mallory', 10);
    gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt says hello', labels: ['tron'], author: 'mallory' });
    const run = await runTron(repo, { env });
    expect(ofType(run.events, 'block.dispatched')).toEqual([]);
    expect(ofType(run.events, 'forge.ignored')).toMatchObject([{ who: 'mallory', what: 'label' }]);
  });

  it('refuses to start without GITLAB_TOKEN (TRON_FORGE_TOKEN, exit 2), before any call', async () => {
    const { repo, gl, env } = await intakeProject();
    const { GITLAB_TOKEN: _, ...without } = env;
    const { startCommand } = await import('../commands/start.ts');
    const { systemClock } = await import('../os/clock.ts');
    const err = await startCommand({
      repo: repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, ...without },
      print: () => {},
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ problems: [{ code: 'TRON_FORGE_TOKEN', path: '$GITLAB_TOKEN' }] });
    expect(gl.seen).toEqual([]);
  });
});
