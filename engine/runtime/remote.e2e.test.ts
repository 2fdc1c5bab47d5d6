import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { ofType, readRunFile, runTron } from '../testing/project.ts';
import { remoteProject, type RemoteProject } from '../testing/remote-project.ts';
import { allRuns, startCli } from '../testing/crash.ts';
import { builderPrelude } from '../testing/workers.ts';
import { serveDaemon } from '../testing/remote-server.ts';
import { statusCommand } from '../commands/status.ts';
import { cleanCommand } from '../commands/clean.ts';
import { ManualClock } from '../os/clock.ts';

const projects: RemoteProject[] = [];
const scratch: string[] = [];
afterEach(async () => {
  for (const p of projects.splice(0)) await p.cleanup();
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

const BLOCKS = ['alpha', 'beta', 'gamma'];

async function project(opts: Parameters<typeof remoteProject>[0] = {}): Promise<RemoteProject> {
  const p = await remoteProject(opts);
  projects.push(p);
  return p;
}

/** Every landed ref on the remote sits at its block's own commit, on the remote's trunk. */
async function landedOnRemote(p: RemoteProject): Promise<void> {
  for (const id of BLOCKS) {
    expect(await p.bare.git('log', '-1', '--format=%s', `refs/tron/landed/${id}`)).toBe(`Build ${id}`);
    await p.bare.git('merge-base', '--is-ancestor', `refs/tron/landed/${id}`, 'main');
  }
}

describe('a run with [remote]', () => {
  it('lands every block on the remote, keeps a teammate’s push, and never forces the remote’s trunk', async () => {
    const p = await project({ teammate: true });
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(0);
    await landedOnRemote(p);

    // The teammate pushed between a stack and its landing: the lease said so, and the stack was built again on top.
    const moved = ofType(run.events, 'remote.moved');
    expect(moved.length, run.output.join('\n')).toBeGreaterThan(0);
    const theirs = await p.mate!.git('rev-parse', 'HEAD');
    await p.bare.git('merge-base', '--is-ancestor', theirs, 'main');
    expect(await p.bare.git('rev-list', '--min-parents=2', 'main')).toBe('');

    // Every move of the remote's trunk was a fast-forward (its reflog, oldest first).
    const moves = (await p.bare.git('reflog', 'show', '--format=%H', 'refs/heads/main')).split('\n').filter(Boolean).reverse();
    for (let i = 1; i < moves.length; i += 1) await p.bare.git('merge-base', '--is-ancestor', moves[i - 1]!, moves[i]!);

    // Local trunk and your checkout followed the remote.
    expect(await p.repo.git('rev-parse', 'main')).toBe(await p.bare.git('rev-parse', 'main'));
    expect(await p.repo.git('status', '--porcelain', '--untracked-files=no')).toBe('');

    // Every trunk position tron pushed passes the tests in a clean clone of the remote.
    const pushed = ofType(run.events, 'remote.pushed').map((e) => e.sha);
    expect(pushed.length).toBeGreaterThan(0);
    const clone = mkdtempSync(join(tmpdir(), 'tron-remote-clone-'));
    scratch.push(clone);
    await execa('git', ['clone', '-q', p.bare.dir, clone], { env: { ...process.env, ...p.env } });
    for (const sha of pushed) {
      await execa('git', ['checkout', '-q', '--detach', sha], { cwd: clone });
      await execa('git', ['clean', '-qfdx'], { cwd: clone });
      const tests = await execa('node', ['-e', "for (const f of require('fs').readdirSync('tests').sort()) require('./tests/' + f)"], {
        cwd: clone,
        reject: false,
      });
      expect(tests.exitCode, `the remote's trunk was at ${sha}, red in a clean clone:\n${tests.stderr}`).toBe(0);
    }
  }, 180_000);

  it('pages the operator with a declining hook’s own words and exits 3, leaving the remote as it was', async () => {
    const p = await project();
    await p.bare.decline('main is frozen: release 4.2 in progress');
    const before = await p.bare.git('for-each-ref', '--format=%(refname) %(objectname)');
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(3);
    const raised = ofType(run.events, 'escalation.raised').filter((e) => e.trouble === 'remote_refused');
    expect(raised.length).toBeGreaterThan(0);
    expect(raised[0]!.detail).toMatch(/^TRON_REMOTE_REJECTED: .*main is frozen: release 4\.2 in progress/s);
    expect(ofType(run.events, 'page.sent').some((e) => e.reason.includes('main is frozen'))).toBe(true);
    expect(readRunFile(run.runDir, 'pages.md')).toContain('main is frozen: release 4.2 in progress');
    expect(await p.bare.git('for-each-ref', '--format=%(refname) %(objectname)')).toBe(before);
    // Nothing landed locally either: local trunk follows only what the remote accepted.
    expect(ofType(run.events, 'block.landed')).toEqual([]);
  }, 180_000);

  it('waits for a remote that is down, then lands on it once it is back', async () => {
    const p = await project();
    await p.served.stop();
    const running = runTron(p.repo, { env: p.env });
    // Back once the engine has waited for it at least once (the log says so).
    const log = async () => {
      const { readdirSync, readFileSync, existsSync } = await import('node:fs');
      const runs = join(p.repo.dir, '.tron', 'runs');
      if (!existsSync(runs)) return '';
      const dirs = readdirSync(runs).sort();
      return dirs.length > 0 ? readFileSync(join(runs, dirs.at(-1)!, 'events.jsonl'), 'utf8') : '';
    };
    for (let i = 0; i < 1200 && !(await log()).includes('"type":"remote.retry"'); i += 1) await new Promise((r) => setTimeout(r, 100));
    await p.served.start();
    const run = await running;
    expect(run.exit, run.output.join('\n')).toBe(0);
    expect(ofType(run.events, 'remote.failed').some((e) => e.op === 'push' && e.kind === 'transient')).toBe(true);
    expect(ofType(run.events, 'remote.retry').length).toBeGreaterThan(0);
    await landedOnRemote(p);
  }, 180_000);
});

/** Kills the engine of `repo` (the holder of .tron/engine.lock) at once, as a crash would. */
function killEngine(repoDir: string): void {
  try {
    const { pid } = JSON.parse(readFileSync(join(repoDir, '.tron', 'engine.lock'), 'utf8')) as { pid: number };
    process.kill(pid, 'SIGKILL');
  } catch {
    // No engine holds the repository at this instant: nothing to kill.
  }
}

/** Starts tron until a run exits 0 (at most four starts); the outputs of every start. */
async function startUntilDone(p: RemoteProject): Promise<string[]> {
  const outputs: string[] = [];
  for (let i = 0; i < 4; i += 1) {
    const run = await startCli(p.repo, p.env);
    outputs.push(`exit ${run.exitCode} ${run.signal ?? ''}\n${run.stdout}\n${run.stderr}`);
    if (run.exitCode === 0) return outputs;
  }
  throw new Error(`tron never finished:\n${outputs.join('\n---\n')}`);
}

/** Every block landed on the remote exactly once: its landed ref there, its commit once in the remote's trunk. */
async function landedOnceOnRemote(p: RemoteProject, outputs: string[]): Promise<void> {
  await landedOnRemote(p);
  const subjects = (await p.bare.git('log', '--format=%s', 'main')).split('\n');
  for (const id of BLOCKS) expect(subjects.filter((s) => s === `Build ${id}`).length, `${id}:\n${outputs.join('\n---\n')}`).toBe(1);
  expect(await p.repo.git('rev-parse', 'main')).toBe(await p.bare.git('rev-parse', 'main'));
  for (const id of BLOCKS)
    expect(await p.repo.git('rev-parse', `refs/tron/landed/${id}`)).toBe(await p.bare.git('rev-parse', `refs/tron/landed/${id}`));
}

describe('a worker that pushes to the remote', () => {
  it('is caught without a sandbox: its own commits on the remote trunk are a failed fact, paged as trunk moved by someone else', async () => {
    const p = await project({
      builder: (bare) => `${builderPrelude('sly.txt exists')}echo sly > sly.txt
git add -A && git commit -qm "Build sly" >/dev/null 2>&1
git push -q ${bare} HEAD:main >/dev/null 2>&1
echo ">>DONE"
`,
    });
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(3);
    // The worker's push went through (no sandbox): the remote's trunk holds its commit, and tron says so.
    expect(await p.bare.git('log', '-1', '--format=%s', 'main')).toBe('Build sly');
    const raised = ofType(run.events, 'escalation.raised').filter((e) => e.trouble === 'trunk_touched');
    expect(raised.map((e) => e.detail).join('\n')).toMatch(/holds tron\/sly .*a worker pushed them to the remote/);
    expect(ofType(run.events, 'remote.pushed')).toEqual([]);
    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(await p.bare.git('for-each-ref', 'refs/tron/')).toBe('');
  }, 180_000);

  it('stacks on the trunk a teammate pushed while the block was built: the replay made meanwhile on the old trunk is dropped', async () => {
    const p = await project({
      // The teammate pushes from a clone of their own while the block is built; the builder's own work stays its own.
      builder: (bare) => `${builderPrelude('sly.txt exists')}mate=$(mktemp -d)
git clone -q ${bare} "$mate" && (cd "$mate" && echo "a teammate was here" > mate.txt && git add mate.txt &&
  git -c user.name=Mate -c user.email=mate@example.invalid commit -qm "Teammate: mate.txt" && git push -q origin HEAD:main) >/dev/null 2>&1
rm -rf "$mate"
echo sly > sly.txt
git add -A && git commit -qm "Build sly" >/dev/null 2>&1
echo ">>DONE"
`,
    });
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(0);
    const theirs = await p.bare.git('rev-parse', 'main~1');
    expect(await p.bare.git('log', '-1', '--format=%s', theirs)).toBe('Teammate: mate.txt');
    expect(await p.bare.git('log', '-1', '--format=%s', 'main')).toBe('Build sly');
    // Found before the stack, not by a refused landing: the stack was replayed onto the teammate's commit.
    expect(ofType(run.events, 'remote.fetched').map((e) => e.sha)).toEqual([theirs]);
    expect(ofType(run.events, 'remote.moved')).toEqual([]);
    const rebased = ofType(run.events, 'rebase.done');
    expect(rebased.map((e) => [e.trunk_sha, e.results.map((r) => [r.block, r.onto])])).toEqual([[theirs, [['sly', theirs]]]]);
    expect(await p.repo.git('rev-parse', 'main')).toBe(await p.bare.git('rev-parse', 'main'));
  }, 180_000);
});

describe('a run with [remote], killed at any instant of its network calls', () => {
  it.each([
    ['during the fetch before a stack', 'git-upload-pack'],
    ['during the landing push', 'git-receive-pack'],
  ])(
    'lands every block exactly once when killed %s',
    async (_when, service) => {
      let killed = false;
      let repoDir = '';
      const p = await project({
        served: (bare) =>
          serveDaemon(bare, {
            onService: (s) => {
              if (killed || s !== service || repoDir === '') return;
              killed = true;
              killEngine(repoDir);
            },
          }),
      });
      repoDir = p.repo.dir;
      const outputs = await startUntilDone(p);
      expect(killed).toBe(true);
      expect(outputs.length).toBeGreaterThan(1);
      await landedOnceOnRemote(p, outputs);
    },
    300_000,
  );

  it('lands every block exactly once when killed after the remote accepted a push and before the engine recorded it', async () => {
    const p = await project();
    const mark = join(p.bare.root, 'killed-once');
    const lock = join(p.repo.dir, '.tron', 'engine.lock');
    // The remote has the landing when post-receive runs; the engine waits for the push's answer.
    await p.bare.hook(
      'post-receive',
      `#!/bin/sh\ncat >/dev/null\n[ -e '${mark}' ] && exit 0\ntouch '${mark}'\nkill -9 "$(node -e "console.log(JSON.parse(require('fs').readFileSync('${lock}','utf8')).pid)")"\n`,
    );
    const outputs = await startUntilDone(p);
    expect(existsSync(mark)).toBe(true);
    const events = allRuns(p.repo).flat();
    expect(
      events.some((e) => e.type === 'remote.recovered'),
      outputs.join('\n---\n'),
    ).toBe(true);
    await landedOnceOnRemote(p, outputs);
  }, 300_000);
});

describe('[remote] push_branches, tron status and tron clean', () => {
  it('pushes each block’s branch as it passes its gate, shows the checkout at the remote, and cleans only the branches it pushed', async () => {
    const p = await project({ remote: '[remote]\npush_branches = true\nbackoff = "100ms"\n' });
    const run = await runTron(p.repo, { env: p.env });
    expect(run.exit, run.output.join('\n')).toBe(0);
    const pushed = ofType(run.events, 'remote.branch.pushed');
    expect(
      pushed
        .filter((e) => e.ok)
        .map((e) => e.block)
        .sort(),
    ).toEqual(expect.arrayContaining(BLOCKS));
    // The branch there holds an attested sha of its block.
    for (const id of BLOCKS) {
      const there = await p.bare.git('rev-parse', `refs/heads/tron/${id}`);
      expect(ofType(run.events, 'gate.passed').some((e) => e.block === id && e.sha === there)).toBe(true);
    }

    const status: string[] = [];
    await statusCommand({ repo: p.repo.dir, json: false, clock: new ManualClock(), print: (l) => status.push(l) });
    expect(status.join('\n')).toContain('your checkout is at origin/main');

    // A teammate's branch under tron/ and a teammate's move of a branch tron pushed: neither is touched.
    const main = await p.bare.git('rev-parse', 'main');
    await p.bare.git('update-ref', 'refs/heads/tron/theirs', main);
    await p.bare.git('update-ref', 'refs/heads/tron/beta', main);
    const lines: string[] = [];
    expect(await cleanCommand({ repo: p.repo.dir, dryRun: false, all: false, clock: new ManualClock(), print: (l) => lines.push(l) })).toBe(
      0,
    );
    expect(lines.join('\n')).toContain('removed remote branch origin:tron/alpha');
    expect((await p.bare.git('for-each-ref', '--format=%(refname)', 'refs/heads/tron/')).split('\n').sort()).toEqual([
      'refs/heads/tron/beta',
      'refs/heads/tron/theirs',
    ]);
    // Landed refs are records, never cleaned.
    for (const id of BLOCKS) await p.bare.git('rev-parse', `refs/tron/landed/${id}`);
  }, 180_000);
});
