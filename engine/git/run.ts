/**
 * The one place tron spawns git, and the rule every engine git call obeys: **it runs no
 * program that a repository, a worker or HOME configured.** A worker is untrusted; it can
 * write the shared git directory (its worktree's `.git` file points there: hooks, config,
 * info/attributes) and, without a sandbox, HOME. So every call runs
 *
 * - with no hooks (`core.hooksPath=/dev/null`): no reference-transaction hook when a
 *   landing or a branch moves refs, no post-checkout when a worktree is made or reset, no
 *   post-index-change when the user's checkout of trunk follows a landing — the user's own
 *   hooks included, since tron's ref moves and checkouts are not the user's commands;
 * - with no fsmonitor and no untracked cache, so `status` looks at the files themselves;
 * - without global or system config (`GIT_CONFIG_GLOBAL=/dev/null`, `GIT_CONFIG_NOSYSTEM`):
 *   HOME's `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config` are never read, nor HOME's
 *   attributes and ignore files, nor the system's attributes;
 * - with no clean, smudge or process filter and no merge driver: before a command that
 *   reads or writes working-tree files, every filter driver the repository's config
 *   defines is switched off, and every merge driver is replaced by `false` (a conflict,
 *   which the lane hands to the builder) — by `GIT_CONFIG_COUNT`, which, unlike `-c`,
 *   takes any driver name;
 * - with no commit signing program, no rerere and no automatic gc (the lane's cherry-picks);
 * - with no external diff or textconv (`--no-ext-diff --no-textconv` on each diff), no
 *   signature program (`log.showSignature=false`), no pager, editor or prompt;
 * - with no lazy fetch and every transport closed (`GIT_NO_LAZY_FETCH`, `GIT_ALLOW_PROTOCOL`
 *   empty): a planted promisor remote cannot turn a missing object into an ssh, `ext::`,
 *   remote-helper or credential-helper run;
 * - with replace refs ignored, so a planted `refs/replace/*` cannot change the history
 *   the engine derives facts from;
 * - in a minimal environment: PATH, HOME, LANG and TERM, plus the GIT_* variables set here.
 *   Never the engine's secrets, and nothing inherited from a parent git (tron may run in
 *   a hook or `git rebase --exec`, whose GIT_DIR would point elsewhere).
 *
 * Two gaps remain, both closed by keeping workers out of the git directory (the sandbox):
 * filter drivers are read just before the command (or known from the very config text
 * read then, see `filtersOff`), so one planted in between runs; and
 * drivers defined only in a submodule's own config are not read, so a `status` that
 * recurses into a checked-out submodule could run them.
 *
 * The engine makes no commits; the reflog entries of the refs it moves are signed `tron`,
 * not whoever HOME names. Each outcome comes back as a value, so callers decide which
 * exit statuses are normal answers. Three spawners share the rule: node's child_process
 * where the exit status is the answer or stdin carries input (`update-ref --stdin`,
 * `patch-id`), simple-git for the listings it parses (status, branches, log), and a
 * repository's long-lived `cat-file --batch-check` that resolves names (resolver.ts).
 */
import { lstat, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { type SimpleGit, simpleGit } from 'simple-git';
import { InputError } from '../core/errors.ts';
import type { FaultCode, InputCode } from '../core/problems.ts';

/** A full object name. */
export type Sha = string;

/** Whether `text` is a full object name (SHA-1 or SHA-256), nothing around it. */
export function isFullSha(text: string | undefined): text is Sha {
  return text !== undefined && /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(text);
}

/** Config of every engine git call, as `-c` pairs: each switches a program or a HOME file off. */
export const SAFE_CONFIG = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.untrackedCache=false',
  'core.attributesFile=/dev/null',
  'core.excludesFile=/dev/null',
  'log.showSignature=false',
  'color.ui=never',
  // The lane's replays: no signing program, no replayed resolutions, no background gc.
  'commit.gpgSign=false',
  'rerere.enabled=false',
  'gc.auto=0',
] as const;

