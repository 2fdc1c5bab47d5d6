/**
 * The engine's own test runs: the configured command, by a shell in a given checkout,
 * with a timeout, its whole output saved in the run directory. The engine believes this
 * and nothing a worker says about its tests.
 *
 * A test run is the block's own code, so it is treated like a worker: it runs in the
 * sandbox (its checkout writable, no network unless `[sandbox] test_network`), with a
 * minimal environment — PATH, HOME, LANG, TERM, CI and the variables `test_env` names,
 * never the engine's secrets.
 *
 * **The timeout ends the whole tree.** Output goes straight to the log file, not through
 * a pipe, so a process that outlives the shell (`… && sleep 1000`, a detached child)
 * cannot keep the engine waiting for an end-of-file. When the shell exits, or at the
 * deadline, every process of the run is ended: the process group, the shell's
 * descendants, every process carrying the run's `TRON_MARK` (a `setsid` child keeps it)
 * and every process still holding the log file open. In the sandbox its PID namespace
 * ends them all anyway.
 */
import { type Clock, systemClock } from '../../os/clock.ts';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import type { TestRun } from '../../core/events.ts';
import { formatDuration } from '../../core/duration.ts';
import { failureExcerpt, lastLines } from '../../core/test-output.ts';
import { minimalEnv } from '../../workers/env.ts';
import { MARK_VAR, endRun, fdTargets, newMark } from '../../os/process-tree.ts';
import { NO_SANDBOX, environmentPaths, type Entered, type Sandbox } from '../../workers/sandbox.ts';
import { processStartTime } from '../../os/proc.ts';

/** Lines of the output recorded when no runner's failures are recognised in it. */
const TAIL_LINES = 30;
/** Lines of the failing tests' excerpt recorded (engine/core/test-output.ts). */
const EXCERPT_LINES = 40;
/** Bytes read from the end of the log: the failing tests and the tail are found in them. */
const TAIL_BYTES = 1024 * 1024;

export interface TestRunOptions {
  command: string;
  cwd: string;
  runDir: string;
  /** The output file's path, relative to `runDir`. */
  log: string;
  timeoutMs: number;
  /** tron's environment: the source of PATH, HOME, LANG, TERM, CI and the `passEnv` names. */
  env: Readonly<Record<string, string | undefined>>;
  /** `test_env`: further variables passed on. */
  passEnv?: readonly string[];
  sandbox?: Sandbox;
  /** Whether the run may reach the network (in the sandbox). */
  network?: boolean;
  /** Paths the run must be able to read, such as the repository (see Confinement.visible). */
  visible?: readonly string[];
  /** SIGTERM-to-SIGKILL grace when ending the run's processes; 2 s unless given. */
  killGraceMs?: number;
  /**
   * Runs the whole tree at this niceness (`nice -n`): a gate's run yields the CPU to the
   * merge lane's, which every approved block waits behind. 0, the default: as the engine.
   */
  niceness?: number;
  /** The test process started / ended: recorded, so recovery can kill one a crash left running. */
  onSpawn?: (pid: number) => void;
  onExit?: (pid: number, code: number | null) => void;
  /** Ends the run early, every process of it (a job its agent no longer holds: engine/queue/agent-tests.ts). */
  signal?: AbortSignal;
  /** Times the run's budget (the system's by default). */
  clock?: Clock;
}

/** The environment of a test run: the minimal base, `test_env`, CI, and the run's marker. */
export function testEnv(
  source: Readonly<Record<string, string | undefined>>,
  passEnv: readonly string[],
  mark: string,
): Record<string, string> {
  return minimalEnv(source, passEnv, { CI: source.CI ?? 'true', [MARK_VAR]: mark });
}

/** Runs `command` by a shell in `cwd`, saving its output to `<runDir>/<log>`. */
export async function runTests(opts: TestRunOptions): Promise<TestRun> {
  const file = join(opts.runDir, opts.log);
  mkdirSync(dirname(file), { recursive: true });
  const header = `$ ${opts.command}\n# cwd: ${opts.cwd}\n`;
  writeFileSync(file, header);
  // Appending: whatever the run does to its file offset, every write lands at the end.
  const out = openSync(file, 'a+');
  try {
    const start = Buffer.byteLength(header);
    const mark = newMark();
    let entered: Entered | undefined;
    let ended: { code: number | null; timedOut: boolean; error?: string } = { code: null, timedOut: false };
    try {
      entered = await (opts.sandbox ?? NO_SANDBOX).enter(['/bin/sh', '-c', opts.command], {
        cwd: opts.cwd,
        writableCwd: true,
        network: opts.network ?? false,
        visible: [...(opts.visible ?? []), ...environmentPaths(opts.env)],
        // Started detached with its output to a file: a session of its own, with no terminal.
        inCallersSession: true,
      });
    } catch (error) {
      ended = { code: null, timedOut: false, error: `the sandbox could not be prepared: ${(error as Error).message}` };
    }
    if (entered) {
      ended = await runTree(entered.argv, opts, testEnv(opts.env, opts.passEnv ?? [], mark), out, mark);
      await entered.leave();
    }
    const note = ended.error
      ? `# could not start: ${ended.error}\n`
      : `# exit: ${ended.code ?? 'none'}${ended.timedOut ? ` (timed out after ${formatDuration(opts.timeoutMs)}; every process it started was ended)` : ''}\n`;
    const output = readFrom(out, start);
    writeSync(out, `${output.endsWith('\n') || output === '' ? '' : '\n'}${note}`);
    // A failed run: its failing tests' own lines and the summary, where the runner is known.
    const failures = ended.error === undefined && (ended.code !== 0 || ended.timedOut) ? failureExcerpt(output, EXCERPT_LINES) : undefined;
    return {
      exit: ended.timedOut ? null : ended.code,
      timed_out: ended.timedOut,
      log: opts.log,
      tail: lastLines(ended.error ? `could not start the test command: ${ended.error}` : output, TAIL_LINES),
      ...(failures !== undefined ? { failures } : {}),
    };
  } finally {
    closeSync(out);
  }
}

