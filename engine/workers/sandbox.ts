/**
 * The sandbox every worker turn and every engine test run happens in (docs/SECURITY.md:
 * the worker is untrusted). With bubblewrap (`bwrap`), one process and
 * everything it starts see:
 *
 * - the whole file system read-only, a fresh `/dev` and `/proc`, a private `/tmp`;
 * - writable: the cwd when it is a builder's worktree (or a test checkout), the paths the
 *   worker's `writable` list names, and — for a builder — its worktree's own git metadata
 *   (`worktrees/<name>/`), a private object store of its own (private-store.ts: the
 *   repository's objects stay read-only, and what the branch needs is brought in
 *   afterwards), and its own branch `tron/<id>` with its reflog;
 * - read-only, whatever the rest allows: the worktree's `.git` file, the admin folder's
 *   `commondir`, `gitdir` and `config.worktree`, and `objects/info/alternates`, so a
 *   worker cannot point the engine's own git calls at a repository it made;
 * - its own PID namespace and `--die-with-parent`: when the command ends, or the engine,
 *   every process it started ends too, `setsid` children included; and a session of its
 *   own (`--new-session`), away from any terminal — an engine test run, started detached
 *   with its output to a file, already leads one with no terminal, and keeps it;
 * - no capabilities (`--cap-drop ALL`: tron may run as root, and a root with
 *   CAP_SYS_ADMIN could simply remount `/` read-write);
 * - the network for workers (they call model APIs), none for tests unless configured.
 *
 * **The branch.** git moves a ref by creating `<ref>.lock` beside it and renaming it, so
 * binding one ref file writable does not work, and binding `refs/heads/tron/` would expose
 * every other block's branch. Instead the builder gets a private folder mounted over
 * `refs/heads/tron/` (and one over its reflog folder) holding only its own branch; when
 * the process has ended, `leave()` brings the commits' objects in from the private store
 * (engine/git/objects.ts) and moves the real `refs/heads/tron/<id>` to what the worker
 * committed, by compare-and-swap, and only to a commit. Every other ref — trunk,
 * other blocks, `refs/tron/landed/*`, tags — is read-only inside.
 *
 * Without bwrap (`mode = "off"`, or `auto` where it cannot run) `enter` returns the argv
 * unchanged; the facts the engine checks after each turn are then the only line.
 */
