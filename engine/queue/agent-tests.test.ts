/**
 * Both sides of a test run on an agent, on real repositories and a real (file) remote,
 * with the queue between them replaced by a direct call (the queue itself, its attempts
 * and fencing are tested against PostgreSQL in engine/commands/agent-tests.e2e.test.ts).
 */
import { UnheldRoles } from './unheld-roles.ts';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { systemClock } from '../os/clock.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import { openRemote, type Remote } from '../git/remote.ts';
import type { Claimed, JobResult } from './pg-job-types.ts';
import type { QueuedJob } from '../log/run-log.ts';
import { parseConfig } from '../project/config.ts';
import { loadSpine } from '../spine/load.ts';
import { BWRAP, BWRAP_SKIP } from '../testing/bwrap.ts';
import { configFile, makeProject } from '../testing/project.ts';
import { type BareRemote, makeBareRemote } from '../testing/remote-server.ts';
import { GIT_IDENTITY_ENV, testGit } from '../testing/repo.ts';
import { bwrapSandbox, NO_SANDBOX, type Sandbox } from '../workers/sandbox.ts';
import { AgentSuites, runSuiteHere, type SuiteRequest } from './agent-tests.ts';
import { CheckoutPool, type SuiteRun } from '../runtime/effects/checkouts.ts';
import { type EffectContext, Queues } from '../runtime/effects/context.ts';
import { TurnTable } from '../runtime/effects/turn-table.ts';

const ENV = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  ...GIT_IDENTITY_ENV,
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
};

interface Setup {
  scratch: string;
  bare: BareRemote;
  /** The engine's repository and its context. */
  fx: EffectContext;
  notes: TronEvent[];
  /** The sha of trunk, and of a second commit on it. */
  trunk: string;
  next: string;
  /** An agent's clone and its context, with `sandbox`. */
  agent: (sandbox: Sandbox, env?: Record<string, string | undefined>) => Promise<EffectContext & { remote: Remote }>;
}

/** An engine's repository with a file remote, and what its test runs write; removed after the test. */
async function setup(files: Record<string, string> = {}): Promise<Setup> {
  const scratch = mkdtempSync(join(tmpdir(), 'tron-agent-suites-'));
  const bare = await makeBareRemote();
  const text = configFile({ extra: '\n[sandbox]\nmode = "off"\n\n[remote]\n' });
  const repo = await makeProject({ blocks: {}, config: text, files });
  onTestFinished(async () => {
    await Promise.all([repo.cleanup(), bare.cleanup()]);
    rmSync(scratch, { recursive: true, force: true });
  });
  await repo.git('remote', 'add', 'origin', bare.dir);
  await repo.git('push', '-q', 'origin', 'main');
  const trunk = await repo.git('rev-parse', 'HEAD');
  writeFileSync(join(repo.dir, 'next.txt'), 'next\n');
  const next = await repo.commitAll('next');
  const config = parseConfig(text, '.tron/config.toml').config!;
  const spine = loadSpine();
  const notes: TronEvent[] = [];
  const context = (
    dir: string,
    remote: Remote,
    sandbox: Sandbox,
    env: Record<string, string | undefined>,
  ): EffectContext & { remote: Remote } => ({
    repo: dir,
    runDir: join(scratch, `run-${notes.length}-${Math.random().toString(36).slice(2)}`),
    config,
    spine,
    env,
    sandbox,
    clock: systemClock,
    print: () => undefined,
    note: (body: EventBody) => {
      const event = { ...body, v: 2, seq: notes.length + 1, ts: new Date().toISOString() } as unknown as TronEvent;
      notes.push(event);
      return event;
    },
    input: () => undefined,
    checkouts: new CheckoutPool(),
    queues: new Queues(),
    workers: {},
    turns: new TurnTable(systemClock, () => undefined),
    remote,
  });
  const fx = context(repo.dir, await openRemote(repo.dir, { name: 'origin', trunk: 'main', timeoutMs: 30_000 }), NO_SANDBOX, ENV);
  mkdirSync(fx.runDir, { recursive: true });
  let clones = 0;
  return {
    scratch,
    bare,
    fx,
    notes,
    trunk,
    next,
    agent: async (sandbox, env = ENV) => {
      const clone = join(scratch, `clone-${++clones}`);
      await testGit(scratch, 'clone', '-q', bare.dir, clone);
      // An agent records no notes (the engine's log is not its to write).
      return {
        ...context(clone, await openRemote(clone, { name: 'origin', trunk: 'main', timeoutMs: 30_000 }), sandbox, env),
        note: () => undefined,
      };
    },
  };
}

