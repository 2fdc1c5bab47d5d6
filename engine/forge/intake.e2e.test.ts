/**
 * Issue intake end to end: `tron start` with [forge] and [intake] against the test GitHub
 * server, its repository a real remote served by git daemon. A labelled issue becomes a
 * block, lands, and its issue is told and closed; a malformed issue gets one comment and
 * no work; the token reaches neither a worker nor a test run.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { BWRAP_SKIP } from '../testing/bwrap.ts';
import type { TronEvent } from '../core/events.ts';
import { replay } from '../core/replay.ts';
import { ctx } from '../testing/driver.ts';
import { type ForgeProject, forgeProject } from '../testing/github/project.ts';
import { ofType, runTron } from '../testing/project.ts';
import { greetingBuilder } from '../testing/workers.ts';

/** A project with no block files, its trunk on the served remote, taking issues labelled tron; removed after the test. */
async function intakeProject(): Promise<ForgeProject> {
  const p = await forgeProject({
    // The builder writes down its environment, builds, and answers the challenge; a pattern in its env list would pass any GITHUB_* on.
    builder: greetingBuilder,
    builderEnv: ['GITHUB_*', 'GH_*'],
    reviewerEnv: ['GITHUB_*'],
    files: (out) => ({
      'tests/env.test.js': `require('node:fs').writeFileSync(${JSON.stringify(out)} + '/test-' + process.pid + '.env', JSON.stringify(process.env));\n`,
    }),
  });
  onTestFinished(() => p.cleanup());
  return p;
}

const ENV = { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };

describe('issue intake, end to end', () => {
  it('lands a labelled issue as a block, tells and closes the issue, and gives a malformed issue one comment and no work', async () => {
    const { repo, gh, bare, out } = await intakeProject();
    const good = gh.openIssue({ title: 'Add a greeting', body: 'Say hello.\n\n- [ ] greeting.txt says hello', labels: ['tron'] });
    const bad = gh.openIssue({ title: 'Make it nicer', body: 'You know what I mean.', labels: ['tron'] });
    gh.openIssue({ title: 'Not for tron', body: '- [ ] nothing', labels: ['bug'] });

    const run = await runTron(repo, { env: { ...ENV, GITHUB_TOKEN: gh.token, GH_TOKEN: 'gh-cli-token' } });
    expect(run.exit, JSON.stringify(run.events.filter((e) => e.type === 'block.parked' || e.type === 'escalation.raised'))).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['gh-1-add-a-greeting']);
    expect(ofType(run.events, 'block.dispatched').every((e) => e.block === 'gh-1-add-a-greeting')).toBe(true);
    expect(await bare.git('rev-parse', 'main')).toBe(landed[0]!.top);

    const told = gh.comments(good).map((c) => c.body);
    expect(told).toHaveLength(2);
    expect(told[0]).toContain('started work on this issue as block `gh-1-add-a-greeting`');
    expect(told[1]).toContain(`Landed on \`main\` in ${landed[0]!.sha}`);
    expect(gh.issue(good)!.state).toBe('closed');
    expect(ofType(run.events, 'forge.commented').map((e) => e.about)).toEqual(expect.arrayContaining(['started', 'landed', 'closed']));
    expect(gh.comments(bad)).toHaveLength(1);
    expect(gh.comments(bad)[0]!.body).toContain('no acceptance criteria');
    expect(gh.issue(bad)!.state).toBe('open');

    // The issues entered the run only as the recorded register: replay re-derives every decision.
    expect(replay(run.events, ctx)).toMatchObject({ ok: true });

    // Neither the builder (whose env list names GITHUB_*) nor a test run was given the token.
    const builderEnv = await readFile(join(out, 'builder-gh-1-add-a-greeting.env'), 'utf8');
    expect(builderEnv).toContain('GH_TOKEN=gh-cli-token');
    expect(builderEnv).not.toContain(gh.token);
    const tests = (await readdir(out)).filter((f) => f.startsWith('test-'));
    expect(tests.length).toBeGreaterThan(0);
    for (const f of tests) expect(await readFile(join(out, f), 'utf8')).not.toContain(gh.token);

    // Started again: the malformed issue is read again, and not told twice.
    await runTron(repo, { env: { ...ENV, GITHUB_TOKEN: gh.token } });
    expect(gh.comments(bad)).toHaveLength(1);
    expect(gh.comments(good)).toHaveLength(2);
  });

  it('refuses to start without the token, before anything changes (exit 2, TRON_FORGE_TOKEN)', async () => {
    const { repo, gh } = await intakeProject();
    gh.openIssue({ title: 'Add a greeting', body: '- [ ] hello', labels: ['tron'] });
    const { startCommand } = await import('../commands/start.ts');
    const { systemClock } = await import('../os/clock.ts');
    const err = await startCommand({ repo: repo.dir, clock: systemClock, env: { PATH: process.env.PATH, ...ENV }, print: () => {} }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ problems: [{ code: 'TRON_FORGE_TOKEN' }] });
    expect(gh.seen).toEqual([]);
  });
});

