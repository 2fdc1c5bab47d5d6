/**
 * What the sandbox adds to a worker turn and a test run (part of `npm run bench`; alone:
 * `npx tsx evaluation/bench-sandbox.ts`): `true` and a one-commit turn, with and without
 * bwrap, as a reviewer, a builder and a test run — and, apart, what a builder's private
 * object store costs a turn (docs/SECURITY.md, "The object store"): making it, and, for
 * a turn that committed, bringing the commit's objects into the repository. Goal: the
 * sandbox adds at most 30 ms to a builder's turn.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { execa } from 'execa';
import * as git from '../engine/git/index.ts';
import { importObjects } from '../engine/git/objects.ts';
import { runTests } from '../engine/runtime/effects/testrun.ts';
import { GIT_IDENTITY_ENV, makeRepo } from '../engine/testing/repo.ts';
import { privateStore } from '../engine/workers/private-store.ts';
import { NO_SANDBOX, chooseSandbox, type Confinement, type Sandbox } from '../engine/workers/sandbox.ts';

/** The median of `runs` timings of `work`, in ms, after one warm-up. */
async function median(runs: number, work: () => Promise<void>): Promise<number> {
  await work();
  const times: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const start = performance.now();
    await work();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** One process as a worker turn runs it: entered, spawned, waited for, left. */
async function oneProcess(sandbox: Sandbox, argv: string[], confinement: Confinement): Promise<void> {
  const entered = await sandbox.enter(argv, confinement);
  const [file, ...args] = entered.argv;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(file!, args, {
      cwd: confinement.cwd,
      stdio: 'ignore',
      detached: true,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    });
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
  await entered.leave();
}

/** One commit of a new file, as a builder's turn makes it. */
const COMMIT = ['sh', '-c', 'date +%s%N > f.txt && git add f.txt && git commit -qm turn'];

/** The sandbox's added cost: `true` and a commit as a builder turn, `true` as a test run, with and without bwrap. */
export async function benchSandbox(): Promise<void> {
  const choice = await chooseSandbox('auto', process.env);
  if (choice.sandbox.kind !== 'bwrap') {
    console.log(`sandbox: not measured — ${choice.notice ?? 'bwrap is not available'}`);
    return;
  }
  const bwrap = choice.sandbox;
  const repo = await makeRepo({ 'test.js': '' });
  const runDir = mkdtempSync(join(tmpdir(), 'tron-bench-run-'));
  try {
    const { path: worktree } = await git.createWorktree(repo.dir, { id: 'bench', base: await repo.git('rev-parse', 'HEAD') });
    const runs = 30;
    const row = (name: string, ms: number, note = '') =>
      console.log(`${name.padEnd(44)} ${ms.toFixed(2).padStart(10)} ms (median of ${runs})${note}`);
    const readOnly: Confinement = { cwd: repo.dir, network: true, visible: [repo.dir] };
    const builder: Confinement = {
      cwd: worktree,
      writableCwd: true,
      ownBranch: { repo: repo.dir, block: 'bench' },
      network: true,
      visible: [repo.dir],
    };
    const goal = (added: number) => `goal ≤ 30 ms: ${added <= 30 ? 'met' : 'MISSED'}`;
    const plain = await median(runs, () => oneProcess(NO_SANDBOX, ['true'], builder));
    const reader = await median(runs, () => oneProcess(bwrap, ['true'], readOnly));
    const build = await median(runs, () => oneProcess(bwrap, ['true'], builder));
    row('turn: `true`, no sandbox', plain);
    row('turn: `true` in bwrap, read-only (reviewer)', reader, `  (+${(reader - plain).toFixed(2)} ms)`);
    row('turn: `true` in bwrap, builder with its branch', build, `  (+${(build - plain).toFixed(2)} ms; ${goal(build - plain)})`);
    const commitPlain = await median(runs, () => oneProcess(NO_SANDBOX, COMMIT, builder));
    const commitBwrap = await median(runs, () => oneProcess(bwrap, COMMIT, builder));
    row('turn: a commit, no sandbox', commitPlain);
    row(
      'turn: a commit in bwrap, builder',
      commitBwrap,
      `  (+${(commitBwrap - commitPlain).toFixed(2)} ms; ${goal(commitBwrap - commitPlain)})`,
    );
    await privateStoreCost(repo.dir, worktree, runs);
    let n = 0;
    const test = (sandbox: Sandbox) => async () => {
      n += 1;
      await runTests({
        command: 'true',
        cwd: worktree,
        runDir,
        log: `t${n}.log`,
        timeoutMs: 60_000,
        env: process.env,
        sandbox,
        visible: [repo.dir],
      });
    };
    const testPlain = await median(runs, test(NO_SANDBOX));
    const testBwrap = await median(runs, test(bwrap));
    row('test run: `true`, no sandbox', testPlain);
    row('test run: `true` in bwrap, no network', testBwrap, `  (+${(testBwrap - testPlain).toFixed(2)} ms)`);
  } finally {
    await repo.cleanup();
    rmSync(runDir, { recursive: true, force: true });
  }
}

/**
 * The private object store's own part of a turn, timed apart from bwrap: making the store
 * (every builder process), and bringing one new commit (a commit, a tree, a blob) into the
 * repository (a turn that committed). The commit is written into the store beforehand, as
 * the builder's git would, and not timed.
 */
async function privateStoreCost(repo: string, worktree: string, runs: number): Promise<void> {
  const common = join(repo, '.git');
  const made: number[] = [];
  const brought: number[] = [];
  const base = await git.revParse(repo, 'refs/heads/tron/bench');
  for (let i = 0; i <= runs; i += 1) {
    let start = performance.now();
    const store = privateStore(common);
    const making = performance.now() - start;
    const env = { ...GIT_IDENTITY_ENV, GIT_OBJECT_DIRECTORY: store.dir, GIT_ALTERNATE_OBJECT_DIRECTORIES: store.shared };
    const blob = (await execa('git', ['hash-object', '-w', '--stdin'], { cwd: worktree, env, input: `turn ${i} ${Date.now()}\n` })).stdout;
    const tree = (await execa('git', ['mktree'], { cwd: worktree, env, input: `100644 blob ${blob}\tf.txt\n` })).stdout;
    const commit = (await execa('git', ['commit-tree', tree, '-p', base!, '-m', 'turn'], { cwd: worktree, env })).stdout;
    start = performance.now();
    const result = await importObjects(repo, {
      store: store.dir,
      shared: store.shared,
      worktree,
      tips: [commit],
      known: [base!],
      index: true,
    });
    const bringing = performance.now() - start;
    store.remove();
    if (!result.ok) throw new Error(result.problem);
    if (i === 0) continue; // the warm-up
    made.push(making);
    brought.push(bringing);
  }
  const mid = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const total = mid(made) + mid(brought);
  console.log(
    `${'private object store, a turn that committed'.padEnd(44)} ${total.toFixed(2).padStart(10)} ms (median of ${runs}: making it ${mid(made).toFixed(2)} ms + bringing one commit in ${mid(brought).toFixed(2)} ms; goal ≤ 30 ms: ${total <= 30 ? 'met' : 'MISSED'})`,
  );
  console.log(
    `${'private object store, a turn with no object'.padEnd(44)} ${mid(made).toFixed(2).padStart(10)} ms (making it; nothing to bring in: no git process)`,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await benchSandbox();
