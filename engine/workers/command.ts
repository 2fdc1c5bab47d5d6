/**
 * The `command` worker: any coding-agent CLI as a worker (a contract: docs/workers.md,
 * "Any CLI agent: the `command` adapter"). For each turn the configured argv runs with:
 *
 * - cwd: `request.cwd` (builder worktree, reviewer checkout, or repository root);
 * - stdin: the whole prompt, then closed; stdout: the reply; stderr: kept (its tail) for
 *   the failure detail. Exit 0 is a reply; a non-zero exit, a signal or a timeout is a
 *   failed turn. A failed turn's detail ends with the CLI's last meaningful line, on
 *   whichever stream it printed last (Claude Code prints its errors on stdout), and the
 *   outcome carries both streams for the event's bounded tails;
 * - `output`: with `claude-json` or `codex-jsonl` the reply, the usage and cost, and the
 *   CLI's own error text are read from its structured output (engine/workers/output.ts);
 *   usage is reported for failed turns too, since they were paid for;
 * - environment: the minimal base (PATH, HOME, LANG, TERM), the variables the worker's
 *   `env` list names, and TRON_ROLE, TRON_BLOCK, TRON_SESSION, TRON_TURN, TRON_PHASE,
 *   TRON_RUN_DIR. Nothing else of the engine's environment reaches the worker.
 *
 * Argument placeholders, for CLIs that take the prompt as an argument: in any argv
 * element `{prompt}` becomes the prompt text and `{prompt_file}` the path of a file
 * holding it, written to `<runDir>/prompts/<session>-turn<turn>.md`. When either is
 * used, stdin gets nothing (it is closed at once).
 *
 * A turn owns its processes: the worker starts as a group leader, and when the turn ends
 * (reply, timeout, abort) nothing it started is left running — its group, its
 * descendants, and whatever carries the turn's `TRON_MARK` (a `setsid` child keeps it).
 * A timeout or an abort sends SIGTERM to all of them, then SIGKILL after a grace period.
 *
 * Sandboxed (engine/workers/sandbox.ts), the spawned process is `bwrap`, the worker its
 * descendant in a PID namespace of its own: when the worker exits, the namespace ends
 * with every process in it, and the builder's commits are carried to its branch.
 */
import { systemClock } from '../os/clock.ts';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import type { TurnFailure, TurnObserver, TurnOutcome, TurnRequest, WorkerAdapter } from './adapter.ts';
import type { CommandSettings } from '../project/worker-settings.ts';
import { minimalEnv } from './env.ts';
import { failureCause, lastMeaningfulLine, readOutput } from './output.ts';
import { processStartTime } from '../os/proc.ts';
import { formatDuration } from '../core/duration.ts';
import { MARK_VAR, endRun, newMark } from '../os/process-tree.ts';
import { NO_SANDBOX, turnConfinement, type Entered, type Sandbox } from './sandbox.ts';
import { DEFAULT_REPLY_LIMIT, OutputCap } from './output-cap.ts';

/** What the liveness probe needs to see of a running turn. */
export interface RunningTurn {
  pid: number;
  startTime: string;
  /** Bytes written so far on stdout and stderr: output is a sign of life. */
  outputBytes: number;
}

export interface CommandWorker extends WorkerAdapter {
  readonly kind: 'command';
  /** The process of the session's running turn, or undefined when none runs. */
  running(session: string): RunningTurn | undefined;
}

export interface CommandDeps {
  /** The engine's environment, the only source of pass-through variables. */
  env: Readonly<Record<string, string | undefined>>;
  /** SIGTERM-to-SIGKILL grace when stopping a turn; 2 s unless given. */
  killGraceMs?: number;
  /** Where turns run; none unless given. */
  sandbox?: Sandbox;
  /** Bytes of stdout a reply may hold (`[limits] reply`); more fails the turn as reply_too_large. */
  replyLimit?: number;
}

const STDERR_KEEP = 16 * 1024;
/** How long stdout may stay open after the group is gone (a process that left the group). */
const DRAIN_MS = 2000;
const PLACEHOLDER = /\{prompt(_file)?\}/g;
const HAS_PLACEHOLDER = /\{prompt(_file)?\}/;

/** The argv with `{prompt}` and `{prompt_file}` filled in, in one pass. */
export function expandArgv(argv: readonly string[], prompt: string, promptFile: string): string[] {
  return argv.map((arg) => arg.replace(PLACEHOLDER, (_, file) => (file ? promptFile : prompt)));
}

