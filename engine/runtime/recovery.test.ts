import { afterEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { join } from 'node:path';
import { allRuns, batchProject, crashProject, startCli, BIN } from '../testing/crash.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
import { isSameProcess } from '../os/proc.ts';
import { readLock } from '../log/lockfile.ts';
import { makeProject, configFile } from '../testing/project.ts';
import { recover } from './recovery.ts';
import { systemClock } from '../os/clock.ts';
import { readdirSync } from 'node:fs';
import type { TronEvent } from '../core/events.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

async function fresh(): Promise<TestRepo> {
  const repo = await crashProject();
  repos.push(repo);
  return repo;
}

/** Branches tron/* whose head is work that never passed the gate (must survive a restart). */
async function unverifiedHeads(repo: TestRepo): Promise<string[]> {
  const attested = new Set(allRuns(repo).flatMap((run) => run.flatMap((e) => (e.type === 'gate.passed' ? [e.sha] : []))));
  const out = await repo.git('for-each-ref', '--format=%(objectname)', 'refs/heads/tron/');
  const heads: string[] = [];
  for (const sha of out.split('\n').filter(Boolean)) {
    const onTrunk = (await execa('git', ['merge-base', '--is-ancestor', sha, 'main'], { cwd: repo.dir, reject: false })).exitCode === 0;
    if (!onTrunk && !attested.has(sha)) heads.push(sha);
  }
  return heads;
}

/** The checks of a finished run, crashed or not; returns trunk's tree. */
async function checkFinished(repo: TestRepo): Promise<string> {
  const landed = (await repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
  expect(landed).toEqual(['tron/landed/alpha', 'tron/landed/beta', 'tron/landed/gamma']);
  const subjects = (await repo.git('log', '--format=%s', 'main')).split('\n');
  for (const id of ['alpha', 'beta', 'gamma']) expect(subjects.filter((s) => s === `Build ${id}`)).toHaveLength(1);
  expect(await repo.git('rev-list', '--min-parents=2', 'main')).toBe('');
  for (const id of ['alpha', 'beta', 'gamma']) {
    const sha = await repo.git('rev-parse', `refs/tron/landed/${id}`);
    const dir = join(repo.dir, '.tron', `check-${id}`);
    await repo.git('worktree', 'add', '-q', '--detach', dir, sha);
    expect((await execa('node', ['test.js'], { cwd: dir, reject: false })).exitCode).toBe(0);
    await repo.git('worktree', 'remove', '--force', dir);
  }
  for (const run of allRuns(repo)) {
    for (const e of run) if (e.type === 'worker.spawned') expect(isSameProcess(e.pid, e.start_time)).toBe(false);
  }
  // Trunk's content outside .tron/ (whose config names each test's own worker scripts).
  const files = (await repo.git('ls-tree', '-r', 'main')).split('\n').filter((l) => !l.includes('\t.tron/'));
  return files.join('\n');
}

async function freshBatch(): Promise<TestRepo> {
  const repo = await batchProject();
  repos.push(repo);
  return repo;
}

/**
 * The checks of a finished batch run: every block landed exactly once (first, second, b1,
 * b2 one commit each; b3 its two), trunk linear, and every sha trunk ever pointed at green.
 */
async function checkBatchFinished(repo: TestRepo): Promise<void> {
  const landed = (await repo.git('for-each-ref', '--format=%(refname:short)', 'refs/tron/landed/')).split('\n').sort();
  expect(landed).toEqual(['tron/landed/b1', 'tron/landed/b2', 'tron/landed/b3', 'tron/landed/first', 'tron/landed/second']);
  const subjects = (await repo.git('log', '--format=%s', 'main')).split('\n');
  for (const id of ['first', 'second', 'b1', 'b2'])
    expect(
      subjects.filter((s) => s === `Build ${id}`),
      `${await repo.git('log', '--format=%h %s%n%b', 'main')}\n${allRuns(repo)
        .flat()
        .filter((e) => ['lane.stacked', 'gate.failed', 'block.landed', 'bisect.step'].includes(e.type))
        .map((e) => JSON.stringify(e).slice(0, 300))
        .join('\n')}`,
    ).toHaveLength(1);
  expect(await repo.git('rev-list', '--min-parents=2', 'main')).toBe('');
  const pointed = new Set((await repo.git('reflog', 'show', '--format=%H', 'refs/heads/main')).split('\n').filter(Boolean));
  for (const sha of pointed) {
    const dir = join(repo.dir, '.tron', `check-${sha.slice(0, 8)}`);
    await repo.git('worktree', 'add', '-q', '--detach', dir, sha);
    expect((await execa('node', ['test.js'], { cwd: dir, reject: false })).exitCode, `trunk was at ${sha}`).toBe(0);
    await repo.git('worktree', 'remove', '--force', dir);
  }
  for (const run of allRuns(repo)) {
    for (const e of run) if (e.type === 'worker.spawned') expect(isSameProcess(e.pid, e.start_time)).toBe(false);
  }
}

/** Crash right after event `n`, then restart until the run finishes; checks everything. */
async function crashAt(n: number, expectedTree: string): Promise<void> {
  const repo = await fresh();
  const crashed = await startCli(repo, { TRON_CRASH_AFTER_EVENT: String(n) });
  if (crashed.signal !== 'SIGKILL') {
    expect(crashed.exitCode).toBe(0); // the run ended before event n
  } else {
    const unverified = await unverifiedHeads(repo);
    let last = await startCli(repo);
    for (let i = 0; i < 3 && last.exitCode !== 0; i += 1) last = await startCli(repo);
    expect(last.stderr).toBe('');
    expect(last.exitCode, `${last.stdout}\n${last.stderr}`).toBe(0);
    // Work that had not passed the gate when the engine died is on trunk now, or kept on an orphan branch.
    const orphans = (await repo.git('for-each-ref', '--format=%(objectname)', 'refs/heads/orphan/')).split('\n');
    for (const sha of unverified) {
      const onTrunk = (await execa('git', ['merge-base', '--is-ancestor', sha, 'main'], { cwd: repo.dir, reject: false })).exitCode === 0;
      expect(onTrunk || orphans.includes(sha), `${sha} lost after a crash at event ${n}`).toBe(true);
    }
  }
  expect(await checkFinished(repo)).toBe(expectedTree);
}

/**
 * A run with no crash, made once for the tests that compare with it (they keep only what
 * it wrote and left, not the repository): its events and trunk's files.
 */
let clean: Promise<{ events: TronEvent[]; tree: string }> | undefined;
function cleanRun(): Promise<{ events: TronEvent[]; tree: string }> {
  clean ??= (async () => {
    const repo = await fresh();
    const run = await startCli(repo);
    expect(run.exitCode).toBe(0);
    const tree = await checkFinished(repo);
    return { events: allRuns(repo)[0]!, tree };
  })();
  return clean;
}

describe('recovery from a crash at any instant', () => {
  it('lands every block exactly once with trunk green, crashing after a spread of event boundaries', async () => {
    const { events, tree } = await cleanRun();
    const total = events.length;
    const sweep = process.env.TRON_CRASH_SWEEP === 'full';
    const landing = events.filter((e) => e.type === 'land.intent' || e.type === 'block.landed').map((e) => e.seq);
    // The merge lane's boundaries where its work is half done: a stack rebased, a candidate tested (the first of each).
    const lane = ['rebase.done', 'candidate.tested'].map((t) => events.find((e) => e.type === t)!.seq);
    const points = sweep
      ? Array.from({ length: total - 1 }, (_, i) => i + 1)
      : [
          // The start and the middle of the run, the first landing's two steps and the lane's
          // half-done work: each point is a whole run on real git (about ten seconds on an idle
          // machine). `npm run test:crash` crashes at every boundary (a stack formed or closed,
          // the run's end among them); the simulator crashes its seeded runs anywhere, the
          // cluster's takeovers included, and checks each converges.
          ...new Set([2, Math.floor(total / 2), ...landing.slice(0, 2), ...lane]),
        ].sort((a, b) => a - b);
    for (const n of points) await crashAt(n, tree);
  }, 600_000);

  it('recovers a batch bisected to its culprit, whatever lane boundary the engine died at', async () => {
    const clean = await freshBatch();
    expect((await startCli(clean)).exitCode).toBe(0);
    await checkBatchFinished(clean);
    const events = allRuns(clean)[0]!;
    const red = events.find((e) => e.type === 'candidate.tested' && !e.ok)!;
    const stack = red.type === 'candidate.tested' ? red.stack : 0;
    const inStack = (e: (typeof events)[number]) => 'stack' in e && e.stack === stack;
    const boundaries = events.filter(
      (e) =>
        (inStack(e) && ['candidate.tested', 'bisect.step', 'land.intent', 'lane.closed'].includes(e.type)) ||
        (e.type === 'gate.failed' && e.purpose === 'lane') ||
        (e.type === 'block.landed' && e.seq > red.seq),
    );
    const chosen =
      process.env.TRON_CRASH_SWEEP === 'full'
        ? boundaries
        : boundaries.filter((e) => e.type === 'bisect.step' || e.type === 'land.intent').slice(0, 2);
    for (const e of chosen) {
      const repo = await freshBatch();
      const crashed = await startCli(repo, { TRON_CRASH_AFTER_EVENT: String(e.seq) });
      let last = crashed;
      for (let i = 0; i < 3 && last.exitCode !== 0; i += 1) last = await startCli(repo);
      expect(last.exitCode, `after a crash at seq ${e.seq} (${e.type}): ${last.stdout}\n${last.stderr}`).toBe(0);
      await checkBatchFinished(repo);
    }
  }, 900_000);

  it('survives the whole process group being SIGKILLed at moments chosen by a seeded sequence', async () => {
    const { tree } = await cleanRun();
    // One round in npm test; the sweep (npm run test:crash) plays several seeds.
    const rounds = process.env.TRON_CRASH_SWEEP === 'full' ? 8 : 1;
    for (let round = 0; round < rounds; round += 1) {
      let seed = 7 + round * 101;
      const next = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      const repo = await fresh();
      for (let kill = 0; kill < 3; kill += 1) {
        const child = execa('node', [BIN, 'start', '--repo', repo.dir], {
          reject: false,
          stdin: 'ignore',
          detached: true,
          env: { ...GIT_IDENTITY_ENV },
        });
        const delay = 300 + Math.floor(next() * 1500);
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid!, 'SIGKILL');
          } catch {
            // it already finished
          }
        }, delay);
        await child;
        clearTimeout(timer);
      }
      let last = await startCli(repo);
      for (let i = 0; i < 3 && last.exitCode !== 0; i += 1) last = await startCli(repo);
      expect(
        last.exitCode,
        `round ${round}: exit ${last.exitCode} signal ${last.signal} in ${repo.dir}\n${last.stdout}\n${last.stderr}`,
      ).toBe(0);
      expect(await checkFinished(repo)).toBe(tree);
    }
  }, 900_000);

  it('takes no recovery action when booted twice in a row with nothing in between', async () => {
    const repo = await makeProject({
      blocks: { slow: {} },
      config: configFile({
        workers: `[workers.builder]\nadapter = "command"\ncommand = ["sleep", "600"]\n\n[workers.reviewer]\nadapter = "sim"\n`,
        // Unsandboxed, a worker outlives an engine killed with -9, and recovery must end it.
        extra: '[sandbox]\nmode = "off"\n',
      }),
    });
    repos.push(repo);
    // Find the boundary right after the worker started, then die there: the worker lives on.
    const probe = execa('node', [BIN, 'start', '--repo', repo.dir], {
      reject: false,
      stdin: 'ignore',
      env: { ...GIT_IDENTITY_ENV, TRON_CRASH_AFTER_EVENT: '1000' },
    });
    // Waited for, not timed: the start checks trunk first (preflight.ts), slower on a busy machine.
    for (let i = 0; i < 1200 && !allRuns(repo)[0]?.some((e) => e.type === 'worker.spawned'); i += 1)
      await new Promise((r) => setTimeout(r, 50));
    process.kill(probe.pid!, 'SIGKILL');
    await probe;
    const spawned = allRuns(repo)[0]!.find((e) => e.type === 'worker.spawned')!;
    if (spawned.type !== 'worker.spawned') throw new Error('no worker');
    expect(isSameProcess(spawned.pid, spawned.start_time)).toBe(true);
    const runsDir = join(repo.dir, '.tron', 'runs');
    const previousRunDir = join(runsDir, readdirSync(runsDir).sort().at(-1)!);
    const blocks = [{ id: 'slow', title: 'Block slow', depends_on: [], priority: 0, criteria: ['slow works'], digest: 'x' }];
    const first = await recover({ repo: repo.dir, previousRunDir, blocks, clock: systemClock });
    const second = await recover({ repo: repo.dir, previousRunDir, blocks, clock: systemClock });
    expect(first.events.filter((e) => e.type === 'worker.killed')).toHaveLength(1);
    expect(isSameProcess(spawned.pid, spawned.start_time)).toBe(false);
    expect(second.events.filter((e) => e.type === 'worker.killed')).toEqual([]);
    expect(second.events.filter((e) => e.type === 'block.recovered')).toEqual(first.events.filter((e) => e.type === 'block.recovered'));
    expect(first.events.find((e) => e.type === 'block.recovered')).toMatchObject({ phase: 'pending', attempt: 1 });
  }, 120_000);
});