/** Spawns the run with `out` as its stdout and stderr; resolves once every process of it has ended. */
async function runTree(
  argv: readonly string[],
  opts: TestRunOptions,
  env: Record<string, string>,
  out: number,
  mark: string,
): Promise<{ code: number | null; timedOut: boolean; error?: string }> {
  const graceMs = opts.killGraceMs ?? 2000;
  // `nice` execs the command in its own process: the pid, group and tree are the run's.
  // Without a `nice` program the priority is set on the process just started instead.
  const command = opts.niceness && NICE ? [NICE, '-n', String(opts.niceness), ...argv] : argv;
  const child = spawn(command[0]!, command.slice(1), { cwd: opts.cwd, env, detached: true, stdio: ['ignore', out, out] });
  if (opts.niceness && !NICE && child.pid !== undefined) lower(child.pid, opts.niceness);
  if (opts.niceness && child.pid !== undefined) yieldSession(child.pid, opts.niceness);
  const pid = child.pid;
  if (pid === undefined) {
    const error = await new Promise<NodeJS.ErrnoException>((resolve) => child.once('error', resolve));
    return { code: null, timedOut: false, error: `${error.code ?? 'error'}: ${error.message}` };
  }
  child.on('error', () => {}); // after a start, only a failed kill: nothing to act on
  opts.onSpawn?.(pid);
  const run = { root: pid, mark, outputs: fdTargets([out]), since: Number(processStartTime(pid) ?? 0) };
  let timedOut = false;
  let stopping: Promise<void> | undefined;
  // Ref'd, as the run's process is: the budget ends it even if nothing else waits.
  const disarm = (opts.clock ?? systemClock).after(
    opts.timeoutMs,
    () => {
      timedOut = true;
      stopping = endRun(run, graceMs);
    },
    { keepAlive: true },
  );
  const stop = () => {
    stopping ??= endRun(run, graceMs);
  };
  if (opts.signal?.aborted) stop();
  else opts.signal?.addEventListener('abort', stop, { once: true });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  disarm();
  opts.signal?.removeEventListener('abort', stop);
  opts.onExit?.(pid, code);
  await stopping;
  // Whatever the shell left behind ends with the run, whether it finished or timed out.
  await endRun(run, graceMs);
  return { code, timedOut };
}

/**
 * Linux shares the CPU between sessions (their autogroups) before it looks at a process's
 * niceness, and every run is a session of its own: the run's session yields too. Best
 * effort — no autogroups here, or (not as root) another change in the last 100 ms, which
 * is retried once.
 */
function yieldSession(leader: number, niceness: number, retry = true): void {
  try {
    writeFileSync(`/proc/${leader}/autogroup`, String(niceness));
  } catch (error) {
    if (retry && (error as NodeJS.ErrnoException).code === 'EAGAIN') setTimeout(() => yieldSession(leader, niceness, false), 110).unref();
  }
}

/** The `nice` program, where it is (coreutils'). */
const NICE = ['/usr/bin/nice', '/bin/nice'].find((path) => existsSync(path));

/** Lowers process `pid`'s priority by `by` (best effort: it may already have ended). */
function lower(pid: number, by: number): void {
  try {
    setPriority(pid, Math.min(19, getPriority() + by));
  } catch {
    // gone already
  }
}

/** The text written to `fd` from byte `start` on (its last TAIL_BYTES at most). */
function readFrom(fd: number, start: number): string {
  const size = fstatSync(fd).size;
  const from = Math.max(start, size - TAIL_BYTES);
  const buffer = Buffer.alloc(size - from);
  let read = 0;
  while (read < buffer.length) {
    const n = readSync(fd, buffer, read, buffer.length - read, from + read);
    if (n === 0) break;
    read += n;
  }
  return buffer.subarray(0, read).toString('utf8');
}