/** Where `{prompt_file}` puts the prompt of one turn. */
export function promptFilePath(runDir: string, session: string, turn: number): string {
  return join(runDir, 'prompts', `${session.replace(/[^A-Za-z0-9._-]/g, '_')}-turn${turn}.md`);
}

/** Where output past the reply limit of one turn goes. */
export function spillPath(runDir: string, session: string, turn: number): string {
  return join(runDir, 'replies', `${session.replace(/[^A-Za-z0-9._-]/g, '_')}-turn${turn}.overflow`);
}

/** The whole environment of a worker turn; `mark` is the turn's TRON_MARK. */
export function turnEnv(
  request: TurnRequest,
  source: Readonly<Record<string, string | undefined>>,
  passThrough: readonly string[],
  mark?: string,
): Record<string, string> {
  return minimalEnv(source, passThrough, {
    TRON_ROLE: request.role,
    TRON_BLOCK: request.block,
    TRON_SESSION: request.session,
    TRON_TURN: String(request.turn),
    TRON_PHASE: request.phase,
    TRON_RUN_DIR: request.runDir,
    ...(mark ? { [MARK_VAR]: mark } : {}),
  });
}

function withReason(head: string, reason: string | undefined): string {
  return reason ? `${head}: ${reason}` : head;
}

/** Whether a chunk of output holds something to read (not only whitespace or escapes). */
const MEANINGFUL = /[\p{L}\p{N}]/u;