describe('one engine per repository', () => {
  it('refuses a second start while one runs, and lets the next start proceed at once after kill -9', async () => {
    const repo = await makeProject({
      blocks: { slow: {} },
      config: configFile({
        workers: `[workers.builder]\nadapter = "command"\ncommand = ["sleep", "600"]\n\n[workers.reviewer]\nadapter = "sim"\n`,
        // Unsandboxed, a worker outlives an engine killed with -9, and recovery must end it.
        extra: '[sandbox]\nmode = "off"\n',
      }),
    });
    repos.push(repo);
    const first = execa('node', [BIN, 'start', '--repo', repo.dir], {
      reject: false,
      stdin: 'ignore',
      detached: true,
      env: { ...GIT_IDENTITY_ENV },
    });
    const lockFile = join(repo.dir, '.tron', 'engine.lock');
    for (let i = 0; i < 200 && !(readLock(lockFile) && allRuns(repo)[0]?.some((e) => e.type === 'worker.spawned')); i += 1) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const second = await startCli(repo);
    expect(second.exitCode).toBe(2);
    expect(second.stderr).toContain('TRON_LOCKED');
    expect(second.stderr).toContain(`pid ${first.pid}`);
    // kill -9 the engine alone: its worker (own process group) outlives it, still "building"
    process.kill(first.pid!, 'SIGKILL');
    await first;
    const stray = allRuns(repo)[0]!.find((e) => e.type === 'worker.spawned')!;
    expect(stray.type === 'worker.spawned' && isSameProcess(stray.pid, stray.start_time)).toBe(true);
    const third = execa('node', [BIN, 'start', '--repo', repo.dir], {
      reject: false,
      stdin: 'ignore',
      detached: true,
      env: { ...GIT_IDENTITY_ENV },
    });
    for (let i = 0; i < 200 && !allRuns(repo)[1]?.some((e) => e.type === 'recovery.finished'); i += 1)
      await new Promise((r) => setTimeout(r, 50));
    const killed = allRuns(repo)[1]!.filter((e) => e.type === 'worker.killed');
    expect(killed).toMatchObject([{ pid: stray.type === 'worker.spawned' ? stray.pid : 0 }]);
    // Stopped as an operator would (Ctrl-C), not killed: a kill -9 here could cut a git
    // command short and leave a half-made worktree that fails the git fsck at cleanup.
    process.kill(third.pid!, 'SIGINT');
    expect((await third).exitCode).toBe(130);
  }, 60_000);
});
