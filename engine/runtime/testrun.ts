/**
 * The engine's own test runs: the configured command, in a given checkout, with a
 * timeout, its whole output saved in the run directory. The engine believes this and
 * nothing a worker says about its tests.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import type { TestRun } from '../core/events.ts';

const TAIL_LINES = 30;

/** Runs `command` by a shell in `cwd`; `log` is the output file's path relative to `runDir`. */
export async function runTests(opts: {
  command: string;
  cwd: string;
  runDir: string;
  log: string;
  timeoutMs: number;
  env: Record<string, string | undefined>;
  /** The test process started / ended: recorded, so recovery can kill one a crash left running. */
  onSpawn?: (pid: number) => void;
  onExit?: (pid: number, code: number | null) => void;
}): Promise<TestRun> {
  const child = execa(opts.command, {
    shell: true,
    cwd: opts.cwd,
    env: { ...opts.env, CI: opts.env.CI ?? 'true' },
    extendEnv: false,
    all: true,
    reject: false,
    stdin: 'ignore',
    timeout: opts.timeoutMs,
    forceKillAfterDelay: 2000,
    detached: true,
    cleanup: true,
  });
  const pid = child.pid;
  if (pid !== undefined) opts.onSpawn?.(pid);
  const result = await child;
  if (pid !== undefined) opts.onExit?.(pid, result.exitCode ?? null);
  const output = result.all ?? '';
  const file = join(opts.runDir, opts.log);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(
    file,
    `$ ${opts.command}\n# cwd: ${opts.cwd}\n${output}\n# exit: ${result.exitCode ?? 'none'}${result.timedOut ? ' (timed out)' : ''}\n`,
  );
  if (pid !== undefined) {
    // Whatever the test command left running in its group dies with it.
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // the group is already gone
    }
  }
  return {
    exit: result.timedOut ? null : (result.exitCode ?? null),
    timed_out: Boolean(result.timedOut),
    log: opts.log,
    tail: output.split('\n').slice(-TAIL_LINES).join('\n'),
  };
}
