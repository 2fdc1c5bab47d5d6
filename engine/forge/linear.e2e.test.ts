/**
 * Linear intake end to end: `tron start` with `[intake] source = "linear"` and no
 * `[forge]`, against the test Linear server (through @linear/sdk; every query validated
 * against Linear's schema), its code landing on a real remote served by git daemon. A
 * labelled issue becomes a block, lands on the remote's trunk, gets one comment naming
 * the landed sha and is moved to the team's Done; a malformed issue gets one comment and
 * no work; a restart tells nothing twice; the key reaches no worker.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { forgeProject } from '../testing/github/project.ts';
import { GitHubForge } from './github.ts';
import { type LinearProject, linearProject } from '../testing/linear/project.ts';
import { startLinearServer } from '../testing/linear/server.ts';
import { ofType, readRunFile, runTron } from '../testing/project.ts';
import { statusCommand } from '../commands/status.ts';
import { systemClock } from '../os/clock.ts';
import { greetingBuilder } from '../testing/workers.ts';

async function intakeProject(intake?: string): Promise<LinearProject> {
  const p = await linearProject({
    builder: greetingBuilder,
    ...(intake && { intake }),
  });
  onTestFinished(() => p.cleanup());
  return p;
}

const mine = (p: LinearProject, n: number) => p.linear.issue(n)!.comments.filter((c) => c.user === p.linear.viewer);

describe('Linear issue intake, end to end', () => {
  it('lands a labelled issue on the remote, comments the landed sha once and moves it to Done; a malformed issue gets one comment and no work', async () => {
    const p = await intakeProject();
    const { repo, linear, bare, out, env } = p;
    const good = linear.openIssue({ title: 'Fix login', description: 'Say hello.\n\n- [ ] greeting.txt says hello', labels: ['tron'] });
    const bad = linear.openIssue({ title: 'Make it nicer', description: 'You know what I mean.', labels: ['tron'] });
    const other = linear.openIssue({ title: 'Not for tron', description: '- [ ] nothing', labels: ['bug'] });

    const run = await runTron(repo, { env });
    expect(run.exit, JSON.stringify(run.events.filter((e) => e.type === 'block.parked' || e.type === 'escalation.raised'))).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['lin-eng-1-fix-login']);
    expect(ofType(run.events, 'block.dispatched').every((e) => e.block === 'lin-eng-1-fix-login')).toBe(true);
    // The code landed through the remote: its trunk is the landing's top.
    expect(await bare.git('rev-parse', 'main')).toBe(landed[0]!.top);

    const told = mine(p, good).map((c) => c.body);
    expect(told).toHaveLength(2);
    expect(told[0]).toContain('started work on this issue as block `lin-eng-1-fix-login`');
    expect(told[1]).toContain(`Landed on \`main\` in ${landed[0]!.sha}`);
    expect(linear.issue(good)!.state).toMatchObject({ name: 'Done', type: 'completed' });
    expect(ofType(run.events, 'forge.commented').map((e) => e.about)).toEqual(expect.arrayContaining(['started', 'landed', 'closed']));

    const refused = mine(p, bad);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.body).toContain('no acceptance criteria');
    expect(linear.issue(bad)!.state.name).toBe('Todo');
    expect(linear.issue(other)!.comments).toEqual([]);

    // Every request was a query that validates against Linear's schema, and none was refused.
    expect(linear.invalid).toEqual([]);
    expect(linear.seen.length).toBeGreaterThan(0);
    expect(linear.seen.every((s) => s.valid && s.status === 200)).toBe(true);
    expect(replay(run.events, ctx)).toMatchObject({ ok: true });

    // tron status and the report name the block's issue as Linear does.
    const said: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: systemClock, print: (l) => said.push(l) });
    expect(said.join('\n')).toMatch(/lin-eng-1-fix-login[\s\S]*issue: ENG-1 http:\/\/127\.0\.0\.1:\d+\/acme\/issue\/ENG-1$/);
    expect(readRunFile(run.runDir, 'report.md')).toMatch(/\| lin-eng-1-fix-login \| \[ENG-1\]\(http\S+\/issue\/ENG-1\) \| — \|/);

    // The builder's env list names LINEAR_*: the key is not in it all the same.
    const builderEnv = await readFile(join(out, 'builder-lin-eng-1-fix-login.env'), 'utf8');
    expect(builderEnv).not.toContain(linear.key);

    // Started again: the landed issue is Done and not taken in, nothing is built, and no issue is told twice.
    const again = await runTron(repo, { env });
    expect(again.exit).toBe(0);
    expect(again.runDir === run.runDir || ofType(again.events, 'block.dispatched').length === 0).toBe(true);
    expect(await bare.git('rev-parse', 'main')).toBe(landed[0]!.top);
    expect(mine(p, good)).toHaveLength(2);
    expect(mine(p, bad)).toHaveLength(1);
  });

  it('lands a Linear issue through the forge\'s pull request when [forge] land = "pr", and still tells and closes it in Linear', async () => {
    const linear = await startLinearServer();
    onTestFinished(() => linear.close());
    const intake = `source = "linear"\nteam = "ENG"\napi_url = "${linear.url}"\nbackoff = "50ms"\n`;
    const p = await forgeProject({ builder: greetingBuilder, forge: 'land = "pr"\n', intake });
    onTestFinished(() => p.cleanup());
    p.gh.protect('main', ['ci/test']);
    await p.ci('ci/test', 'test "$(cat greeting.txt)" = hello');
    linear.openIssue({ title: 'Fix login', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
    // A GitHub issue with the label is not taken in: the issues are Linear's.
    p.gh.openIssue({ title: 'On GitHub', body: '- [ ] nothing', labels: ['tron'] });

    const run = await runTron(p.repo, { env: { ...p.env, LINEAR_API_KEY: linear.key } });
    expect(run.exit, run.output.join('\n')).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['lin-eng-1-fix-login']);
    // One pull request, its head what landed (the forge marks it merged once trunk holds it).
    expect(p.gh.pulls()).toMatchObject([{ head: { ref: 'tron/lin-eng-1-fix-login', sha: landed[0]!.top } }]);
    const forge = new GitHubForge({ repo: `${p.gh.owner}/${p.gh.repo}`, token: p.gh.token, apiUrl: p.gh.url });
    expect(await forge.pull(p.gh.pulls()[0]!.number)).toMatchObject({ merged: true });
    expect(await p.bare.git('rev-parse', 'main')).toBe(landed[0]!.top);
    expect(linear.issue(1)!.state.type).toBe('completed');
    expect(linear.issue(1)!.comments.filter((c) => c.body.includes(`in ${landed[0]!.sha}`))).toHaveLength(1);
    expect(p.gh.comments(1)).toEqual([]);
    expect(linear.invalid).toEqual([]);
  });

  it('takes in only the issues in the state `[intake] state` names', async () => {
    const { repo, linear, env } = await intakeProject('state = "In Progress"');
    linear.openIssue({ title: 'Not yet', description: '- [ ] greeting.txt says hello', labels: ['tron'], state: 'Backlog' });
    linear.openIssue({ title: 'Fix login', description: '- [ ] greeting.txt says hello', labels: ['tron'], state: 'In Progress' });
    const run = await runTron(repo, { env });
    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['lin-eng-2-fix-login']);
    expect(linear.issue(1)!.comments).toEqual([]);
  });

  it('waits out a rate limit at start and lands all the same', async () => {
    const { repo, linear, env } = await intakeProject();
    linear.openIssue({ title: 'Fix login', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
    linear.rateLimit(2, 30);
    const run = await runTron(repo, { env });
    expect(run.exit).toBe(0);
    expect(linear.seen.filter((s) => s.status === 400)).toHaveLength(2);
    expect(linear.issue(1)!.state.type).toBe('completed');
  });

  it('refuses to start without LINEAR_API_KEY (TRON_LINEAR_TOKEN), with a key Linear refuses (TRON_FORGE_AUTH) and with a team Linear does not have (TRON_LINEAR_TEAM)', async () => {
    const { repo, linear, env } = await intakeProject();
    const { startCommand } = await import('../commands/start.ts');
    const { systemClock } = await import('../os/clock.ts');
    const { LINEAR_API_KEY: _, ...without } = env;
    const start = (e: Record<string, string>) =>
      startCommand({ repo: repo.dir, clock: systemClock, env: { PATH: process.env.PATH, ...e }, print: () => {} }).catch((x: unknown) => x);
    expect(await start(without)).toMatchObject({ problems: [{ code: 'TRON_LINEAR_TOKEN', path: '$LINEAR_API_KEY' }] });
    expect(linear.seen).toEqual([]);
    const refused = await start({ ...env, LINEAR_API_KEY: 'lin_api_revoked' });
    expect(refused).toMatchObject({ problems: [{ code: 'TRON_FORGE_AUTH', path: '$LINEAR_API_KEY' }] });
    expect(JSON.stringify(refused)).not.toContain('lin_api_revoked');

    const config = join(repo.dir, '.tron', 'config.toml');
    const text = await readFile(config, 'utf8');
    await import('node:fs/promises').then((fs) => fs.writeFile(config, text.replace('team = "ENG"', 'team = "OPS"')));
    await repo.git('commit', '-qam', 'the wrong team');
    const err = await start(env);
    expect(err).toMatchObject({ problems: [{ code: 'TRON_LINEAR_TEAM' }] });
    expect(JSON.stringify(err)).not.toContain(linear.key);
  });
});
