/**
 * The agent's `run` tool: one command in the worktree, in its own process group, with a
 * minimal environment, a timeout and bounded output — and, where tron sandboxes, in the
 * turn's sandbox (engine/workers/sandbox.ts), like a command worker. Everything the
 * command started (its group, its descendants, whatever carries its `TRON_MARK`) is
 * killed on timeout, when the turn ends and when the command itself ends, so nothing the
 * model started outlives its command.
 */
import { type Clock, systemClock } from '../../os/clock.ts';
import { spawn } from 'node:child_process';
import { formatDuration } from '../../core/duration.ts';
import { processStartTime } from '../../os/proc.ts';
import { MARK_VAR, killRun, killRunAndWait, newMark } from '../../os/process-tree.ts';
import { NO_SANDBOX, type Confinement, type Entered, type Sandbox } from '../sandbox.ts';

/** Longest output (stdout and stderr together) a result carries; the middle is cut beyond it. */
export const RUN_OUTPUT_LIMIT = 20_000;

export interface RunOptions {
  cwd: string;
  /** The whole environment of the command; nothing else is inherited. */
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  /** Times `timeoutMs` (the system's by default). */
  clock?: Clock;
  /** Reported so recovery can kill a stray command by pid and start time. */
  onSpawn?: (info: { pid: number; startTime: string }) => void;
  onExit?: (info: { pid: number; code: number | null; signal: string | null }) => void;
  /** The turn's sandbox and what the command may reach in it; unconfined unless given. */
  sandbox?: Sandbox;
  confinement?: Confinement;
}

/** Runs `argv` (no shell) or `shell` (via /bin/sh -c) and describes the outcome for the model. */
export async function runCommand(command: { argv: string[] } | { shell: string }, options: RunOptions): Promise<string> {
  const argv = 'argv' in command ? command.argv : ['/bin/sh', '-c', command.shell];
  const label = 'argv' in command ? JSON.stringify(command.argv) : command.shell;
  const sandbox = options.sandbox ?? NO_SANDBOX;
  let entered: Entered;
  try {
    entered = await sandbox.enter(argv, options.confinement ?? { cwd: options.cwd, writableCwd: true, network: true });
  } catch (error) {
    return `$ ${label}\nerror: could not prepare the sandbox for the command: ${(error as Error).message}\n`;
  }
  const [file, ...args] = entered.argv;
  const mark = newMark();
  const text = await new Promise<string>((resolve) => {
    const output = new BoundedOutput(RUN_OUTPUT_LIMIT);
    let ended: 'timeout' | 'aborted' | undefined;
    const child = spawn(file!, args, {
      cwd: options.cwd,
      env: { ...options.env, [MARK_VAR]: mark },
      detached: true, // its own process group, so the whole tree can be killed
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pid = child.pid;
    const startTime = pid === undefined ? undefined : processStartTime(pid);
    if (pid !== undefined) options.onSpawn?.({ pid, startTime: startTime ?? '' });
    // The group only while a live member holds its id (never a stranger's), the tree and the marked.
    const killGroup = () => {
      if (pid !== undefined) killRun({ root: pid, mark, since: Number(startTime ?? 0) });
    };
    // Ref'd, as the command's process is.
    const disarm = (options.clock ?? systemClock).after(
      options.timeoutMs,
      () => {
        ended = 'timeout';
        killGroup();
      },
      { keepAlive: true },
    );
    const onAbort = () => {
      ended ??= 'aborted';
      killGroup();
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    if (options.signal.aborted) onAbort();
    child.stdout.on('data', (chunk: Buffer) => output.add(chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => output.add(chunk.toString('utf8')));
    let done = false;
    const finish = (status: string) => {
      if (done) return;
      done = true;
      disarm();
      options.signal.removeEventListener('abort', onAbort);
      resolve(`$ ${label}\n${status}\n${output.render()}`);
    };
    child.on('error', (error) => finish(`error: could not start the command: ${error.message}`));
    child.on('close', async (code, signal) => {
      // The command may have left children behind holding no pipe: end the group anyway,
      // and say what was killed only once it is gone.
      if (pid !== undefined) await killRunAndWait({ root: pid, mark, since: Number(startTime ?? 0) });
      if (pid !== undefined) options.onExit?.({ pid, code, signal });
      if (ended === 'timeout') {
        finish(`error: timed out after ${formatDuration(options.timeoutMs)}; the command and its children were killed`);
      } else if (ended === 'aborted') finish('error: the turn ended; the command and its children were killed');
      else if (signal) finish(`killed by signal ${signal}`);
      else finish(`exit code ${code}`);
    });
  });
  await entered.leave();
  return text;
}

/** Keeps the head and the tail of a long output, and says how much of the middle was cut. */
class BoundedOutput {
  private head = '';
  private tail = '';
  private total = 0;
  constructor(private readonly limit: number) {}

  add(text: string): void {
    this.total += text.length;
    const half = this.limit / 2;
    if (this.head.length < half) {
      const take = text.slice(0, half - this.head.length);
      this.head += take;
      text = text.slice(take.length);
    }
    if (text) this.tail = (this.tail + text).slice(-half);
  }

  render(): string {
    const shown = this.head.length + this.tail.length;
    if (this.total <= this.limit) return this.head + this.tail;
    const cut = this.total - shown;
    return `${this.head}\n[output truncated: ${cut} of ${this.total} characters cut from the middle; the limit is ${this.limit}]\n${this.tail}`;
  }
}
