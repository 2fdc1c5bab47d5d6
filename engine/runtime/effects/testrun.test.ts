/**
 * The engine's test runs on real processes, with and without the sandbox: a run that
 * hangs, or leaves a detached process holding its output, ends at its timeout (or when
 * its shell does) with nothing left running; its environment holds no engine secret;
 * in the sandbox it has no network unless configured.
 */
import { type Reachable, reachableServer } from '../../testing/reachable.ts';
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { getPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BWRAP, BWRAP_SKIP } from '../../testing/bwrap.ts';
import { NO_SANDBOX, bwrapSandbox, type Sandbox } from '../../workers/sandbox.ts';
import { runTests, type TestRunOptions } from './testrun.ts';
import { ManualClock } from '../../os/clock.ts';

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'tron-testrun-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A `sleep` whose argument no other process has, so it can be found in /proc. */
function uniqueSleep(): string {
  return `${1000 + randomInt(1000)}.${randomInt(1_000_000)}`;
}

/** Pids of the live processes whose command line holds `token`. */
function running(token: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]?.[0];
      if (cmdline.includes(token) && state !== 'Z') found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

function suite(sandbox: Sandbox) {
  let n = 0;
  const run = (command: string, over: Partial<TestRunOptions> = {}) => {
    n += 1;
    return runTests({
      command,
      cwd: root,
      runDir: root,
      log: `tests/run-${sandbox.kind}-${n}.log`,
      timeoutMs: 60_000,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
      sandbox,
      visible: [root],
      killGraceMs: 300,
      ...over,
    });
  };
  /**
   * Runs `command` with a budget of 1 s on a clock of its own, and passes the budget once its
   * output shows the line `shown`: the run ends at its timeout with no wait for it.
   */
  const runPastTimeout = async (command: string, shown: string, over: Partial<TestRunOptions> = {}) => {
    const clock = new ManualClock();
    const result = run(command, { timeoutMs: 1000, clock, ...over });
    const log = join(root, `tests/run-${sandbox.kind}-${n}.log`);
    const line = new RegExp(`^${shown}$`, 'm');
    // The process is real: its output is waited for (bounded); its budget is the clock's.
    for (let i = 0; i < 1000 && !(existsSync(log) && line.test(readFileSync(log, 'utf8'))); i += 1)
      await new Promise((r) => setTimeout(r, 10));
    clock.advance(999);
    expect(clock.pending).toBe(1);
    clock.advance(1);
    return result;
  };

  it('passes a green run with its exit status, its whole output in the log and the tail', async () => {
    const result = await run('echo one; echo two >&2; exit 0');
    expect(result).toMatchObject({ exit: 0, timed_out: false, tail: 'one\ntwo\n' });
    expect(readFileSync(join(root, result.log), 'utf8')).toBe(`$ echo one; echo two >&2; exit 0\n# cwd: ${root}\none\ntwo\n# exit: 0\n`);
  });

  it("records a failed run's failing tests beside the last lines of its output, and nothing of the kind for a green run", async () => {
    // A TAP run whose failure sits above forty passing lines: the last lines miss it.
    const tap = ['not ok 1 - the port comes from the config', '  ---', "  error: 'port is 80, not 8080'", '  ...'];
    const oks = Array.from({ length: 40 }, (_, i) => `ok ${i + 2} - check ${i + 2}`);
    const script = [...tap, ...oks, '# tests 41', '# pass 40', '# fail 1'].map((l) => `echo "${l}"`).join('; ');
    const red = await run(`${script}; exit 1`);
    expect(red.exit).toBe(1);
    expect(red.failures).toBe(`${tap.join('\n')}\n# tests 41\n# pass 40\n# fail 1`);
    expect(red.tail).not.toContain('not ok');
    expect(red.tail.split('\n')).toHaveLength(30);
    const green = await run(`${script}; exit 0`);
    expect(green.failures).toBeUndefined();
  });

  it('ends a run that never finishes (`… && sleep`) at its timeout: a failed run with timed_out and the tail of its output', async () => {
    const token = uniqueSleep();
    const result = await runPastTimeout(`echo "tests passed" && sleep ${token}`, 'tests passed');
    expect(result).toMatchObject({ exit: null, timed_out: true });
    expect(result.tail).toContain('tests passed');
    expect(readFileSync(join(root, result.log), 'utf8')).toMatch(
      /# exit: none \(timed out after 1s; every process it started was ended\)\n$/,
    );
    expect(running(token)).toEqual([]);
  });

  it('does not wait for a detached child that holds its output: the run ends with its shell, the child with it', async () => {
    const token = uniqueSleep();
    const result = await run(`setsid sleep ${token} & echo "suite done"`);
    expect(result).toMatchObject({ exit: 0, timed_out: false, tail: 'suite done\n' });
    expect(running(token)).toEqual([]);
  });

  it('ends the whole tree at the timeout, a setsid child and a shell that ignores SIGTERM included', async () => {
    const child = uniqueSleep();
    const shell = uniqueSleep();
    const result = await runPastTimeout(`trap "" TERM; (setsid sleep ${child} &); echo started; sleep ${shell}`, 'started');
    expect(result).toMatchObject({ exit: null, timed_out: true });
    expect(result.tail).toContain('started');
    expect(running(child)).toEqual([]);
    expect(running(shell)).toEqual([]);
  });

  it('ends the whole tree when its signal aborts (a job its agent no longer holds), long before its timeout', async () => {
    const child = uniqueSleep();
    const shell = uniqueSleep();
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300);
    // Its timeout (60 s) never comes: ended by the signal, the run is not timed out.
    const result = await run(`(setsid sleep ${child} &); echo started; sleep ${shell}`, { signal: stop.signal });
    expect(result).toMatchObject({ timed_out: false });
    expect(result.exit).not.toBe(0);
    expect(running(child)).toEqual([]);
    expect(running(shell)).toEqual([]);
  });

  it("gives the run the minimal environment and test_env, never the engine's secrets", async () => {
    const result = await run('env | sort', {
      env: { PATH: process.env.PATH, HOME: '/home/tester', OPENAI_API_KEY: 'sk-engine-secret', DATABASE_URL: 'postgres://db' },
      passEnv: ['DATABASE_URL'],
    });
    expect(result.exit).toBe(0);
    const names = result.tail
      .trim()
      .split('\n')
      .map((line) => line.split('=')[0]);
    expect(names.filter((name) => !['PWD', 'SHLVL', '_'].includes(name!))).toEqual(['CI', 'DATABASE_URL', 'HOME', 'PATH', 'TRON_MARK']);
    expect(result.tail).toContain('DATABASE_URL=postgres://db');
    expect(result.tail).toContain('CI=true');
    expect(readFileSync(join(root, result.log), 'utf8')).not.toContain('sk-engine-secret');
  });

  it('runs a yielding run, its children too, at the niceness asked for, and still ends its whole tree at the timeout', async () => {
    // Relative to the niceness this test runs at, as `nice -n` is.
    const base = getPriority();
    const yielding = Math.min(19, base + 10);
    const green = await run('nice; sh -c nice', { niceness: 10 });
    expect(green).toMatchObject({ exit: 0, tail: `${yielding}\n${yielding}\n` });
    expect((await run('nice')).tail).toBe(`${base}\n`);
    // Linux shares the CPU between sessions first: the run's session (its autogroup) yields too.
    if (existsSync('/proc/self/autogroup')) {
      expect((await run('sleep 0.3; cat /proc/self/autogroup', { niceness: 10 })).tail).toMatch(/ nice 10\n$/);
      expect((await run('cat /proc/self/autogroup')).tail).toMatch(/ nice 0\n$/);
    }
    const token = uniqueSleep();
    const hung = await runPastTimeout(`(setsid sleep ${token} &); echo started; sleep ${token}`, 'started', { niceness: 10 });
    expect(hung).toMatchObject({ exit: null, timed_out: true });
    expect(running(token)).toEqual([]);
  });

  it("leaves the engine's own processes alone, even one holding the run's log (a git between fork and exec does)", async () => {
    const token = uniqueSleep();
    let engines: ChildProcess | undefined;
    const result = await run('sleep 0.3', {
      log: `tests/held-${sandbox.kind}.log`,
      onSpawn: () => {
        const fd = openSync(join(root, 'tests', `held-${sandbox.kind}.log`), 'a');
        engines = spawn('sleep', [token], { stdio: ['ignore', fd, 'ignore'] });
        closeSync(fd);
      },
    });
    expect(result.exit).toBe(0);
    expect(running(token)).toHaveLength(1);
    engines?.kill();
  });

  it('reports a checkout that does not exist as a failed run, not a crash', async () => {
    const result = await run('true', { cwd: join(root, 'gone') });
    expect(result.exit).not.toBe(0);
    expect(result.timed_out).toBe(false);
  });
}

describe('an engine test run without a sandbox', () => suite(NO_SANDBOX));

describe.skipIf(BWRAP_SKIP !== undefined)('an engine test run in the bwrap sandbox', () => {
  const sandbox = bwrapSandbox(BWRAP ?? 'bwrap');
  suite(sandbox);

  describe('the network', () => {
    let server: Reachable;
    let url = '';
    beforeAll(async () => {
      server = await reachableServer();
      url = server.url;
    });
    afterAll(() => server.close());

    const fetchLine = () => `node -e "fetch('${url}').then((r) => r.text()).then((t) => console.log(t), () => console.log('unreachable'))"`;
    const base = () => ({ cwd: root, runDir: root, timeoutMs: 30_000, env: { PATH: process.env.PATH }, sandbox, visible: [root] });

    it('is out of reach by default', async () => {
      const result = await runTests({ ...base(), command: fetchLine(), log: 'tests/net-off.log' });
      expect(result.tail).toMatch(/^unreachable$/m);
    });

    it('is there with [sandbox] test_network = true', async () => {
      const result = await runTests({ ...base(), command: fetchLine(), log: 'tests/net-on.log', network: true });
      expect(result.tail).toMatch(/^reached$/m);
    });
  });
});