/** The queue between the engine and one agent, as a direct call: the job claimed as attempt 1 and run there. */
function through(agent: EffectContext & { remote: Remote }, name = 'agent test-host pid 1') {
  const jobs: QueuedJob[] = [];
  const submit = async (line: TronEvent, job: QueuedJob): Promise<unknown> => {
    jobs.push(job);
    const claimed: Claimed = { attempt: 1, kind: job.kind, role: job.role, request: job.request };
    const result = await runSuiteHere(agent, claimed, { repository: 'r', run: 'run-1', seq: line.seq }, name);
    if (!result.ok) throw new Error(result.error.message);
    return result.inputs;
  };
  return { jobs, submit };
}

const at = (sha: string, block = 'alpha') => ({ sha, block, session: 'tests:gate', log: `tests/${block}-gate-${sha.slice(0, 12)}` });
const never = async (): Promise<SuiteRun> => {
  throw new Error('the engine ran the suite itself');
};

describe('test runs on agents', () => {
  it('hands the suite to an agent through refs/tron/test/<sha>, believes its report of that sha, and removes the ref after', async () => {
    const s = await setup();
    const agent = await s.agent(NO_SANDBOX);
    const { jobs, submit } = through(agent);
    let onRemote: string | undefined;
    const suites = new AgentSuites(async (line, job) => {
      // The sha is on the remote before its job is committed: an agent may claim it at once.
      onRemote = await s.bare.git('rev-parse', `refs/tron/test/${s.next}`);
      return submit(line, job);
    });
    const run = await suites.run(s.fx, at(s.next), never);
    expect(onRemote).toBe(s.next);
    expect(run.tests).toMatchObject({ exit: 0, ran_on: 'agent test-host pid 1', log: `${at(s.next).log}.log` });
    expect(run.setup).toBeNull();
    expect(s.notes.map((n) => n.type)).toEqual(['tests.queued']);
    expect(s.notes[0]).toMatchObject({ block: 'alpha', session: 'tests:gate', sha: s.next, ref: `refs/tron/test/${s.next}` });
    expect(jobs).toEqual([
      {
        kind: 'tests.queued',
        role: 'test',
        request: expect.objectContaining({ sha: s.next, ref: `refs/tron/test/${s.next}`, test: 'node test.js', testMs: 60_000 }),
      },
    ]);
    // The output the agent sent back is kept in the engine's run directory under its own name.
    const saved = readFileSync(join(s.fx.runDir, run.tests!.log), 'utf8');
    expect(saved).toContain(`# ran on agent test-host pid 1 (tron agent) at ${s.next}`);
    expect(saved).toContain('$ node test.js');
    await suites.settle();
    expect(await s.bare.git('for-each-ref', 'refs/tron/test/')).toBe('');
  });

  it("sends a gate's run of the block's own work to its work ref and pushes nothing — and runs it itself when the ref moved", async () => {
    const s = await setup();
    // Two agents whose clones lack the sha (a local clone would share the remote's objects).
    const agent = await s.agent(NO_SANDBOX);
    const fresh = through(await s.agent(NO_SANDBOX));
    // The block's work as an agent pushed it and the engine fetched it (job-queue.ts adoptWork).
    await testGit(s.fx.repo, 'push', '-q', 'origin', `${s.next}:refs/tron/work/alpha`);
    await testGit(s.fx.repo, 'update-ref', 'refs/tron/fetched-work/alpha', s.next);
    const { jobs, submit } = through(agent);
    const pushed: string[] = [];
    const suites = new AgentSuites(async (line, job) => {
      pushed.push(await s.bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/test/'));
      return submit(line, job);
    });
    const run = await suites.run(s.fx, at(s.next), never);
    expect(run.tests).toMatchObject({ exit: 0, ran_on: 'agent test-host pid 1' });
    expect(pushed).toEqual(['']);
    expect(s.notes[0]).toMatchObject({ type: 'tests.queued', sha: s.next, ref: 'refs/tron/work/alpha' });
    expect(jobs[0]!.request).toMatchObject({ sha: s.next, ref: 'refs/tron/work/alpha' });
    // The remote's work ref moved on since the engine fetched it: the agent (which lacks the
    // sha) finds another sha there and refuses; the engine runs the suite itself.
    await testGit(s.fx.repo, 'push', '-q', '--force', 'origin', `${s.trunk}:refs/tron/work/beta`);
    await testGit(s.fx.repo, 'update-ref', 'refs/tron/fetched-work/beta', s.next);
    const moved = new AgentSuites(fresh.submit);
    let here = 0;
    const itself = async (): Promise<SuiteRun> => {
      here += 1;
      return { setup: null, tests: null };
    };
    await moved.run(s.fx, at(s.next, 'beta'), itself);
    expect(here).toBe(1);
    expect(s.notes.at(-1)).toMatchObject({ type: 'tests.refused', block: 'beta' });
    expect((s.notes.at(-1) as unknown as { reason: string }).reason).toContain(
      `origin's refs/tron/work/beta holds ${s.trunk}, not ${s.next}`,
    );
  });

  it('reports a red run as red, with its failing lines, from the agent’s checkout of exactly that sha', async () => {
    const s = await setup({
      'tests/red.test.js': "require('node:assert').equal(require('node:fs').existsSync(__dirname + '/../next.txt'), false);\n",
    });
    const agent = await s.agent(NO_SANDBOX);
    const suites = new AgentSuites(through(agent).submit);
    // Green at trunk, red at the next commit: each run is of the sha asked for, not of what the clone holds.
    expect((await suites.run(s.fx, at(s.trunk), never)).tests).toMatchObject({ exit: 0 });
    const red = await suites.run(s.fx, at(s.next), never);
    expect(red.tests?.exit).not.toBe(0);
    expect(red.tests?.tail).toContain('AssertionError');
    await suites.settle();
  });

  it('refuses a report of another sha, one it cannot read, and a run not carried out — and runs each of those suites itself', async () => {
    const s = await setup();
    const other = 'f'.repeat(40);
    const lie = { sha: other, agent: 'agent liar', setup: null, tests: { exit: 0, timed_out: false, log: 'x.log', tail: '' }, output: {} };
    const answers: Array<() => unknown> = [
      () => [lie],
      () => [{ verdict: 'green' }],
      () => {
        throw new Error('the test run could not be carried out by agent x: no space left');
      },
      // The right sha, but a tail no runner's last lines are: not written into the log.
      () => [{ ...lie, agent: 'agent big', sha: s.next, tests: { ...lie.tests, tail: 'x'.repeat(70_000) } }],
    ];
    let ranHere = 0;
    const here = async (): Promise<SuiteRun> => {
      ranHere += 1;
      return { setup: null, tests: { exit: 1, timed_out: false, log: 'here.log', tail: 'red here' } };
    };
    for (const answer of answers) {
      const suites = new AgentSuites(async () => answer());
      expect(await suites.run(s.fx, at(s.next), here)).toEqual(await here());
      ranHere -= 1;
      await suites.settle();
    }
    expect(ranHere).toBe(4);
    const refused = s.notes.filter((n) => n.type === 'tests.refused') as Array<TronEvent & { agent?: string; reason: string }>;
    expect(refused.map((r) => r.agent)).toEqual(['agent liar', undefined, undefined, undefined]);
    expect(refused[0]!.reason).toBe(`agent liar reported a run of ${other}, not of ${s.next}, the sha it was asked to test`);
    expect(refused[1]!.reason).toMatch(/^the agent reported no test run tron can read/);
    expect(refused[2]!.reason).toContain('the run was not carried out: the test run could not be carried out by agent x: no space left');
    expect(refused[3]!.reason).toMatch(/^agent big reported no test run tron can read: tests\.tail: /);
    expect(await s.bare.git('for-each-ref', 'refs/tron/test/')).toBe('');
  });

  it('pushes one ref for runs of one sha at a time, removes it after the last, and first sweeps the refs an earlier engine left', async () => {
    const s = await setup();
    await testGit(s.fx.repo, 'push', '-q', 'origin', `${s.trunk}:refs/tron/test/${s.trunk}`);
    // Each run's job waits here, by block, until the test lets it finish: alpha's first, whichever was handed out first.
    const waiting = new Map<string, () => void>();
    const seen: string[] = [];
    const suites = new AgentSuites(async (_line, job) => {
      seen.push(await s.bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/test/'));
      await new Promise<void>((r) => waiting.set((job.request as { block: string }).block, r));
      return [{ sha: s.next, agent: 'agent a', setup: null, tests: { exit: 0, timed_out: false, log: 'x.log', tail: '' }, output: {} }];
    });
    const runs = [suites.run(s.fx, at(s.next, 'alpha'), never), suites.run(s.fx, at(s.next, 'beta'), never)];
    // Both runs are handed out — or one ends first, which is the failure to show.
    const ended = Promise.race(runs).then(
      (r) => `a run ended before both were handed out: ${JSON.stringify(r)}`,
      (e: Error) => `a run failed: ${e.message}`,
    );
    const handedOut = (async () => {
      while (waiting.size < 2) await new Promise((r) => setTimeout(r, 10));
      return 'both handed out';
    })();
    expect(await Promise.race([handedOut, ended])).toBe('both handed out');
    // The stale ref is gone; the sha under test is there once, for both runs.
    expect(seen).toEqual([`refs/tron/test/${s.next}`, `refs/tron/test/${s.next}`]);
    waiting.get('alpha')!();
    await runs[0];
    await suites.settle();
    expect(await s.bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/test/')).toBe(`refs/tron/test/${s.next}`);
    waiting.get('beta')!();
    await runs[1];
    await suites.settle();
    expect(await s.bare.git('for-each-ref', 'refs/tron/test/')).toBe('');
  });

  it('says once, at the first test run, when no agent holds role test — and nothing when one does', async () => {
    const s = await setup();
    const agent = await s.agent(NO_SANDBOX);
    for (const live of [0, 1]) {
      const said: string[] = [];
      const fx = { ...s.fx, print: (line: string) => said.push(line) };
      const suites = new AgentSuites(through(agent).submit, new UnheldRoles(async () => live));
      await suites.run(fx, at(s.trunk), never);
      await suites.run(fx, at(s.next), never);
      await suites.settle();
      expect(said).toEqual(
        live === 0
          ? ['tron: no tron agent holds role test yet: test runs wait in the queue until one starts (`tron agent --roles test`)']
          : [],
      );
    }
  });

  it('has an agent refuse to test when the remote’s test ref holds another sha than the one asked for', async () => {
    const s = await setup();
    const agent = await s.agent(NO_SANDBOX);
    await testGit(s.fx.repo, 'push', '-q', 'origin', `${s.trunk}:refs/tron/test/${s.next}`);
    const request: SuiteRequest = {
      ...at(s.next),
      ref: `refs/tron/test/${s.next}`,
      test: 'true',
      testMs: 10_000,
      testEnv: [],
      testNetwork: false,
    };
    const result: JobResult = await runSuiteHere(
      agent,
      { attempt: 1, kind: 'tests.queued', role: 'test', request },
      { repository: 'r', run: 'x', seq: 1 },
      'agent a',
    );
    expect(result).toEqual({
      ok: false,
      error: { message: expect.stringContaining(`origin's refs/tron/test/${s.next} holds ${s.trunk}, not ${s.next}, the sha to test`) },
    });
  });

  it('has an agent refuse a job whose run id, block or log name is a path, before anything is written', async () => {
    const s = await setup();
    const agent = await s.agent(NO_SANDBOX);
    await testGit(s.fx.repo, 'push', '-q', 'origin', `${s.next}:refs/tron/test/${s.next}`);
    const request = (over: Partial<SuiteRequest>): SuiteRequest => ({
      ...at(s.next),
      ref: `refs/tron/test/${s.next}`,
      test: 'echo ran > ran.txt',
      testMs: 10_000,
      testEnv: [],
      testNetwork: false,
      ...over,
    });
    // From the clone's .git/tron-agent/<run>/, each climbs to the scratch folder the clone is in.
    const planted: Array<[string, SuiteRequest, RegExp]> = [
      ['../../../escaped-run', request({}), /run "\.\.\/\.\.\/\.\.\/escaped-run"/],
      ['x', request({ log: '../../../../escaped-log' }), /log "\.\.\/\.\.\/\.\.\/\.\.\/escaped-log"/],
      ['x', request({ block: '../../../../escaped-block' }), /block "\.\.\/\.\.\/\.\.\/\.\.\/escaped-block"/],
    ];
    for (const [run, req, said] of planted) {
      const result = await runSuiteHere(
        agent,
        { attempt: 1, kind: 'tests.queued', role: 'test', request: req },
        { repository: 'r', run, seq: 1 },
        'a',
      );
      expect(result).toEqual({ ok: false, error: { message: expect.stringMatching(said) } });
    }
    expect(readdirSync(s.scratch).filter((f) => f.startsWith('escaped'))).toEqual([]);
    expect(existsSync(join(s.scratch, 'clone-1', '.git', 'tron-agent'))).toBe(false);
  });

  describe.skipIf(BWRAP_SKIP)('in the sandbox', () => {
    it('runs the suite in bubblewrap as the engine would: no secret of the agent’s environment or files, no hook of its clone', async () => {
      const s = await setup({
        'tests/confined.test.js': `const assert = require('node:assert');
assert.equal(process.env.TRON_DATABASE_URL, undefined, 'the database URL reached the test');
assert.throws(() => require('node:fs').readFileSync(process.cwd() + '/../../../.git/tron-secret/key'), 'the hidden file was readable');
console.log('confined');
`,
      });
      const env = { ...ENV, TRON_DATABASE_URL: 'postgres://tron_agent:secret@db/tron' };
      // A secret of the agent's host where its tests could read it (its clone, here): hidden as tron agent hides its state home.
      const secret = join(s.scratch, 'clone-1', '.git', 'tron-secret');
      const agent = await s.agent(bwrapSandbox(BWRAP!, [secret]), env);
      mkdirSync(secret);
      writeFileSync(join(secret, 'key'), 'the agent host’s secret\n');
      // A hook in the agent's clone never runs on the checkout the suite is run in.
      const marker = join(s.scratch, 'hook-ran');
      const hook = join(agent.repo, '.git', 'hooks', 'post-checkout');
      writeFileSync(hook, `#!/bin/sh\ntouch ${marker}\n`);
      chmodSync(hook, 0o755);
      const suites = new AgentSuites(through(agent).submit);
      const run = await suites.run(s.fx, at(s.next), never);
      expect(run.tests, readFileSync(join(s.fx.runDir, run.tests!.log), 'utf8')).toMatchObject({
        exit: 0,
        ran_on: 'agent test-host pid 1',
      });
      expect(readFileSync(join(s.fx.runDir, run.tests!.log), 'utf8')).toContain('confined');
      expect(existsSync(marker)).toBe(false);
      await suites.settle();
    });
  });
});