describe('issue intake with --watch', () => {
  it('picks up an issue opened while it runs, polling with the ETag so an unchanged list costs no rate limit', async () => {
    const { startCommand } = await import('../commands/start.ts');
    const { systemClock } = await import('../os/clock.ts');
    const { allRuns } = await import('../testing/crash.ts');
    const p = await forgeProject({
      builder: () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"done"}}'; exit 0 ;;
esac
echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"; git add -A; git commit -qm "$TRON_BLOCK"
echo ">>DONE"
`,
      intake: 'poll = "100ms"\n',
    });
    try {
      p.gh.openIssue({ title: 'First', body: '- [ ] first.txt', labels: ['tron'] });
      const stop = new AbortController();
      const running = startCommand({
        repo: p.repo.dir,
        watch: true,
        stop: stop.signal,
        clock: systemClock,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env },
        print: () => {},
      });
      const until = async (done: (events: TronEvent[]) => boolean, what: string) => {
        for (let i = 0; i < 600; i++) {
          const events = allRuns(p.repo).at(-1) ?? [];
          if (done(events)) return events;
          await new Promise((r) => setTimeout(r, 50));
        }
        throw new Error(`timed out waiting for ${what}`);
      };
      const landedBlock = (id: string) => (events: TronEvent[]) => events.some((e) => e.type === 'block.landed' && e.block === id);
      await until(landedBlock('gh-1-first'), 'the first issue to land');
      // Idle polls meanwhile: 304s, which GitHub does not count.
      const idle = () => p.gh.seen.filter((s) => s.path.startsWith('/repos/acme/app/issues?') && s.status === 304);
      for (let i = 0; i < 600 && idle().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      expect(idle().length).toBeGreaterThanOrEqual(2);
      expect(idle().every((s) => !s.counted)).toBe(true);
      p.gh.openIssue({ title: 'Second', body: '- [ ] second.txt', labels: ['tron'] });
      const events = await until(landedBlock('gh-2-second'), 'the issue opened while it ran to land');
      expect(events.filter((e) => e.type === 'register.loaded').length).toBeGreaterThanOrEqual(2);
      stop.abort();
      expect(await running).toBe(143);
      expect(await p.bare.git('show', 'main:gh-2-second.txt')).toBe('gh-2-second');
    } finally {
      await p.cleanup();
    }
  });
});

describe.skipIf(BWRAP_SKIP !== undefined)('the forge token and the sandbox', () => {
  it('reaches neither a sandboxed worker nor a sandboxed test run, even through a GITHUB_* pass-through', async () => {
    const p = await forgeProject({
      sandbox: 'bwrap',
      builderEnv: ['GITHUB_*', 'TRON_FORGE_*'],
      // The builder commits its whole environment: what it saw lands on trunk for the test to read.
      builder: () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"env.txt holds it"}}'; exit 0 ;;
esac
env > env.txt; git add -A; git commit -qm "$TRON_BLOCK"
echo ">>DONE"
`,
      // A test run that sees the token is red: nothing could land.
      files: {
        'tests/token.test.js':
          "if (process.env.GITHUB_TOKEN || process.env.TRON_FORGE_TOKEN) { console.error('the forge token reached the test run'); process.exit(1); }\n",
      },
    });
    try {
      p.gh.openIssue({ title: 'Show the environment', body: '- [ ] env.txt holds it', labels: ['tron'] });
      const run = await runTron(p.repo, { env: { ...p.env, TRON_FORGE_TOKEN: p.gh.token, GITHUB_EXTRA: 'passed' } });
      expect(run.exit, run.output.join('\n')).toBe(0);
      expect(ofType(run.events, 'run.started')[0]).toBeDefined();
      const seen = await p.bare.git('show', 'main:env.txt');
      expect(seen).toContain('GITHUB_EXTRA=passed');
      expect(seen).not.toContain(p.gh.token);
      expect(seen).not.toMatch(/^(GITHUB_TOKEN|TRON_FORGE_TOKEN)=/m);
    } finally {
      await p.cleanup();
    }
  });
});