/** Creates the adapter for one `[workers.<role>]` table with `adapter = "command"`. */
export function createCommandWorker(settings: CommandSettings, deps: CommandDeps): CommandWorker {
  const graceMs = deps.killGraceMs ?? 2000;
  const sandbox = deps.sandbox ?? NO_SANDBOX;
  const live = new Map<string, RunningTurn>();

  async function runTurn(request: TurnRequest, observer: TurnObserver): Promise<TurnOutcome> {
    const configHint = `check [workers.${request.role}] command in .tron/config.toml`;
    if (request.signal.aborted) return { ok: false, failure: 'aborted', detail: 'stopped by the engine before it started' };

    const shown = settings.command[0];
    const usesPlaceholder = settings.command.some((arg) => HAS_PLACEHOLDER.test(arg));
    const promptFile = promptFilePath(request.runDir, request.session, request.turn);
    if (settings.command.some((arg) => arg.includes('{prompt_file}'))) {
      try {
        mkdirSync(join(request.runDir, 'prompts'), { recursive: true });
        writeFileSync(promptFile, request.prompt);
      } catch (error) {
        const why = (error as NodeJS.ErrnoException).code ?? String(error);
        return { ok: false, failure: 'crash', detail: `cannot write the prompt file ${promptFile} for "${shown}" (${why})` };
      }
    }
    const mark = newMark();
    const argv = expandArgv(settings.command, request.prompt, promptFile);
    const confinement = turnConfinement(request, settings.writable, deps.env);
    // The program itself must be visible inside (it may live under /tmp, which the sandbox hides).
    if (argv[0]!.includes('/')) confinement.visible = [...(confinement.visible ?? []), resolve(request.cwd, argv[0]!)];
    let entered: Entered;
    try {
      const entering = sandbox.enter(argv, confinement);
      // Unsandboxed, the worker starts in this very tick, as it always did.
      entered = entering instanceof Promise ? await entering : entering;
    } catch (error) {
      return { ok: false, failure: 'crash', detail: `cannot prepare the sandbox for "${shown}": ${(error as Error).message}` };
    }
    const [file, ...args] = entered.argv;

    const child = spawn(file!, args, {
      cwd: request.cwd,
      env: turnEnv(request, deps.env, settings.env, mark),
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });

    // After a successful start, 'error' only reports a failed kill or write: nothing to act on.
    const spawnError = new Promise<NodeJS.ErrnoException>((resolve) => child.on('error', resolve));
    const pid = child.pid;
    if (pid === undefined) {
      const error = await spawnError;
      await entered.leave();
      const why =
        error.code === 'ENOENT' && !existsSync(request.cwd)
          ? `its working directory ${request.cwd} does not exist`
          : error.code === 'ENOENT'
            ? 'no such program'
            : `${error.code ?? 'error'}: ${error.message}`;
      return { ok: false, failure: 'crash', detail: `cannot start "${shown}" (${why}); ${configHint}` };
    }

    // Read at once: a very short-lived worker may already be a zombie by the next tick.
    // Should it be one already, '' matches no process, so recovery will never kill by it.
    const startTime = processStartTime(pid) ?? '';
    const state: RunningTurn = { pid, startTime, outputBytes: 0 };
    live.set(request.session, state);
    observer.spawned({ pid, startTime });

    const stdout = new OutputCap(deps.replyLimit ?? DEFAULT_REPLY_LIMIT, spillPath(request.runDir, request.session, request.turn));
    let stderr = Buffer.alloc(0);
    // The stream the CLI last said something on: its last meaningful line is the reason shown.
    let lastSaid: 'stdout' | 'stderr' = 'stdout';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout.push(chunk);
      state.outputBytes += chunk.length;
      if (MEANINGFUL.test(chunk.toString('utf8'))) lastSaid = 'stdout';
      observer.output?.('stdout', chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      state.outputBytes += chunk.length;
      observer.output?.('stderr', chunk);
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > STDERR_KEEP) stderr = stderr.subarray(stderr.length - STDERR_KEEP);
      if (MEANINGFUL.test(chunk.toString('utf8'))) lastSaid = 'stderr';
    });
    // A worker may exit without reading its prompt; the broken pipe is not the failure.
    child.stdin.on('error', () => {});
    if (usesPlaceholder) child.stdin.end();
    else child.stdin.end(request.prompt);

    const streamsClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );

    const processes = { root: pid, mark, since: Number(startTime || 0) };
    let stopped: 'timeout' | 'aborted' | undefined;
    let stopping: Promise<void> | undefined;
    const stop = (why: 'timeout' | 'aborted') => {
      if (stopped) return;
      stopped = why;
      stopping = endRun(processes, graceMs);
    };
    // Ref'd, as the worker's process is.
    const disarm = (request.clock ?? systemClock).after(request.timeoutMs, () => stop('timeout'), { keepAlive: true });
    const onAbort = () => stop('aborted');
    request.signal.addEventListener('abort', onAbort, { once: true });

    const exit = await exited;
    disarm();
    request.signal.removeEventListener('abort', onAbort);
    observer.exited({ pid, code: exit.code, signal: exit.signal });
    // Whatever the worker left running ends with the turn.
    await stopping;
    await endRun(processes, graceMs);
    await Promise.race([streamsClosed, new Promise((r) => setTimeout(r, DRAIN_MS).unref())]);
    child.stdout.destroy();
    child.stderr.destroy();
    await entered.leave();
    if (live.get(request.session) === state) live.delete(request.session);

    const output = stdout.text();
    stdout.close();
    const err = stderr.toString('utf8');
    const read = readOutput(settings.output ?? 'text', output, argv);
    for (const usage of read.usage) observer.usage(usage);
    // The CLI's own words: its structured error, else its last meaningful line where it said something last.
    const streams = lastSaid === 'stdout' ? [output, err] : [err, output];
    const said = read.structured && read.error === undefined ? [err, output] : streams;
    const reason = read.error?.trim() || lastMeaningfulLine(said[0]!) || lastMeaningfulLine(said[1]!);
    const failed = (failure: TurnFailure, head: string): TurnOutcome => {
      const cause = failure === 'exit' || failure === 'api' ? failureCause(reason ?? '') : undefined;
      return {
        ok: false,
        failure,
        detail: withReason(head, reason),
        ...(output ? { output } : {}),
        ...(err ? { stderr: err } : {}),
        ...(cause ? { cause } : {}),
      };
    };
    if (stopped === 'timeout') {
      return failed('timeout', `no reply within ${formatDuration(request.timeoutMs)}; "${shown}" and its processes were stopped`);
    }
    if (stopped === 'aborted') return failed('aborted', `stopped by the engine; "${shown}" and its processes were stopped`);
    if (stdout.overflowed) return { ok: false, failure: 'reply_too_large', detail: stdout.describe(), ...(output ? { output } : {}) };
    if (exit.signal) return failed('crash', `"${shown}" was killed by ${exit.signal}`);
    if (exit.code !== 0) return failed('exit', `exited with ${exit.code}`);
    if (read.error !== undefined) return failed('api', `"${shown}" exited 0 but reported an error`);
    return { ok: true, reply: read.reply };
  }

  function running(session: string): RunningTurn | undefined {
    const turn = live.get(session);
    return turn && { ...turn };
  }

  return { kind: 'command', runTurn, running };
}
