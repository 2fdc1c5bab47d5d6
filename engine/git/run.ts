/**
 * The one place tron spawns git. Every call gets an environment that cannot prompt,
 * page or be redirected to another repository by variables inherited from a parent git
 * (tron may run inside a hook or `git rebase --exec`), and its outcome comes back as a
 * value, so callers decide which exit statuses are normal answers.
 *
 * The user's hooks are deliberately left alone: `git worktree add` still runs their
 * post-checkout hook, `update-ref` their reference-transaction hook.
 */
import { execa } from 'execa';
import { InputError } from '../core/errors.ts';
import type { FaultCode, InputCode } from '../core/problems.ts';

/** A full object name. */
export type Sha = string;

/** Variables that would point git at some other repository, index or worktree. */
const LOCATION_VARS = [
  'GIT_DIR',
  'GIT_WORK_TREE',
  'GIT_INDEX_FILE',
  'GIT_OBJECT_DIRECTORY',
  'GIT_ALTERNATE_OBJECT_DIRECTORIES',
  'GIT_COMMON_DIR',
  'GIT_NAMESPACE',
  'GIT_PREFIX',
  'GIT_QUARANTINE_PATH',
];

/** The environment for engine git calls: the caller's, minus location overrides, never interactive. */
export function gitEnv(source: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value !== undefined && !LOCATION_VARS.includes(name)) env[name] = value;
  }
  return {
    ...env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_PAGER: 'cat',
    PAGER: 'cat',
    GIT_EDITOR: 'true',
    // Status must not take index.lock in a worktree a worker is committing in.
    GIT_OPTIONAL_LOCKS: '0',
  };
}

const ENV = gitEnv(process.env);

export interface GitResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Runs `git args` in `cwd`; never throws for a non-zero exit. stdout loses only its final newline. */
export async function runGit(cwd: string, args: readonly string[], input?: string): Promise<GitResult> {
  const result = await execa('git', ['-c', 'color.ui=never', ...args], {
    cwd,
    env: ENV,
    extendEnv: false,
    reject: false,
    ...(input === undefined ? { stdin: 'ignore' as const } : { input }),
    stripFinalNewline: true,
  });
  if (result.failed && result.exitCode === undefined) {
    throw new GitFailure('TRON_GIT_UNAVAILABLE', `could not run git in ${cwd}: ${result.shortMessage}`);
  }
  return { exitCode: result.exitCode ?? 1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

/** Runs git and returns stdout; any non-zero exit is a GitFailure naming the command. */
export async function gitOut(cwd: string, args: readonly string[], input?: string): Promise<string> {
  const result = await runGit(cwd, args, input);
  if (result.exitCode !== 0) throw commandFailed(cwd, args, result);
  return result.stdout;
}

export function commandFailed(cwd: string, args: readonly string[], result: GitResult): GitFailure {
  const detail = result.stderr.trim() || result.stdout.trim() || `exit ${result.exitCode}`;
  return new GitFailure('TRON_GIT_FAILED', `git ${args.join(' ')} (in ${cwd}) failed: ${detail}`);
}

/**
 * A git operation that failed for a reason that is not the user's to fix (exit 1):
 * git missing, a corrupt repository, an engine invariant refused. Carries a stable code.
 */
export class GitFailure extends Error {
  readonly code: FaultCode;
  constructor(code: FaultCode, message: string) {
    super(`${code}: ${message}`);
    this.name = 'GitFailure';
    this.code = code;
  }
}

/**
 * A repository state the user caused and can fix (exit 2, nothing changed): an
 * InputError with one problem, whose code is also on `.code` for callers that react.
 */
export class GitStateError extends InputError {
  readonly code: InputCode;
  constructor(code: InputCode, path: string, message: string) {
    super([{ code, path, message }]);
    this.name = 'GitStateError';
    this.code = code;
  }
}

/**
 * Diff options that make the patch text independent of the user's diff.* config
 * (prefixes, context, algorithm, renames, colour, external tools), so a patch id means
 * the same thing on every machine and in every run.
 */
export const DIFF_FLAGS = [
  '--no-color',
  '--no-ext-diff',
  '--no-textconv',
  '--no-relative',
  '--no-renames',
  '--binary',
  '--src-prefix=a/',
  '--dst-prefix=b/',
  '--unified=3',
  '--inter-hunk-context=0',
  '--diff-algorithm=myers',
] as const;
