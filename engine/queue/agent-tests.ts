/**
 * Test runs on agents (`[cluster] jobs = "agents"`, docs/cluster.md). The gate's facts, a
 * stack's candidate, a bisection's prefix and the check of trunk are still observed and
 * decided by the engine; only the suite itself — setup and the test command at one sha —
 * goes to a `tron agent` with role `test`:
 *
 * 1. the engine pushes the sha to the remote as `refs/tron/test/<sha>` (a stack's top
 *    exists only in the engine's repository until it lands), by lease — unless it is the
 *    block's own work as the engine last fetched it from `refs/tron/work/<id>` (a gate's
 *    run): then the agent is sent to that ref, and nothing is pushed;
 * 2. it appends the note `tests.queued` and commits the job (kind `tests.queued`, role
 *    `test`) in the same statement as that line;
 * 3. an agent claims it, fetches exactly that ref into its own clone (unless the clone
 *    holds the sha already: an earlier fetch brought every block's work), checks the sha out
 *    in a checkout of its own, runs the suite through the same `runSuite` and sandbox as
 *    the engine would, and reports the sha it tested with the runs (fenced by attempt:
 *    a dead agent's job is claimed again, its late result refused by the database);
 * 4. the engine believes the report only for the sha it asked for: another sha, or a
 *    report that is not one, is refused (`tests.refused`) and the engine runs the suite
 *    itself, in its own checkout. A report it keeps has `ran_on` set to the agent's name.
 *
 * The ref goes when the last run of that sha ends; refs a crashed engine left are swept
 * before its successor's first push.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { AGENT_OUTPUT_CHARS, endOf } from '../log/turn-log.ts';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { EVENT_SCHEMAS, type TestRun, type TronEvent } from '../core/events.ts';
import * as git from '../git/index.ts';
import { deleteRemoteRefs, fetchRef, listRemoteRefs, pushRef, type Remote } from '../git/remote.ts';
import { gitOut } from '../git/run.ts';
import type { Claimed, JobKey, JobResult } from './pg-job-types.ts';
import type { QueuedJob } from '../log/run-log.ts';
import { refusedJobNames } from './job-names.ts';
import { checkout, runSuite, type SuiteRun } from '../runtime/effects/checkouts.ts';
import { type EffectContext, errorLine } from '../runtime/effects/context.ts';
import type { RemoteSuites, SuiteAt } from '../runtime/effects/suites.ts';
import { TurnTable } from '../runtime/effects/turn-table.ts';
import { ALL_WORK_REFS } from '../runtime/effects/work-ref.ts';
import { workRefs } from './work-fetch.ts';
import type { UnheldRoles } from './unheld-roles.ts';

/** Where the engine puts a sha for agents to fetch: tron's own namespace on the remote. */
export const TEST_REF_PREFIX = 'refs/tron/test/';
export const testRef = (sha: string): string => `${TEST_REF_PREFIX}${sha}`;

/** What an agent is asked: the sha and its ref, the run's names, and the engine's own test settings. */
export interface SuiteRequest extends SuiteAt {
  ref: string;
  test: string;
  setup?: string;
  testMs: number;
  testEnv: string[];
  testNetwork: boolean;
}

/** The most of a run's output (characters) that travels back with its report: its end, where failures are. */
const OUTPUT_CHARS = AGENT_OUTPUT_CHARS;

/** A run as an event records it, with bounds on what an agent could make as large as it likes. */
const testRun = EVENT_SCHEMAS['trunk.tested'].shape.tests.extend({
  log: z.string().max(1000),
  tail: z.string().max(OUTPUT_CHARS),
  failures: z.string().max(OUTPUT_CHARS).optional(),
});

/** An agent's name as it gives it: one printable line. */
const AGENT_NAME = /^[^\p{Cc}]{1,200}$/u;

/** An agent's report, as the engine reads it: anything else is refused. */
const REPORT = z.strictObject({
  sha: z.string().regex(/^[0-9a-f]{40}$/),
  agent: z.string().regex(AGENT_NAME),
  setup: testRun.nullable(),
  tests: testRun.nullable(),
  output: z.strictObject({ setup: z.string().max(OUTPUT_CHARS).optional(), tests: z.string().max(OUTPUT_CHARS).optional() }),
});
export type SuiteReport = z.infer<typeof REPORT>;

/** Commits a job with the line it belongs to and resolves with its result's inputs (job-queue.ts: JobBroker). */
export type Submit = (line: TronEvent, job: QueuedJob) => Promise<unknown>;

class Refused extends Error {}

/** The engine's side: each suite handed to the agents, its report checked, the test refs kept and removed. */
export class AgentSuites implements RemoteSuites<EffectContext> {
  private readonly held = new Map<string, { users: number; ready: Promise<void> }>();
  private readonly deleting = new Map<string, Promise<void>>();
  private swept: Promise<void> | undefined;

  /** `unheld`: says once, at the first run, when no live agent holds role test. */
  constructor(
    private readonly submit: Submit,
    private readonly unheld?: UnheldRoles,
  ) {}

