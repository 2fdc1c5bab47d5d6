/**
 * Hermetic test runs. Every test the engine believes — at the gate, in the merge lane,
 * on trunk — runs in a checkout the engine owns, made from the object store at exactly
 * the sha under test, never in a worker's worktree: a gitignored file, a local build or
 * a `node_modules` a builder left there proves nothing about the commit. The configured
 * `setup` (e.g. `npm ci`) prepares the checkout first; both run in the sandbox with a
 * minimal environment (PATH, HOME, LANG, TERM and the names in `test_env`), never the
 * engine's secrets; setup with the network (installs need the registry), the tests without
 * it unless `[sandbox] test_network` says so.
 *
 * Checkouts are reused: a pool of `_check-<n>` for the gate (one per concurrent test
 * run), `_lane` for the lane, `_trunk` for the optional check of trunk. Reusing one is
 * a `checkout --detach -f` and a `clean -ffdx` (see engine/git/worktree.ts), which only
 * writes the files that differ; making one is a whole checkout.
 */
import type { Clock } from '../../os/clock.ts';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { TestRun } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import type { EventBody, TronEvent } from '../../core/events.ts';
import type { Config } from '../../project/config.ts';
import type { Sandbox } from '../../workers/sandbox.ts';
import { type Queues, Slots } from './slots.ts';

export { Slots } from './slots.ts';

/** What the gate's checkouts need of an effect's context (context.ts's CheckoutContext has all of it). */
export interface CheckoutContext {
  repo: string;
  runDir: string;
  config: Config;
  env: Record<string, string | undefined>;
  sandbox: Sandbox;
  /** Times the test runs' budgets. */
  clock: Clock;
  note: (body: EventBody) => TronEvent | undefined;
  queues: Queues;
  checkouts: CheckoutPool;
}
import { processStartTime } from '../../os/proc.ts';
import { runTests } from './testrun.ts';

/** Names of the gate's checkouts: one per test run in flight, handed back when it ends. */
export class CheckoutPool {
  /**
   * The gates' test runs, at most one a core at once: more only share the cores, so
   * all of them end late; this way the first end early and their reviews go on while
   * the others run. (The lane's run does not wait here: every approved block waits
   * behind it.)
   */
  readonly runs = new Slots(Math.max(1, availableParallelism()));
  private readonly free: string[] = [];
  private made = 0;
  acquire(): string {
    return this.free.pop() ?? `_check-${++this.made}`;
  }
  release(name: string): void {
    this.free.push(name);
  }
  /** `n` new names, free at once: checkouts the engine makes ahead of the first gates (see `warmCheckouts`). */
  warm(n: number): string[] {
    const names = Array.from({ length: n }, () => `_check-${++this.made}`);
    this.free.push(...names.slice().reverse());
    return names;
  }
}

/**
 * Makes the gate's first checkouts at `sha` (trunk), then the lane's, while the first
 * builders work, so that no gate and no first stack waits for one to be made (making one
 * is a whole checkout, and waits for every other worktree being made). Queued behind the
 * worktrees already requested; best effort: a checkout that could not be made is made by
 * the first run that needs it.
 */
export function warmCheckouts(c: CheckoutContext, n: number, sha: string): Promise<void> {
  // Only made, never moved: a checkout there already (an earlier engine's, after a crash) may be in use by now.
  const make = (name: string) =>
    c.queues.checkout(name).run(async () => {
      if (!existsSync(join(git.engineCheckoutPath(c.repo, name), '.git')))
        await c.queues.worktrees.run(() => git.checkoutAt(c.repo, name, sha));
    });
  return Promise.all(
    [...c.checkouts.warm(n), ...(n > 0 ? ['_lane'] : [])].map((name) =>
      make(name).then(
        () => undefined,
        () => undefined,
      ),
    ),
  ).then(() => undefined);
}

/** What one hermetic run of the suite found: setup (null when none is configured) and tests (null when setup failed). */
export interface SuiteRun {
  setup: TestRun | null;
  tests: TestRun | null;
}

