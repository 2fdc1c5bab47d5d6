/**
 * The agent's `run` tool: one command in the worktree, in its own process group, with a
 * minimal environment, a timeout and bounded output. The group is killed on timeout or
 * when the turn ends, so no command the model started outlives its turn.
 */
import { spawn } from 'node:child_process';
import { formatDuration } from '../../core/duration.ts';
import { processStartTime } from '../../runtime/proc.ts';
import { signalGroup } from '../process-group.ts';

/** Longest output (stdout and stderr together) a result carries; the middle is cut beyond it. */
export const RUN_OUTPUT_LIMIT = 20_000;

export interface RunOptions {
  cwd: string;
  /** The whole environment of the command; nothing else is inherited. */
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  /** Reported so recovery can kill a stray command by pid and start time. */
  onSpawn?: (info: { pid: number; startTime: string }) => void;
  onExit?: (info: { pid: number; code: number | null; signal: string | null }) => void;
}

/** Runs `argv` (no shell) or `shell` (via /bin/sh -c) and describes the outcome for the model. */
export function runCommand(command: { argv: string[] } | { shell: string }, options: RunOptions): Promise<string> {
  const [file, args] = 'argv' in command ? [command.argv[0]!, command.argv.slice(1)] : ['/bin/sh', ['-c', command.shell]];
  const label = 'argv' in command ? JSON.stringify(command.argv) : command.shell;
  return new Promise((resolve) => {
    const output = new BoundedOutput(RUN_OUTPUT_LIMIT);
    let ended: 'timeout' | 'aborted' | undefined;
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true, // its own process group, so the whole tree can be killed
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pid = child.pid;
    if (pid !== undefined) options.onSpawn?.({ pid, startTime: processStartTime(pid) ?? '' });
    // Signalled only while a live member holds the group id, so never a stranger's group.
    const killGroup = () => {
      if (pid !== undefined) signalGroup(pid, 'SIGKILL');
    };
    const timer = setTimeout(() => {
      ended = 'timeout';
      killGroup();
    }, options.timeoutMs);
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
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      resolve(`$ ${label}\n${status}\n${output.render()}`);
    };
    child.on('error', (error) => finish(`error: could not start the command: ${error.message}`));
    child.on('close', (code, signal) => {
      // The command may have left children behind holding no pipe: end the group anyway.
      killGroup();
      if (pid !== undefined) options.onExit?.({ pid, code, signal });
      if (ended === 'timeout') {
        finish(`error: timed out after ${formatDuration(options.timeoutMs)}; the command and its children were killed`);
      } else if (ended === 'aborted') finish('error: the turn ended; the command and its children were killed');
      else if (signal) finish(`killed by signal ${signal}`);
      else finish(`exit code ${code}`);
    });
  });
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