  async run(c: EffectContext, at: SuiteAt, here: () => Promise<SuiteRun>): Promise<SuiteRun> {
    const remote = c.remote;
    // [cluster] jobs = "agents" needs [remote] (job-queue.ts: brokerFor); without one, nothing can travel.
    if (!remote) return here();
    // What an earlier engine left goes now, while nothing waits on it: not at the first push (a stack's candidate).
    void this.sweep(c, remote);
    // A block's own work is on the remote already, as its work ref: when that is the sha to
    // test (a gate's run), the agent fetches it there and nothing is pushed for it.
    const [work, fetchedWork] = workRefs(at.block);
    const onWorkRef = (await git.revParse(c.repo, fetchedWork)) === at.sha;
    const ref = onWorkRef ? work : testRef(at.sha);
    let agent: string | undefined;
    let report: SuiteReport;
    try {
      try {
        if (!onWorkRef) await this.hold(c, remote, at.sha);
        const line = c.note({ type: 'tests.queued', block: at.block, session: at.session, sha: at.sha, ref });
        if (!line) throw new Error('the run has no log to commit the job with');
        const request: SuiteRequest = {
          ...at,
          ref,
          test: c.config.test,
          ...(c.config.setup ? { setup: c.config.setup } : {}),
          testMs: c.config.timeouts.testMs,
          testEnv: [...c.config.testEnv],
          testNetwork: c.config.sandbox.testNetwork,
        };
        const outcome = this.submit(line, { kind: 'tests.queued', role: 'test', request });
        this.unheld?.look('test', c.print);
        const inputs = await outcome;
        report = reportOf(inputs);
        agent = report.agent;
        if (report.sha !== at.sha)
          throw new Refused(`${agent} reported a run of ${report.sha}, not of ${at.sha}, the sha it was asked to test`);
      } finally {
        if (!onWorkRef) this.release(c, remote, at.sha);
      }
    } catch (err) {
      c.note({
        type: 'tests.refused',
        block: at.block,
        session: at.session,
        sha: at.sha,
        ...(agent ? { agent } : {}),
        reason: err instanceof Refused ? err.message : `the run was not carried out: ${errorLine(err)}`,
      });
      return here();
    }
    return {
      setup: report.setup && keep(c, at, report.setup, report.agent, 'setup', report.output.setup),
      tests: report.tests && keep(c, at, report.tests, report.agent, 'tests', report.output.tests),
    };
  }

  /** The sha on the remote as its test ref for one more run; pushed once for all the runs of that sha at a time. */
  private async hold(c: EffectContext, remote: Remote, sha: string): Promise<void> {
    let held = this.held.get(sha);
    if (!held) {
      const after = this.deleting.get(sha) ?? Promise.resolve();
      held = {
        users: 0,
        ready: this.sweep(c, remote)
          .then(() => after)
          .then(() => pushTestRef(c.repo, remote, sha)),
      };
      this.held.set(sha, held);
    }
    held.users += 1;
    await held.ready;
  }

  /** One run fewer of `sha`: the last one removes its ref from the remote (best effort: the next start sweeps). */
  private release(c: EffectContext, remote: Remote, sha: string): void {
    const held = this.held.get(sha);
    if (!held) return;
    held.users -= 1;
    if (held.users > 0) return;
    this.held.delete(sha);
    const gone: Promise<void> = held.ready
      .then(() => deleteRemoteRefs(c.repo, remote, [{ ref: testRef(sha), expected: sha }]))
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        if (this.deleting.get(sha) === gone) this.deleting.delete(sha);
      });
    this.deleting.set(sha, gone);
  }

  /** Once every test ref this engine pushed is removed (or failed to be): the run's end waits for it. */
  async settle(): Promise<void> {
    while (this.deleting.size > 0) await Promise.all([...this.deleting.values()]);
  }

  /** Before the first push: the test refs an earlier engine left (it died, or could not remove them) go. */
  private sweep(c: EffectContext, remote: Remote): Promise<void> {
    this.swept ??= (async () => {
      const listed = await listRemoteRefs(c.repo, remote, [`${TEST_REF_PREFIX}*`]);
      if (!listed.ok) return;
      await deleteRemoteRefs(
        c.repo,
        remote,
        [...listed.refs].map(([ref, expected]) => ({ ref, expected })),
      );
    })().catch(() => undefined);
    return this.swept;
  }
}

/** Pushes `sha` as its test ref: created by lease (it must not exist), or found there already. */
async function pushTestRef(repo: string, remote: Remote, sha: string): Promise<void> {
  const ref = testRef(sha);
  let pushed = await pushRef(repo, remote, ref, sha, undefined);
  // Already there (a sweep that failed): the name says what it holds, and a lease at that sha checks it.
  if (!pushed.ok && pushed.kind === 'moved') pushed = await pushRef(repo, remote, ref, sha, sha);
  if (!pushed.ok) throw new Error(`cannot push ${sha.slice(0, 12)} to ${remote.name} as ${ref}: ${pushed.message}`);
}