export const suiteGreen = (r: SuiteRun): boolean => passed(r.setup ?? undefined) && r.tests !== null && passed(r.tests);
const passed = (t: TestRun | undefined): boolean => t === undefined || (t.exit === 0 && !t.timed_out);

/**
 * Puts the engine's checkout `name` at `sha` (made once, then reused), one effect at a
 * time (`Queues.checkout`). Making one adds a worktree, which git does not allow
 * concurrently: that part goes through the worktree queue too.
 */
export function checkout(c: Pick<CheckoutContext, 'repo' | 'queues'>, name: string, sha: string): Promise<string> {
  const path = git.engineCheckoutPath(c.repo, name);
  return c.queues
    .checkout(name)
    .run(() =>
      existsSync(join(path, '.git')) ? git.checkoutAt(c.repo, name, sha) : c.queues.worktrees.run(() => git.checkoutAt(c.repo, name, sha)),
    );
}

/**
 * Runs setup (if configured) and then the test command in checkout `dir`, which holds
 * exactly the sha under test. `log` names the output file (relative to the run
 * directory, without `.log`); `[timeouts] test` is the budget of both together.
 */
export async function runSuite(
  c: CheckoutContext,
  opts: { dir: string; block: string; session: string; log: string; yieldToLane?: boolean; signal?: AbortSignal },
): Promise<SuiteRun> {
  // A run the lane does not wait for gives the CPU to one it does.
  const niceness = opts.yieldToLane ? YIELDING : 0;
  const budget = c.config.timeouts.testMs;
  const started = c.clock.now();
  let setup: TestRun | null = null;
  const setupCommand = c.config.setup;
  if (setupCommand) {
    setup = await timed(() =>
      runTests({
        command: setupCommand,
        cwd: opts.dir,
        runDir: c.runDir,
        log: `${opts.log}.setup.log`,
        timeoutMs: budget,
        niceness,
        ...testSetting(c),
        // Installs need the registry: setup keeps the network; the test run goes without unless test_network.
        network: true,
        ...testProcesses(c, opts.block, `${opts.session}:setup`),
        ...(opts.signal ? { signal: opts.signal } : {}),
      }),
    );
    if (!passed(setup) || opts.signal?.aborted) return { setup, tests: null };
  }
  const tests = await timed(() =>
    runTests({
      command: c.config.test,
      cwd: opts.dir,
      runDir: c.runDir,
      log: `${opts.log}.log`,
      timeoutMs: Math.max(1000, budget - (c.clock.now() - started)),
      niceness,
      ...testSetting(c),
      ...testProcesses(c, opts.block, opts.session),
      ...(opts.signal ? { signal: opts.signal } : {}),
    }),
  );
  return { setup, tests };
}

/**
 * The niceness of the runs nothing serial waits for — a gate's, the check of trunk — so
 * that, sharing the cores, the merge lane's run goes first: every approved block waits
 * behind it, while gates run side by side.
 */
const YIELDING = 10;

/** A run with how long it took, recorded like its output. */
async function timed(run: () => Promise<TestRun>): Promise<TestRun> {
  const started = Date.now();
  const result = await run();
  return { ...result, ms: Date.now() - started };
}

/** How every engine test run is confined and what it sees: the sandbox, `test_env`, the network setting. */
function testSetting(c: CheckoutContext) {
  return {
    env: c.env,
    passEnv: c.config.testEnv,
    sandbox: c.sandbox,
    network: c.config.sandbox.testNetwork,
    visible: [c.repo],
    clock: c.clock,
  };
}

/** Records the engine's own test processes like worker processes, so recovery can kill strays. */
function testProcesses(c: CheckoutContext, block: string, session: string) {
  return {
    onSpawn: (pid: number) => {
      const start = processStartTime(pid);
      if (start) c.note({ type: 'worker.spawned', block, session, turn: 0, pid, start_time: start });
    },
    onExit: (pid: number, code: number | null) => c.note({ type: 'worker.exited', block, session, turn: 0, pid, code, signal: null }),
  };
}