import {
  accessSync,
  constants,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { execa } from 'execa';
import { InputError } from '../core/errors.ts';
import { WORKTREES_DIR } from '../git/worktree.ts';
import { importObjects } from '../git/objects.ts';
import { runGit } from '../git/run.ts';
import type { TurnRequest } from './adapter.ts';
import { findProgram } from './preflight.ts';
import type { SandboxMode } from '../project/worker-settings.ts';
import { privateStore } from './private-store.ts';
import type { Mount } from './mount.ts';
import { ConfigSanitizer, userGitConfigs } from './sandbox-git-config.ts';

export { SANDBOX_MODES, type SandboxMode } from '../project/worker-settings.ts';

/** What one sandboxed process may reach. */
export interface Confinement {
  /** Its working directory. */
  cwd: string;
  /** The cwd is writable: a builder's worktree, or the checkout a test runs in. */
  writableCwd?: boolean;
  /** A builder's own branch `tron/<block>` and its worktree's git metadata become writable. */
  ownBranch?: { repo: string; block: string };
  /** Further writable paths, absolute (see `expandWritable`); a missing one is skipped. */
  writable?: readonly string[];
  /** Whether the network is reachable. */
  network: boolean;
  /** Paths the process must be able to read even where they lie under the private `/tmp`. */
  visible?: readonly string[];
  /**
   * The process already leads a session with no controlling terminal (the engine's test
   * runs: started detached, their output to a file), so bwrap need not make another: the
   * engine can then set the priority of that session's whole group of processes.
   */
  inCallersSession?: boolean;
}

/** What the process changed of its own branch, once it has ended. */
export interface LeaveReport {
  /** The branch was moved from `from` (undefined: it did not exist) to `to`. */
  moved?: { from?: string; to: string };
  /** Why what the worker committed could not be carried to the branch. */
  problem?: string;
}

export interface Entered {
  /** The argv to spawn instead of the original one. */
  argv: string[];
  /** Call once the process and everything it started have ended. Never throws. */
  leave(): Promise<LeaveReport>;
}

export interface Sandbox {
  readonly kind: 'bwrap' | 'off';
  /** Prepares one confined process (at once when there is nothing to prepare). */
  enter(argv: readonly string[], confinement: Confinement): Entered | Promise<Entered>;
}

/** No sandbox: the argv as it is, at once (a caller that starts a process keeps its timing). */
export const NO_SANDBOX: Sandbox = {
  kind: 'off',
  enter(argv) {
    return { argv: [...argv], leave: async () => ({}) };
  },
};

/** What `bwrap` must manage for tron to use it; the probe runs exactly this. */
const BASE_ARGS = [
  '--die-with-parent',
  '--new-session',
  '--unshare-pid',
  '--cap-drop',
  'ALL',
  '--ro-bind',
  '/',
  '/',
  '--dev',
  '/dev',
  '--proc',
  '/proc',
  '--tmpfs',
  '/tmp',
] as const;

/** `bwrap` works here when it runs `true` with these arguments (what tron needs of it). */
export const PROBE_ARGS: readonly string[] = [...BASE_ARGS, '--unshare-net', 'true'];

const probes = new Map<string, Promise<string | undefined>>();

/** Why `bwrap` at `program` cannot sandbox here, or undefined when it can. Probed once per program. */
export function probeBwrap(program: string): Promise<string | undefined> {
  let probe = probes.get(program);
  if (!probe) {
    probe = execa(program, PROBE_ARGS, { reject: false, stdin: 'ignore', timeout: 10_000, env: { PATH: process.env.PATH ?? '' } }).then(
      (r) => (r.exitCode === 0 ? undefined : `\`${program} ${PROBE_ARGS.join(' ')}\` failed: ${String(r.stderr).trim() || r.shortMessage}`),
    );
    probes.set(program, probe);
  }
  return probe;
}

/** The sandbox a run uses, and what to say about it at start. */
export interface SandboxChoice {
  sandbox: Sandbox;
  mode: SandboxMode;
  /** Set when `auto` found no working bwrap: the run is unsandboxed, said once at start. */
  notice?: string;
}

/**
 * Chooses the run's sandbox: `off` never sandboxes; `bwrap` requires it (a coded config
 * error when it cannot run here); `auto` uses it when it works and otherwise says so.
 */
export async function chooseSandbox(
  mode: SandboxMode,
  env: Readonly<Record<string, string | undefined>>,
  hidden: readonly string[] = [],
): Promise<SandboxChoice> {
  if (mode === 'off') return { sandbox: NO_SANDBOX, mode };
  const program = findProgram('bwrap', env.PATH, '/');
  const why = program ? await probeBwrap(program) : 'bwrap (bubblewrap) is not installed: there is no bwrap on PATH';
  if (program && why === undefined) return { sandbox: bwrapSandbox(program, hidden, userGitConfigs(env)), mode };
  if (mode === 'bwrap') {
    throw new InputError([
      {
        code: 'TRON_SANDBOX_UNAVAILABLE',
        path: '.tron/config.toml: sandbox.mode',
        message: `is "bwrap", but ${why}; install bubblewrap (Debian: apt-get install bubblewrap) where user namespaces are allowed, or set mode = "auto" or "off"`,
      },
    ]);
  }
  return {
    sandbox: NO_SANDBOX,
    mode,
    notice: `tron: this run is NOT sandboxed — ${why}. Workers and tests can write wherever you can; the facts checked after each turn are the only line (docs/SECURITY.md). Set [sandbox] mode = "bwrap" in .tron/config.toml to require a sandbox, or "off" to silence this.`,
  };
}

/**
 * `writable` entries made absolute: `~/x` under HOME, `$NAME/x` under that variable,
 * absolute paths as they are. An entry whose variable is unset is left out.
 */
export function expandWritable(entries: readonly string[], env: Readonly<Record<string, string | undefined>>): string[] {
  const out: string[] = [];
  for (const entry of entries) {
    const home = /^~(\/.*)?$/.exec(entry);
    const variable = /^\$([A-Za-z_][A-Za-z0-9_]*)(\/.*)?$/.exec(entry);
    const base = home ? env.HOME : variable ? env[variable[1]!] : entry;
    const rest = home ? home[1] : variable ? variable[2] : '';
    if (base === undefined || base === '' || !isAbsolute(base)) continue;
    out.push(resolve(base + (rest ?? '')));
  }
  return out;
}

/**
 * What a process needs to see of tron's environment even under the private `/tmp`: the
 * folders on PATH (where its programs are) and HOME (its git identity, its tools' config).
 */
export function environmentPaths(env: Readonly<Record<string, string | undefined>>): string[] {
  const paths = (env.PATH ?? '').split(':').filter((dir) => isAbsolute(dir));
  if (env.HOME && isAbsolute(env.HOME)) paths.push(env.HOME);
  return paths;
}

/** How one turn is confined: builders write their worktree and branch; reviewers and architects only read. */
export function turnConfinement(
  request: TurnRequest,
  writable: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Confinement {
  const inWorktrees = request.repo === undefined || isInside(resolve(request.cwd), join(resolve(request.repo), WORKTREES_DIR));
  const builds = request.role === 'builder' && inWorktrees;
  return {
    cwd: request.cwd,
    writableCwd: builds,
    ...(builds && request.repo !== undefined ? { ownBranch: { repo: request.repo, block: request.block } } : {}),
    writable: expandWritable(writable, env),
    network: true,
    visible: [request.repo, request.runDir, ...environmentPaths(env)].filter((p): p is string => p !== undefined),
  };
}

function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

function isDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

export type { Mount } from './mount.ts';

const FLAG: Record<Exclude<Mount['kind'], 'hide'>, string> = {
  ro: '--ro-bind',
  rw: '--bind',
  'rw-try': '--bind-try',
  'hide-file': '--ro-bind',
};

function depth(path: string): number {
  return path.split(sep).filter(Boolean).length;
}

/** Shallow first; a hidden folder last of all, so that nothing writable or shown uncovers it. */
function rank(m: Mount): number {
  return m.kind === 'hide' || m.kind === 'hide-file' ? Number.MAX_SAFE_INTEGER : depth(m.dest);
}

/**
 * bwrap's arguments for a set of mounts: applied shallow first, so a writable folder
 * inside a read-only one, and a read-only file inside a writable folder, both hold.
 */
export function bwrapArgs(opts: { cwd: string; network: boolean; mounts: readonly Mount[]; inCallersSession?: boolean }): string[] {
  const args: string[] = BASE_ARGS.filter((arg) => !(opts.inCallersSession && arg === '--new-session'));
  if (!opts.network) args.push('--unshare-net');
  const seen = new Set<string>();
  const ordered = opts.mounts
    .map((m, i) => ({ m, i }))
    .sort((a, b) => rank(a.m) - rank(b.m) || a.i - b.i)
    .map(({ m }) => m);
  for (const m of ordered) {
    const key = `${m.kind}\0${m.dest}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (m.kind === 'hide') args.push('--tmpfs', m.dest);
    else args.push(FLAG[m.kind], m.src, m.dest);
  }
  args.push('--chdir', opts.cwd);
  return args;
}

/** The git directory shared by all worktrees of the repository at `repo` (read from files, no git). */
export function commonGitDir(repo: string): string | undefined {
  const dotGit = join(repo, '.git');
  if (isDir(dotGit)) return real(dotGit);
  try {
    const pointer = /^gitdir: (.*)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1]?.trim();
    if (!pointer) return undefined;
    const gitdir = resolve(repo, pointer);
    const common = existsSync(join(gitdir, 'commondir')) ? resolve(gitdir, readFileSync(join(gitdir, 'commondir'), 'utf8').trim()) : gitdir;
    return real(common);
  } catch {
    return undefined;
  }
}

const SHA = /^([0-9a-f]{40}|[0-9a-f]{64})\n?$/;

let scratchDir: string | undefined;

/**
 * Where a builder's private refs folders are made: memory (/dev/shm) where there is one,
 * as one is made for every process. Each is named after the engine's pid; the folders of
 * engines that died before they could remove theirs are removed the first time.
 */
function scratchRoot(): string {
  if (scratchDir === undefined) {
    try {
      accessSync('/dev/shm', constants.W_OK);
      scratchDir = isDir('/dev/shm') ? '/dev/shm' : tmpdir();
    } catch {
      scratchDir = tmpdir();
    }
    for (const name of safeReaddir(scratchDir)) {
      const pid = /^tron-(?:branch|config)-(\d+)-/.exec(name)?.[1];
      if (pid !== undefined && !existsSync(`/proc/${pid}`)) rmSync(join(scratchDir, name), { recursive: true, force: true });
    }
  }
  return scratchDir;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * The value of a branch ref, read from the files (a loose ref, else packed-refs) rather
 * than by a git process: it is read before every sandboxed builder process, and a spawn
 * costs more than the sandbox itself. Only the engine writes `tron/<id>`, and not while
 * its builder runs.
 */
export function readRef(common: string, ref: string): string | undefined {
  try {
    const loose = SHA.exec(readFileSync(join(common, ref), 'utf8'))?.[1];
    if (loose) return loose;
  } catch {
    // not loose: look in packed-refs
  }
  try {
    for (const line of readFileSync(join(common, 'packed-refs'), 'utf8').split('\n')) {
      const [sha, name] = line.split(' ');
      if (name === ref && sha && SHA.test(sha)) return sha;
    }
  } catch {
    // no packed-refs
  }
  return undefined;
}

/** The commit id a small regular file holds (a ref or HEAD the worker wrote), else undefined. */
function smallSha(file: string): string | undefined {
  try {
    return isFile(file) && lstatSync(file).size <= 80 ? SHA.exec(readFileSync(file, 'utf8'))?.[1] : undefined;
  } catch {
    return undefined;
  }
}

/** The commit ids of a worktree's own refs (`refs/bisect/*`, `refs/worktree/*`): a bounded look, at most 64 files. */
function worktreeRefs(dir: string): string[] {
  const found: string[] = [];
  let budget = 64;
  const look = (at: string, depthLeft: number): void => {
    for (const name of safeReaddir(at)) {
      if (budget-- <= 0) return;
      const path = join(at, name);
      if (isDir(path)) {
        if (depthLeft > 0) look(path, depthLeft - 1);
      } else {
        const sha = smallSha(path);
        if (sha !== undefined) found.push(sha);
      }
    }
  };
  if (isDir(dir)) look(dir, 4);
  return found;
}

/**
 * The mounts that let a builder commit on its own branch and nowhere else, and the step
 * that carries its commits to the real branch afterwards. Everything is derived from what
 * the engine knows (the repository, the block id, the worktree folder's name), never from
 * files the worker could have rewritten in an earlier turn.
 */
function ownBranch(repo: string, block: string, cwd: string): { mounts: Mount[]; leave: () => Promise<LeaveReport> } {
  const common = commonGitDir(repo);
  const admin = common && join(common, 'worktrees', basename(cwd));
  if (!common || !admin || !isDir(admin)) return { mounts: [], leave: async () => ({}) };
  const ref = `refs/heads/tron/${block}`;
  const refsDir = join(common, 'refs', 'heads', 'tron');
  const logsDir = join(common, 'logs', 'refs', 'heads', 'tron');
  // Mount points must exist: bwrap cannot create them inside the read-only tree.
  for (const dir of [refsDir, logsDir]) mkdirSync(dir, { recursive: true });
  const worktreeConfig = join(admin, 'config.worktree');
  if (!existsSync(worktreeConfig)) writeFileSync(worktreeConfig, '');

  const before = readRef(common, ref);
  const scratch = mkdtempSync(join(scratchRoot(), `tron-branch-${process.pid}-`));
  const refs = join(scratch, 'refs');
  const logs = join(scratch, 'logs');
  mkdirSync(refs);
  mkdirSync(logs);
  if (isFile(join(refsDir, block))) copyFileSync(join(refsDir, block), join(refs, block));
  if (isFile(join(logsDir, block))) copyFileSync(join(logsDir, block), join(logs, block));
  // HEAD's reflog, private too: what it records of the turn (amended commits, a rebase's steps)
  // stays in the private store, and a reflog naming missing objects is damage to `git fsck`.
  const headLogs = join(scratch, 'head-logs');
  mkdirSync(headLogs);
  mkdirSync(join(admin, 'logs'), { recursive: true });
  if (isFile(join(admin, 'logs', 'HEAD'))) copyFileSync(join(admin, 'logs', 'HEAD'), join(headLogs, 'HEAD'));

  // The repository's objects read-only; the builder writes its own store (private-store.ts).
  const store = privateStore(common);
  const mounts: Mount[] = [
    { kind: 'rw', src: admin, dest: admin },
    ...store.mounts,
    { kind: 'rw', src: refs, dest: refsDir },
    { kind: 'rw', src: logs, dest: logsDir },
    { kind: 'rw', src: headLogs, dest: join(admin, 'logs') },
    { kind: 'ro', src: worktreeConfig, dest: worktreeConfig },
  ];
  for (const file of ['commondir', 'gitdir']) {
    if (isFile(join(admin, file))) mounts.push({ kind: 'ro', src: join(admin, file), dest: join(admin, file) });
  }

  const leave = async (): Promise<LeaveReport> => {
    try {
      const file = join(refs, block);
      const written = existsSync(file) || isSymlink(file); // not written: the branch did not move
      // The worker made these files: read regular files of a ref's size, nothing else (never follow a link, never block on a FIFO).
      const after = written ? smallSha(file) : before;
      // What the branch, a detached HEAD, the worktree's own refs (refs/bisect/…) and the index
      // reach comes in from the private store; the rest goes with it.
      const tips = [after, smallSha(join(admin, 'HEAD')), ...worktreeRefs(join(admin, 'refs'))].filter(
        (sha, i, all): sha is string => sha !== undefined && sha !== before && all.indexOf(sha) === i,
      );
      const imported = await importObjects(repo, {
        store: store.dir,
        shared: store.shared,
        worktree: cwd,
        tips,
        known: before ? [before] : [],
        index: true,
      });
      if (!written) return {};
      if (!after) return { problem: `the worker left ${ref} as something other than a commit id; the branch was not moved` };
      if (after === before) return {};
      if (!imported.ok) return { problem: `${imported.problem}; ${ref} was not moved` };
      const moved = await runGit(repo, ['update-ref', '-m', 'tron: commits of the sandboxed builder', ref, after, before ?? '']);
      if (moved.exitCode !== 0) return { problem: `could not move ${ref} to ${after}: ${moved.stderr.trim()}` };
      return { moved: { ...(before ? { from: before } : {}), to: after } };
    } finally {
      rmSync(scratch, { recursive: true, force: true });
      store.remove();
    }
  };
  return { mounts, leave };
}

let sanitizer: ConfigSanitizer | undefined;

/** The one maker of sanitized git config copies (sandbox-git-config.ts); its folder goes when the engine exits. */
function configSanitizer(): ConfigSanitizer {
  if (!sanitizer) {
    const made = new ConfigSanitizer(scratchRoot());
    process.once('exit', () => made.remove());
    sanitizer = made;
  }
  return sanitizer;
}

/** The config files of the repositories a process sees (its cwd's, the builder's, the visible ones'), which may hold a remote's URL with its password. */
function repositoryConfigs(c: Confinement): string[] {
  const places = [c.cwd, c.ownBranch?.repo, ...(c.visible ?? [])].filter((p): p is string => p !== undefined);
  const dirs = places.filter((p) => existsSync(join(p, '.git'))).map(commonGitDir);
  return [...new Set(dirs.filter((d): d is string => d !== undefined).map((d) => join(d, 'config')))];
}

/**
 * A sandbox by the `bwrap` program at `program` (which must have passed `probeBwrap`).
 * `hidden` folders (tron's own state, where the repository's key is; the credential
 * cache's socket folder) show empty inside, and `hidden` files (the user's git
 * credentials, `.netrc`, `.pgpass`, the ssh agent's socket) read as empty, whatever else
 * is writable or visible. `gitConfigs` (the user's global and system git config) and the
 * config of every repository the process sees are shown without what reaches a
 * credential (sandbox-git-config.ts).
 */
export function bwrapSandbox(program: string, hidden: readonly string[] = [], gitConfigs: readonly string[] = []): Sandbox {
  return {
    kind: 'bwrap',
    async enter(argv, c) {
      const cwd = real(c.cwd);
      const mounts: Mount[] = [];
      // The private /tmp hides whatever lives under /tmp (test repositories do): show it again, read-only.
      const shown = new Set((c.visible ?? []).map(real));
      if (!c.writableCwd) shown.add(cwd);
      for (const path of shown) {
        if (isInside(path, '/tmp') && existsSync(path)) mounts.push({ kind: 'ro', src: path, dest: path });
      }
      if (c.writableCwd) {
        mounts.push({ kind: 'rw', src: cwd, dest: cwd });
        // A worktree's `.git` file says where its git data is, for the engine's git calls too.
        if (isFile(join(cwd, '.git'))) mounts.push({ kind: 'ro', src: join(cwd, '.git'), dest: join(cwd, '.git') });
      }
      for (const path of c.writable ?? []) mounts.push({ kind: 'rw-try', src: real(path), dest: real(path) });
      let leave = async (): Promise<LeaveReport> => ({});
      if (c.ownBranch && c.writableCwd) {
        const own = ownBranch(real(c.ownBranch.repo), c.ownBranch.block, cwd);
        mounts.push(...own.mounts);
        leave = own.leave;
      }
      for (const path of hidden) {
        if (isDir(path)) mounts.push({ kind: 'hide', src: path, dest: real(path) });
        // A file (a credential store, the ssh agent's socket) reads as empty: /dev/null over it.
        else if (existsSync(path)) mounts.push({ kind: 'hide-file', src: '/dev/null', dest: real(path) });
      }
      // A copy over each git config file that carries a credential (a token in a URL, a helper).
      for (const copy of await configSanitizer().copiesFor([...gitConfigs, ...repositoryConfigs(c)]))
        if (!hidden.some((h) => isInside(copy.dest, real(h)))) mounts.push({ kind: 'hide-file', src: copy.src, dest: copy.dest });
      const args = bwrapArgs({ cwd, network: c.network, mounts, ...(c.inCallersSession ? { inCallersSession: true } : {}) });
      return { argv: [program, ...args, '--', ...argv], leave };
    },
  };
}