/** The agent's report out of a job's inputs, or why it is not one. */
function reportOf(inputs: unknown): SuiteReport {
  const first = Array.isArray(inputs) ? inputs[0] : undefined;
  const parsed = REPORT.safeParse(first);
  if (!parsed.success) {
    const agent = (first as { agent?: unknown } | undefined)?.agent;
    const issue = parsed.error.issues[0];
    throw new Refused(
      `${typeof agent === 'string' && AGENT_NAME.test(agent) ? agent : 'the agent'} reported no test run tron can read: ${issue ? `${issue.path.join('.') || 'the report'}: ${issue.message}` : 'no report'}`,
    );
  }
  return parsed.data;
}

/** An agent's run as the engine records it: its output saved here under the engine's name for it, and who ran it. */
function keep(c: EffectContext, at: SuiteAt, run: TestRun, agent: string, part: 'setup' | 'tests', output: string | undefined): TestRun {
  const log = part === 'setup' ? `${at.log}.setup.log` : `${at.log}.log`;
  const file = join(c.runDir, log);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `# ran on ${agent} (tron agent) at ${at.sha}; the end of its output:\n${output ?? ''}`);
  return { ...run, log, ran_on: agent };
}

/** What a test job runs with on an agent: its context without the run's parts, which each job gets. */
export type AgentBase = Omit<EffectContext, 'runDir' | 'input' | 'turns'> & { remote: Remote };

/**
 * The agent's side: one test job. The sha is fetched from its test ref into this clone,
 * checked out in a checkout of the agent's own (hooks never run: engine git), the suite
 * run there under this host's sandbox and minimal environment with the engine's test
 * settings, and the report says the sha the checkout held.
 */
export async function runSuiteHere(base: AgentBase, claimed: Claimed, key: JobKey, agent: string, stop?: AbortSignal): Promise<JobResult> {
  const r = claimed.request as SuiteRequest;
  const refused = refusedJobNames(key, { block: r.block, log: r.log });
  if (refused) return { ok: false, error: { message: refused } };
  const runDir = join(base.repo, '.git', 'tron-agent', key.run);
  mkdirSync(runDir, { recursive: true });
  const fx: EffectContext = {
    ...base,
    runDir,
    config: {
      ...base.config,
      test: r.test,
      setup: r.setup,
      testEnv: r.testEnv,
      timeouts: { ...base.config.timeouts, testMs: r.testMs },
      sandbox: { ...base.config.sandbox, testNetwork: r.testNetwork },
    },
    input: () => undefined,
    turns: new TurnTable(base.clock, () => undefined),
  };
  const tracking = `refs/tron/fetched-test/${r.sha}`;
  const name = base.checkouts.acquire();
  let fetching = false;
  try {
    // A sha this clone holds already (an earlier job's fetch brought it) is the same commit: no round trip.
    if (!(await git.revParse(base.repo, r.sha))) {
      fetching = true;
      const fetched = await fetchRef(base.repo, base.remote, r.ref, tracking, [ALL_WORK_REFS]);
      if (!fetched.ok) throw new Error(`cannot fetch ${r.ref} from ${base.remote.name}: ${fetched.message}`);
      if (fetched.sha !== r.sha)
        throw new Error(`${base.remote.name}'s ${r.ref} holds ${fetched.sha ?? 'nothing'}, not ${r.sha}, the sha to test`);
    }
    const dir = await checkout(fx, name, r.sha);
    const tested = await git.revParse(dir, 'HEAD');
    const suite = await runSuite(fx, {
      dir,
      block: r.block,
      session: r.session,
      log: r.log,
      ...(r.yieldToLane ? { yieldToLane: true } : {}),
      ...(stop ? { signal: stop } : {}),
    });
    const report: SuiteReport = {
      sha: tested ?? '',
      agent,
      setup: suite.setup && clip(suite.setup),
      tests: suite.tests && clip(suite.tests),
      output: {
        ...(suite.setup ? { setup: endOf(join(runDir, suite.setup.log), OUTPUT_CHARS) } : {}),
        ...(suite.tests ? { tests: endOf(join(runDir, suite.tests.log), OUTPUT_CHARS) } : {}),
      },
    };
    return { ok: true, inputs: [report] };
  } catch (err) {
    return { ok: false, error: { message: `the test run could not be carried out by ${agent}: ${errorLine(err)}` } };
  } finally {
    base.checkouts.release(name);
    if (fetching) await gitOut(base.repo, ['update-ref', '-d', tracking]).catch(() => undefined);
  }
}

/** A run's lines within what the engine reads (an output of a few very long lines could pass them). */
function clip(run: TestRun): TestRun {
  return {
    ...run,
    tail: run.tail.slice(-OUTPUT_CHARS),
    ...(run.failures !== undefined ? { failures: run.failures.slice(0, OUTPUT_CHARS) } : {}),
  };
}