/** The only variables of the engine's environment a git call sees. */
const PASSED_ON = ['PATH', 'HOME', 'LANG', 'TERM'] as const;

/** Who moved a ref, in the reflog. */
const ENGINE_IDENTITY = { name: 'tron', email: 'tron@localhost' } as const;

/** The environment of every engine git call: the minimal base of `source` and git's switches. */
export function gitEnv(source: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of PASSED_ON) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  return {
    ...env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    // A missing object is not fetched (git 2.39.4 and later)…
    GIT_NO_LAZY_FETCH: '1',
    // …and, with older gits, no protocol is allowed, whatever protocol.*.allow says.
    GIT_ALLOW_PROTOCOL: '',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_PAGER: 'cat',
    GIT_EDITOR: 'true',
    // Status must not take index.lock in a worktree a worker is committing in.
    GIT_OPTIONAL_LOCKS: '0',
    GIT_COMMITTER_NAME: ENGINE_IDENTITY.name,
    GIT_COMMITTER_EMAIL: ENGINE_IDENTITY.email,
  };
}

/** Subcommands that read or write working-tree files, and so would run a filter driver. */
const WORKING_TREE_COMMANDS = new Set([
  'checkout',
  'cherry-pick',
  'diff',
  'merge',
  'merge-tree',
  'read-tree',
  'rebase',
  'reset',
  'status',
  'update-index',
  'worktree',
]);

/**
 * Variables that switch off every filter and merge driver the config seen from `cwd`
 * defines: clean, smudge and process emptied (git then passes content through), required
 * false; a merge driver's command replaced by `false`, so the merge it would have made is
 * a conflict instead of a program run.
 */
async function filtersOff(cwd: string, env: Record<string, string>): Promise<Record<string, string>> {
  const key = await configKey(cwd);
  const known = key === undefined ? undefined : driversSeen.get(key);
  if (known !== undefined) return known;
  const vars = await driversOff(cwd, env);
  if (key !== undefined) {
    if (driversSeen.size >= 64) driversSeen.clear();
    driversSeen.set(key, vars);
  }
  return vars;
}

/**
 * What `filtersOff` found, by the config text it found it in: the same text (in any
 * folder — a repository and its worktrees share the common config) gives the same
 * drivers, and a changed text is asked again. (`git config` is a process; reading two
 * small files is not.)
 */
const driversSeen = new Map<string, Record<string, string>>();

/**
 * Every config file git reads for `cwd` (a repository's or worktree's top folder), as one
 * string: the text of the common `config` and the worktree's `config.worktree` — system and global
 * config are off for engine calls, and the environment is the engine's own. Undefined
 * when that cannot be told for sure — no plain `.git` file or folder there, or a config
 * that includes another file, which could change unseen — and git must be asked.
 */
async function configKey(cwd: string): Promise<string | undefined> {
  try {
    const dirs = await gitDirsOf(cwd);
    if (dirs === undefined) return undefined;
    const { gitDir, common } = dirs;
    const texts = await Promise.all(
      [join(common, 'config'), join(gitDir, 'config.worktree')].map((file) =>
        readFile(file, 'latin1').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? '' : Promise.reject(error))),
      ),
    );
    if (texts.some((text) => /include/i.test(text))) return undefined;
    return texts.join('\0');
  } catch {
    return undefined;
  }
}

/**
 * The git directory and common git directory of `dir`, a repository's or worktree's top
 * folder, read from its plain `.git` folder or `gitdir:` file (and `commondir`), as git
 * finds them; undefined for anything else (a link, no `.git`), which git must be asked.
 */
export async function gitDirsOf(dir: string): Promise<{ gitDir: string; common: string } | undefined> {
  try {
    const dotGit = join(dir, '.git');
    const kind = await lstat(dotGit);
    if (kind.isDirectory()) return { gitDir: dotGit, common: dotGit };
    if (!kind.isFile()) return undefined;
    const pointer = /^gitdir: (.+)$/m.exec(await readFile(dotGit, 'utf8'))?.[1]?.trim();
    if (pointer === undefined) return undefined;
    const gitDir = resolve(dir, pointer);
    const common = await readFile(join(gitDir, 'commondir'), 'utf8').then(
      (text) => resolve(gitDir, text.trim()),
      () => gitDir,
    );
    return { gitDir, common };
  } catch {
    return undefined;
  }
}

