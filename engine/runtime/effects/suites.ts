/**
 * Where a test run the engine believes is carried out. By default here, in one of the
 * engine's own checkouts (checkouts.ts). With `[cluster] jobs = "agents"`, on a `tron agent`
 * with role `test` (engine/queue/agent-tests.ts): the effects of the gate and the lane
 * say only which sha to test and how to run it here, and the context's `suites` decides.
 */
import type { SuiteRun } from './checkouts.ts';

/** One run of the suite: the sha, and the names its output and processes go by. */
export interface SuiteAt {
  sha: string;
  block: string;
  /** tests:gate, tests:lane, tests:trunk… */
  session: string;
  /** The output's name, relative to the run directory, without `.log`. */
  log: string;
  /** A run nothing serial waits for (a gate's, trunk's check) gives the CPU to the lane's. */
  yieldToLane?: boolean;
}

/** Test runs elsewhere. `here` runs the same suite in the engine's own checkout: what it falls back on. */
export interface RemoteSuites<C> {
  run(c: C, at: SuiteAt, here: () => Promise<SuiteRun>): Promise<SuiteRun>;
}

/** The suite at `at.sha`: on the agents when the context hands test runs to them, else `here`. */
export function suiteAt<C extends { suites?: RemoteSuites<C> | undefined }>(
  c: C,
  at: SuiteAt,
  here: () => Promise<SuiteRun>,
): Promise<SuiteRun> {
  return c.suites ? c.suites.run(c, at, here) : here();
}