async function driversOff(cwd: string, env: Record<string, string>): Promise<Record<string, string>> {
  const listed = await spawnGit(cwd, ['config', '--name-only', '-z', '--get-regexp', '^(filter|merge)\\.'], env);
  const filters = new Set<string>();
  const merges = new Set<string>();
  for (const key of listed.stdout.split('\0')) {
    const filter = /^filter\.(.+)\.[^.]+$/.exec(key)?.[1];
    if (filter !== undefined) filters.add(filter);
    const merge = /^merge\.(.+)\.driver$/.exec(key)?.[1];
    if (merge !== undefined) merges.add(merge);
  }
  const pairs: Array<[string, string]> = [
    ...[...filters].flatMap((d) =>
      ['clean', 'smudge', 'process', 'required'].map((k): [string, string] => [`filter.${d}.${k}`, k === 'required' ? 'false' : '']),
    ),
    ...[...merges].map((d): [string, string] => [`merge.${d}.driver`, 'false']),
  ];
  if (pairs.length === 0) return {};
  const vars: Record<string, string> = { GIT_CONFIG_COUNT: String(pairs.length) };
  pairs.forEach(([key, value], i) => {
    vars[`GIT_CONFIG_KEY_${i}`] = key;
    vars[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return vars;
}

/** The environment for `args` run in `cwd`: filters off when the command touches files. */
async function envFor(cwd: string, touchesFiles: boolean): Promise<Record<string, string>> {
  const env = gitEnv(process.env);
  return touchesFiles ? { ...env, ...(await filtersOff(cwd, env)) } : env;
}

export interface GitResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `git args` in `cwd` (args begin with the subcommand); never throws for a non-zero
 * exit. stdout loses only its final newline.
 */
export async function runGit(cwd: string, args: readonly string[], input?: string): Promise<GitResult> {
  return spawnGit(cwd, args, await envFor(cwd, touchesFiles(args)), input);
}

/**
 * runGit for a few commands in a row in one folder (e.g. refresh the index, then move it):
 * the filter and merge drivers are read once, before the first, rather than before each.
 */
export async function gitIn(cwd: string): Promise<(args: readonly string[], input?: string) => Promise<GitResult>> {
  const plain = gitEnv(process.env);
  const off = { ...plain, ...(await filtersOff(cwd, plain)) };
  return (args, input) => spawnGit(cwd, args, touchesFiles(args) ? off : plain, input);
}

/**
 * Whether `args` may read or write file contents through a filter or merge driver. Of
 * `worktree`, only `add` checks files out (and `remove` without --force, which looks for
 * changes); `prune`, `list` and a forced `remove` never read a file's content.
 */
function touchesFiles(args: readonly string[]): boolean {
  if (!WORKING_TREE_COMMANDS.has(args[0] ?? '')) return false;
  if (args[0] !== 'worktree') return true;
  return args[1] === 'add' || (args[1] === 'remove' && !args.includes('--force'));
}

/** runGit with a commit's author (GIT_AUTHOR_NAME, _EMAIL, _DATE) added to the environment: for commit-tree. */
export async function runGitAs(
  cwd: string,
  args: readonly string[],
  input: string,
  author: { GIT_AUTHOR_NAME?: string; GIT_AUTHOR_EMAIL?: string; GIT_AUTHOR_DATE?: string },
): Promise<GitResult> {
  return spawnGit(cwd, args, { ...(await envFor(cwd, false)), ...author }, input);
}

/**
 * runGit for plumbing that carries raw bytes — paths and commit messages that need not be
 * UTF-8 (`cat-file --batch`, `diff-tree -z`, `fast-import`): input and output are latin1
 * strings, one character a byte, so nothing is re-encoded on the way; stdout is kept
 * whole. Only for commands that read no working-tree file (no filter can run).
 */
export async function runGitBytes(cwd: string, args: readonly string[], input: string): Promise<GitResult> {
  if (touchesFiles(args)) throw new GitFailure('TRON_GIT_FAILED', `git ${args[0]} reads working-tree files: not through runGitBytes`);
  return spawnGit(cwd, args, await envFor(cwd, false), input, true);
}

/**
 * Spawns git by node's own child_process: the engine runs thousands of short git
 * processes, and execa's per-process work in this (single) thread costs twice node's
 * (2.5 against 1.1 ms a process, measured): time the lane and every gate wait for.
 */
function spawnGit(cwd: string, args: readonly string[], env: Record<string, string>, input?: string, bytes = false): Promise<GitResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('git', [...SAFE_CONFIG.flatMap((pair) => ['-c', pair]), ...args], {
      cwd,
      env,
      stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', (error) => reject(new GitFailure('TRON_GIT_UNAVAILABLE', `could not run git in ${cwd}: ${error.message}`)));
    child.on('close', (code, signal) => {
      if (code === null) {
        reject(new GitFailure('TRON_GIT_UNAVAILABLE', `git ${args[0]} in ${cwd} was killed by ${signal}`));
        return;
      }
      const encoding = bytes ? 'latin1' : 'utf8';
      const stdout = Buffer.concat(out).toString(encoding);
      resolvePromise({
        exitCode: code,
        stdout: bytes ? stdout : stdout.replace(/\r?\n$/, ''),
        stderr: Buffer.concat(err)
          .toString(encoding)
          .replace(/\r?\n$/, ''),
      });
    });
    if (input !== undefined) {
      // git may exit before reading all of it (a refusal): that is its answer, not an error here.
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(Buffer.from(input, bytes ? 'latin1' : 'utf8'));
    }
  });
}

/** One end of `pipeGit`: a git command, where it runs, and what it adds to the engine's environment. */
export interface PipeEnd {
  cwd: string;
  args: readonly string[];
  /** Added to the minimal environment (e.g. which object store to read). */
  env?: Readonly<Record<string, string>>;
}

/**
 * `git from | git to`, both under the rule above, the first fed `input`: for moving a
 * pack from one object store into another without holding it in memory. Only for
 * commands that read no working-tree file. Resolves once both have ended.
 */
export function pipeGit(from: PipeEnd & { input: string }, to: PipeEnd): Promise<{ from: GitResult; to: GitResult }> {
  for (const end of [from, to]) {
    if (touchesFiles(end.args)) throw new GitFailure('TRON_GIT_FAILED', `git ${end.args[0]} reads working-tree files: not through pipeGit`);
  }
  const start = (end: PipeEnd, stdin: 'pipe') => {
    const child = spawn('git', [...SAFE_CONFIG.flatMap((pair) => ['-c', pair]), ...end.args], {
      cwd: end.cwd,
      env: { ...gitEnv(process.env), ...end.env },
      stdio: [stdin, 'pipe', 'pipe'],
    });
    const err: Buffer[] = [];
    child.stderr!.on('data', (chunk: Buffer) => err.push(chunk));
    return { child, err };
  };
  const a = start(from, 'pipe');
  const b = start(to, 'pipe');
  // Either may end first (a refusal): a broken pipe is its answer, not an error here.
  a.child.stdin!.on('error', () => undefined);
  b.child.stdin!.on('error', () => undefined);
  a.child.stdout!.on('error', () => undefined);
  a.child.stdout!.pipe(b.child.stdin!);
  a.child.stdin!.end(from.input);
  const out: Buffer[] = [];
  b.child.stdout!.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = (end: PipeEnd, p: { child: ReturnType<typeof spawn>; err: Buffer[] }, stdout: () => string) =>
    new Promise<GitResult>((resolvePromise, reject) => {
      p.child.on('error', (error) => reject(new GitFailure('TRON_GIT_UNAVAILABLE', `could not run git in ${end.cwd}: ${error.message}`)));
      p.child.on('close', (code, signal) => {
        if (code === null) reject(new GitFailure('TRON_GIT_UNAVAILABLE', `git ${end.args[0]} in ${end.cwd} was killed by ${signal}`));
        else
          resolvePromise({
            exitCode: code,
            stdout: stdout(),
            stderr: Buffer.concat(p.err)
              .toString('utf8')
              .replace(/\r?\n$/, ''),
          });
      });
    });
  return Promise.all([
    ended(from, a, () => ''),
    ended(to, b, () =>
      Buffer.concat(out)
        .toString('utf8')
        .replace(/\r?\n$/, ''),
    ),
  ]).then(([f, t]) => ({ from: f, to: t }));
}

/**
 * Runs `work` with a simple-git for `cwd` under the same rule (`touchesFiles`: the command
 * reads working-tree files, so filters go off); any failure is a GitFailure naming `what`.
 */
export async function withSimpleGit<T>(cwd: string, what: string, touchesFiles: boolean, work: (git: SimpleGit) => Promise<T>): Promise<T> {
  const env = await envFor(cwd, touchesFiles);
  let git: SimpleGit;
  try {
    git = simpleGit({
      baseDir: cwd,
      config: [...SAFE_CONFIG],
      // Done when git's output streams close; simple-git's default also waits 50 ms after
      // exit when git printed nothing, which every empty listing would pay.
      completion: { onClose: true, onExit: false },
      // simple-git refuses these keys and variables unless allowed, as a guard against
      // untrusted input; ours are constants, and each one switches a program off.
      unsafe: {
        allowUnsafeHooksPath: true,
        allowUnsafeFsMonitor: true,
        allowUnsafePager: true,
        allowUnsafeEditor: true,
        allowUnsafeConfigPaths: true,
        allowUnsafeConfigEnvCount: true,
        allowUnsafeFilter: true,
      },
      allowEnvironment: Object.keys(env),
    }).env(env);
  } catch (error) {
    throw new GitFailure('TRON_GIT_UNAVAILABLE', `could not run git in ${cwd}: ${(error as Error).message}`);
  }
  try {
    return await work(git);
  } catch (error) {
    const detail = (error as Error).message.trim() || 'failed';
    throw new GitFailure('TRON_GIT_FAILED', `git ${what} (in ${cwd}) failed: ${detail}`);
  }
}

/** Runs git and returns stdout; any non-zero exit is a GitFailure naming the command. */
export async function gitOut(cwd: string, args: readonly string[], input?: string): Promise<string> {
  const result = await runGit(cwd, args, input);
  if (result.exitCode !== 0) throw commandFailed(cwd, args, result);
  return result.stdout;
}

export function commandFailed(cwd: string, args: readonly string[], result: GitResult): GitFailure {
  const detail = result.stderr.trim() || result.stdout.trim() || `exit ${result.exitCode}`;
  if (DAMAGE.test(detail)) {
    return new GitFailure(
      'TRON_STORE_DAMAGED',
      `git ${args.join(' ')} (in ${cwd}) failed: ${detail}. The repository's object store is damaged; tron stops and reports nothing done over it. \`git fsck\` lists what is missing; \`git fetch\` from a remote, or a backup of .git/objects, brings it back`,
    );
  }
  return new GitFailure('TRON_GIT_FAILED', `git ${args.join(' ')} (in ${cwd}) failed: ${detail}`);
}

/** What git says when an object it needs is gone or unreadable: damage to the store (store.ts), not a failed command. */
const DAMAGE =
  /\b(bad object [0-9a-f]{40}|missing (blob|tree|commit|tag) object|unable to read (tree )?\(?[0-9a-f]{40}|loose object [0-9a-f]{40,64} .*is corrupt|invalid sha1 pointer|packfile \S+ cannot be accessed|object file \S+ is empty)/;

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
