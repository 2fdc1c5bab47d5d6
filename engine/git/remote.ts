/**
 * The engine's calls to a remote (`[remote]` in config; DESIGN §3 "A remote"): fetch the
 * remote's trunk, read its trunk and `refs/tron/landed/*`, and land a stack as ONE
 * `git push --atomic` that moves the remote's trunk by compare-and-swap
 * (`--force-with-lease=refs/heads/<trunk>:<expected>`) and creates every block's landed
 * ref (lease `:` — must not exist yet) in the same push. No other ref is ever forced.
 *
 * ## What a remote call may use of the user's git (and what it may not)
 *
 * Engine git is hook-free and reads no HOME or system config (run.ts). A remote call
 * needs exactly three things of the user: the credential helper (`credential.*`), the ssh
 * agent (`SSH_AUTH_SOCK`) and URL rewriting (`url.*.insteadOf`, `url.*.pushInsteadOf`).
 * `remoteAccess` reads just those keys from the user's global and system config — with
 * `git config --get-regexp`, nothing else — and each call passes them by
 * `GIT_CONFIG_COUNT`, next to the SAFE_CONFIG switches.
 *
 * The repository's own config is not read at all by a remote call: a worker without a
 * sandbox can write it, and `remote.*.uploadpack`, `core.sshCommand`, `core.gitProxy`, a
 * planted `credential.helper` or `url.*.insteadOf` would each run a program with the
 * user's credentials or send them elsewhere. So every remote call runs git in a scratch
 * git directory (a temporary folder: HEAD, an empty config, the refs it is told) whose
 * object store is the repository's (`GIT_OBJECT_DIRECTORY`): what it fetches lands in the
 * repository's store, what it pushes is read from there, and nothing of the repository
 * but its objects is seen. The remote's URL is read once, when the run opens the remote
 * (`openRemote`), and given explicitly to every call. Transports are limited to file, git,
 * http(s) and ssh (`GIT_ALLOW_PROTOCOL`): never `ext::` or a remote helper.
 *
 * Every call has a timeout (the process group is killed) and its outcome is a value:
 * `moved` (a lease was refused: the remote is not as the stack expected — read it),
 * `transient` (unreachable, timed out, a server error: retry later) or `refused` (auth,
 * a protected branch, a declining pre-receive hook: it will not pass by itself). The
 * remote's own words (`remote: …` lines, the rejection reason) come back as `message`.
 */
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { GitStateError, SAFE_CONFIG, gitEnv, gitOut, isFullSha, runGit, type Sha } from './run.ts';
import { LANDED_PREFIX } from './refs.ts';
import { commonDir } from './worktree.ts';

/** The keys of the user's global and system config a remote call may use. */
export const ACCESS_KEYS = /^(credential\..+|url\..+\.(insteadof|pushinsteadof))$/i;

/** Variables of the engine's environment a remote call sees, beyond run.ts's base: the ssh agent. */
export const ACCESS_ENV = ['SSH_AUTH_SOCK'] as const;

/** Transports a remote call may use: never `ext::`, `fd::` or a remote helper. */
const PROTOCOLS = 'file:git:http:https:ssh';

/** What a remote call may use of the user's setup: config pairs and variables. */
export interface RemoteAccess {
  config: ReadonlyArray<readonly [string, string]>;
  env: Readonly<Record<string, string>>;
  /** The files the config pairs were read from (`~/.gitconfig`, what it includes): a start checks none changed in the last run. */
  origins?: readonly string[];
}

/** No credentials at all (tests, and a remote that needs none). */
export const NO_ACCESS: RemoteAccess = { config: [], env: {} };

/** A remote as a run uses it: its URLs (read once, at open), its trunk and the timeout of each call. */
export interface Remote {
  /** The remote's name in the user's config (`[remote] name`), for messages and `refs/remotes/<name>/`. */
  name: string;
  fetchUrl: string;
  pushUrl: string;
  trunk: string;
  /** Budget of one network call; past it the call is killed and counts as transient. */
  timeoutMs: number;
  access: RemoteAccess;
}

/**
 * The user's credential helper, ssh agent and URL rewrites, read from `env`'s HOME
 * (global config: `~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`) and the system config —
 * only the keys `ACCESS_KEYS` matches. A file that cannot be read gives nothing.
 */
export async function remoteAccess(env: Readonly<Record<string, string | undefined>> = process.env): Promise<RemoteAccess> {
  const base: Record<string, string> = { GIT_TERMINAL_PROMPT: '0' };
  // Where the user keeps global and system config is theirs to say, as git reads it.
  for (const name of ['PATH', 'HOME', 'XDG_CONFIG_HOME', 'GIT_CONFIG_GLOBAL', 'GIT_CONFIG_SYSTEM', 'GIT_CONFIG_NOSYSTEM'] as const)
    if (env[name] !== undefined) base[name] = env[name]!;
  const config: Array<[string, string]> = [];
  const origins = new Set<string>();
  // System first, then global: the order git itself reads them in (later wins, helpers add up).
  const noSystem = ['1', 'true', 'yes', 'on'].includes((env.GIT_CONFIG_NOSYSTEM ?? '').toLowerCase());
  for (const scope of noSystem ? ['--global'] : ['--system', '--global']) {
    const listed = await spawnPlain(
      tmpdir(),
      ['config', scope, '--includes', '--show-origin', '-z', '--get-regexp', ACCESS_KEYS.source],
      base,
      10_000,
    );
    if (listed.exitCode !== 0) continue;
    // With --show-origin, each entry comes after its origin: `file:<path>\0<key>\n<value>\0`.
    const parts = listed.stdout.split('\0');
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const origin = parts[i]!;
      const entry = parts[i + 1]!;
      const newline = entry.indexOf('\n');
      const key = newline < 0 ? entry : entry.slice(0, newline);
      if (key === '' || !ACCESS_KEYS.test(key)) continue;
      config.push([key, newline < 0 ? '' : entry.slice(newline + 1)]);
      if (origin.startsWith('file:/')) origins.add(origin.slice('file:'.length));
    }
  }
  const passed: Record<string, string> = {};
  for (const name of ACCESS_ENV) if (env[name] !== undefined && env[name] !== '') passed[name] = env[name]!;
  return { config, env: passed, origins: [...origins] };
}

/**
 * Opens `[remote] name` of `repo`: its fetch and push URLs, read now from the
 * repository's config (and not again during the run). A remote with no URL is the user's
 * to fix (exit 2).
 */
export async function openRemote(
  repo: string,
  opts: { name: string; trunk: string; timeoutMs: number; access?: RemoteAccess },
): Promise<Remote> {
  const url = await runGit(repo, ['config', '--get', `remote.${opts.name}.url`]);
  if (url.exitCode !== 0 || url.stdout.trim() === '') {
    throw new GitStateError(
      'TRON_REMOTE_UNKNOWN',
      '.tron/config.toml: remote.name',
      `is "${opts.name}", but the repository has no remote of that name with a URL; add it (\`git remote add ${opts.name} URL\`) or name another ([remote] name)`,
    );
  }
  const push = await runGit(repo, ['config', '--get', `remote.${opts.name}.pushurl`]);
  const fetchUrl = url.stdout.trim();
  return {
    name: opts.name,
    fetchUrl,
    pushUrl: push.exitCode === 0 && push.stdout.trim() !== '' ? push.stdout.trim() : fetchUrl,
    trunk: opts.trunk,
    timeoutMs: opts.timeoutMs,
    access: opts.access ?? NO_ACCESS,
  };
}

/** Why a remote call failed, and whether waiting helps. */
export interface RemoteFailure {
  ok: false;
  /** `transient`: try again later; `refused`: it will not pass by itself (page the operator). */
  kind: 'transient' | 'refused';
  reason: 'timeout' | 'unreachable' | 'auth' | 'protected' | 'hook' | 'rejected' | 'missing' | 'failed';
  /** The remote's own words (or git's, when the remote said nothing). */
  message: string;
}

/** A lease was refused: the remote's trunk, or a landed ref, is not what the push expected. */
export interface RemoteMoved {
  ok: false;
  kind: 'moved';
  /** Refs whose lease failed. */
  refs: string[];
  message: string;
}

export type FetchResult = { ok: true; sha: Sha | undefined } | RemoteFailure;

/** How every fetch from the remote runs: no tags, no FETCH_HEAD, no submodules, nothing said. */
const FETCH = ['fetch', '--no-tags', '--no-write-fetch-head', '--no-recurse-submodules', '--quiet'] as const;

/**
 * Fetches the remote's trunk into the repository's object store and records it as
 * `refs/remotes/<name>/<trunk>` (what `git fetch` would do; `tron status` compares with
 * it). `sha` is undefined when the remote has no trunk branch yet.
 */
export async function fetchTrunk(repo: string, remote: Remote): Promise<FetchResult> {
  const fetched = `refs/tron-fetched/${remote.trunk}`;
  const run = await networkGit(repo, remote, [...FETCH, remote.fetchUrl, `+refs/heads/${remote.trunk}:${fetched}`], {
    readRef: fetched,
    haves: true,
  });
  if (run.exitCode !== 0) {
    if (/couldn't find remote ref/i.test(run.stderr)) return { ok: true, sha: undefined };
    return classifyFailure(run);
  }
  const sha = run.ref;
  if (!isFullSha(sha)) return { ok: false, kind: 'transient', reason: 'failed', message: `git fetch wrote no ${fetched}` };
  await gitOut(repo, ['update-ref', '-m', `tron: fetch ${remote.name}`, `refs/remotes/${remote.name}/${remote.trunk}`, sha]);
  return { ok: true, sha };
}

/** What the remote holds of tron's: its trunk, the landed refs and the `tron/*` branches. */
export interface RemoteRefs {
  trunk: Sha | undefined;
  /** Block id → landed sha. */
  landed: Map<string, Sha>;
  /** Block id → sha of `refs/heads/tron/<id>`. */
  branches: Map<string, Sha>;
}

/** Reads the remote's trunk, `refs/tron/landed/*` and `refs/heads/tron/*` in one `ls-remote`. */
export async function readRemote(repo: string, remote: Remote): Promise<{ ok: true; refs: RemoteRefs } | RemoteFailure> {
  const trunkRef = `refs/heads/${remote.trunk}`;
  const run = await networkGit(repo, remote, ['ls-remote', remote.fetchUrl, trunkRef, `${LANDED_PREFIX}*`, 'refs/heads/tron/*'], {});
  if (run.exitCode !== 0) return classifyFailure(run);
  const refs: RemoteRefs = { trunk: undefined, landed: new Map(), branches: new Map() };
  for (const line of run.stdout.split('\n')) {
    const [sha, name] = line.split('\t');
    if (!isFullSha(sha) || name === undefined) continue;
    if (name === trunkRef) refs.trunk = sha;
    else if (name.startsWith(LANDED_PREFIX)) refs.landed.set(name.slice(LANDED_PREFIX.length), sha);
    else if (name.startsWith('refs/heads/tron/')) refs.branches.set(name.slice('refs/heads/tron/'.length), sha);
  }
  return { ok: true, refs };
}

/** A stack to land on the remote: trunk from `expectedOld` (undefined: the remote has no trunk yet) to `top`. */
export interface RemoteLanding {
  expectedOld: Sha | undefined;
  top: Sha;
  blocks: ReadonlyArray<{ id: string; sha: Sha }>;
}

export type PushResult = { ok: true } | RemoteMoved | RemoteFailure;

/**
 * Lands a stack on the remote in ONE atomic push: trunk from `expectedOld` to `top`
 * (lease), `refs/tron/landed/<id>` created for each block (lease: must not exist). Either
 * every ref moves or none does. Nothing local changes but the remote-tracking ref
 * (`refs/remotes/<name>/<trunk>`, as git push moves it): the caller moves local trunk
 * and the landed refs only after this returned ok.
 */
export async function pushLanding(repo: string, remote: Remote, landing: RemoteLanding): Promise<PushResult> {
  const trunkRef = `refs/heads/${remote.trunk}`;
  const leases = [`--force-with-lease=${trunkRef}:${landing.expectedOld ?? ''}`];
  const specs = [`${landing.top}:${trunkRef}`];
  for (const b of landing.blocks) {
    leases.push(`--force-with-lease=${LANDED_PREFIX}${b.id}:`);
    specs.push(`${b.sha}:${LANDED_PREFIX}${b.id}`);
  }
  const pushed = await push(repo, remote, ['--atomic', ...leases, remote.pushUrl, ...specs]);
  // As git push does: the remote-tracking ref says where the remote's trunk now is.
  if (pushed.ok)
    await gitOut(repo, ['update-ref', '-m', `tron: push to ${remote.name}`, `refs/remotes/${remote.name}/${remote.trunk}`, landing.top]);
  return pushed;
}

/**
 * Pushes block branches `tron/<id>` (`[remote] push_branches`), each by lease against
 * what the caller last saw there (`expected`: undefined = must not exist), so a branch
 * someone else moved is never overwritten.
 */
export async function pushBranches(
  repo: string,
  remote: Remote,
  branches: ReadonlyArray<{ id: string; sha: Sha; expected: Sha | undefined }>,
): Promise<PushResult> {
  if (branches.length === 0) return { ok: true };
  const leases = branches.map((b) => `--force-with-lease=refs/heads/tron/${b.id}:${b.expected ?? ''}`);
  const specs = branches.map((b) => `${b.sha}:refs/heads/tron/${b.id}`);
  return push(repo, remote, [...leases, remote.pushUrl, ...specs]);
}

/** Deletes remote `tron/<id>` branches, each only if it still points where the caller saw it (lease). */
export async function deleteRemoteBranches(
  repo: string,
  remote: Remote,
  branches: ReadonlyArray<{ id: string; expected: Sha }>,
): Promise<PushResult> {
  if (branches.length === 0) return { ok: true };
  const leases = branches.map((b) => `--force-with-lease=refs/heads/tron/${b.id}:${b.expected}`);
  const specs = branches.map((b) => `:refs/heads/tron/${b.id}`);
  return push(repo, remote, [...leases, remote.pushUrl, ...specs]);
}

async function push(repo: string, remote: Remote, args: readonly string[]): Promise<PushResult> {
  const run = await networkGit(repo, remote, ['push', '--porcelain', '--no-verify', '--no-follow-tags', '--no-signed', ...args], {});
  if (run.exitCode === 0 && !run.timedOut) return { ok: true };
  const lines = porcelainLines(run.stdout);
  const words = remoteWords(run.stderr);
  const rejected = lines.filter((l) => l.flag === '!');
  const remoteRejected = rejected.filter((l) => /\[remote rejected\]/.test(l.summary) && !/atomic/i.test(l.summary));
  if (remoteRejected.length > 0) {
    const reasons = remoteRejected.map((l) => `${l.ref}: ${l.summary}`).join('; ');
    const all = `${reasons}${words ? `\n${words}` : ''}`;
    // A ref the server could not lock is another push in flight: the next try sees the lease.
    if (/failed to lock|cannot lock ref|unable to lock|incorrect old value/i.test(reasons)) {
      return { ok: false, kind: 'transient', reason: 'rejected', message: all };
    }
    const reason = /protected/i.test(all) ? 'protected' : /hook declined/i.test(reasons) ? 'hook' : 'rejected';
    return { ok: false, kind: 'refused', reason, message: all };
  }
  const stale = rejected.filter((l) => /stale info|fetch first|non-fast-forward|already exists/.test(l.summary));
  if (stale.length > 0) {
    return { ok: false, kind: 'moved', refs: stale.map((l) => l.ref), message: stale.map((l) => `${l.ref}: ${l.summary}`).join('; ') };
  }
  return classifyFailure(run);
}

interface PorcelainLine {
  flag: string;
  ref: string;
  summary: string;
}

/** `git push --porcelain` lines: `<flag>\t<from>:<to>\t<summary>`. */
function porcelainLines(stdout: string): PorcelainLine[] {
  const out: PorcelainLine[] = [];
  for (const line of stdout.split('\n')) {
    const m = /^(.)\t([^\t]*):([^\t]+)\t(.*)$/.exec(line);
    if (m) out.push({ flag: m[1]!, ref: m[3]!, summary: m[4]! });
  }
  return out;
}

/** The lines the remote itself printed (`remote: …`), without the prefix. */
function remoteWords(stderr: string): string {
  return stderr
    .split(/\r?\n/)
    .filter((line) => line.startsWith('remote: '))
    .map((line) => line.slice('remote: '.length).trimEnd())
    .filter((line) => line !== '')
    .join('\n');
}

const AUTH =
  /authentication failed|could not read (username|password)|permission denied|returned error: 40[13]|terminal prompts disabled|access denied|invalid (username|credentials)|HTTP Basic/i;
const UNREACHABLE =
  /returned error: 5\d\d|could not resolve host|connection refused|connection timed out|timed out|unable to connect|could not connect|failed to connect|network is unreachable|no route to host|early EOF|hung up unexpectedly|connection reset|connection closed|RPC failed|empty reply|unable to access|the remote end hung up/i;
const MISSING =
  /repository .*not found|does not appear to be a git repository|not a git repository|no such repository|returned error: 404|not exported/i;

/** A failed call with no per-ref answer: what its output says, transient or refused. */
export function classifyFailure(run: { stderr: string; timedOut: boolean }): RemoteFailure {
  const words = remoteWords(run.stderr);
  const message = run.stderr.trim() || 'git exited without a message';
  if (run.timedOut)
    return { ok: false, kind: 'transient', reason: 'timeout', message: `no answer within the timeout${words ? `: ${words}` : ''}` };
  if (AUTH.test(run.stderr)) return { ok: false, kind: 'refused', reason: 'auth', message };
  if (MISSING.test(run.stderr)) return { ok: false, kind: 'refused', reason: 'missing', message };
  if (UNREACHABLE.test(run.stderr)) return { ok: false, kind: 'transient', reason: 'unreachable', message };
  return { ok: false, kind: 'refused', reason: 'failed', message };
}

interface NetworkRun {
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** The value of `readRef` in the scratch git directory after the call. */
  ref?: string;
  /** The values of `readRefs`, in order ('' for one not written). */
  refs?: string[];
}

/**
 * Runs one network git call for `repo` in a scratch git directory that shares only the
 * repository's object store (see the file comment), with the user's access and a
 * timeout. `haves`: the repository's trunk and remote-tracking refs are listed in the
 * scratch directory, so a fetch sends only what is new.
 */
async function networkGit(
  repo: string,
  remote: Remote,
  args: readonly string[],
  opts: { readRef?: string; readRefs?: readonly string[]; haves?: boolean },
): Promise<NetworkRun> {
  const common = await commonDir(repo);
  // In the repository's own git dir, not the machine's temporary folder: an engine killed
  // mid-call leaves it where the repository's owner finds it, not in /tmp.
  const scratch = await mkdtemp(join(common, 'tron-remote-'));
  try {
    await mkdir(join(scratch, 'refs'));
    await writeFile(join(scratch, 'HEAD'), 'ref: refs/heads/tron-scratch\n');
    await writeFile(join(scratch, 'config'), '');
    // A shallow repository stays shallow to git here too.
    await copyFile(join(common, 'shallow'), join(scratch, 'shallow')).catch(() => undefined);
    if (opts.haves) {
      const listed = await runGit(repo, [
        'for-each-ref',
        '--format=%(objectname)',
        `refs/heads/${remote.trunk}`,
        `refs/remotes/${remote.name}/`,
      ]);
      const shas = [...new Set(listed.stdout.split('\n').filter(isFullSha))];
      await writeFile(join(scratch, 'packed-refs'), shas.map((sha, i) => `${sha} refs/tron-have/${i}\n`).join(''));
    }
    const env: Record<string, string> = {
      ...gitEnv(process.env),
      ...remote.access.env,
      GIT_DIR: scratch,
      GIT_OBJECT_DIRECTORY: join(common, 'objects'),
      GIT_ALLOW_PROTOCOL: PROTOCOLS,
      // No proxy program, whatever core.gitProxy says.
      GIT_PROXY_COMMAND: '',
    };
    delete env.GIT_NO_LAZY_FETCH;
    const pairs = [
      ...remote.access.config,
      ['maintenance.auto', 'false'],
      ['fetch.writeCommitGraph', 'false'],
      ['core.askPass', ''],
    ] as const;
    env.GIT_CONFIG_COUNT = String(pairs.length);
    pairs.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
    const run = await spawnPlain(scratch, [...SAFE_CONFIG.flatMap((pair) => ['-c', pair]), ...args], env, remote.timeoutMs);
    if (opts.readRef !== undefined) {
      const ref = await readFile(join(scratch, opts.readRef), 'utf8').catch(() => '');
      return { ...run, ref: ref.trim() };
    }
    if (opts.readRefs !== undefined) {
      const refs = await Promise.all(opts.readRefs.map((r) => readFile(join(scratch, r), 'utf8').catch(() => '')));
      return { ...run, refs: refs.map((r) => r.trim()) };
    }
    return run;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Spawns git in its own process group (no terminal: ssh cannot prompt) and kills the
 * whole group — ssh, the http helper — when `timeoutMs` passes.
 */
function spawnPlain(cwd: string, args: readonly string[], env: Record<string, string>, timeoutMs: number): Promise<NetworkRun> {
  return new Promise((resolvePromise) => {
    const child = spawn('git', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', (error) => {
      clearTimeout(timer);
      resolvePromise({ exitCode: -1, stdout: '', stderr: `could not run git: ${error.message}`, timedOut: false });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({
        exitCode: code ?? -1,
        stdout: Buffer.concat(out)
          .toString('utf8')
          .replace(/\r?\n$/, ''),
        stderr: Buffer.concat(err)
          .toString('utf8')
          .replace(/\r?\n$/, ''),
        timedOut,
      });
    });
  });
}

/** The coded problem a failure that will not pass by itself (or outlasted its retries) pages the operator with. */
export function remoteProblemCode(
  failure: RemoteFailure,
): 'TRON_REMOTE_AUTH' | 'TRON_REMOTE_REJECTED' | 'TRON_REMOTE_UNREACHABLE' | 'TRON_REMOTE_MISSING' {
  switch (failure.reason) {
    case 'auth':
      return 'TRON_REMOTE_AUTH';
    case 'missing':
      return 'TRON_REMOTE_MISSING';
    case 'timeout':
    case 'unreachable':
      return 'TRON_REMOTE_UNREACHABLE';
    default:
      return failure.kind === 'transient' ? 'TRON_REMOTE_UNREACHABLE' : 'TRON_REMOTE_REJECTED';
  }
}

/** The page's text for a failure: the code, the remote and what it said, verbatim. */
export function describeRemoteFailure(remote: Remote, what: string, failure: RemoteFailure): string {
  return `${remoteProblemCode(failure)}: ${what} on ${remote.name} (${remote.pushUrl}) failed (${failure.reason}); the remote said:\n${failure.message}`;
}

/**
 * Where the user's credentials live, for the sandbox to hide from every worker and test:
 * every place git, ssh, curl and libpq (and the forge and registry clients a worker could
 * run) take a password, a token or a key from on their own —
 *
 * - git: the `store` helper's files (`~/.git-credentials`, `$XDG_CONFIG_HOME/git/credentials`,
 *   any `--file` a helper names), the `cache` helper's socket folders
 *   (`$XDG_CACHE_HOME/git/credential`, `~/.git-credential-cache`, any `--socket`),
 *   the askpass programs (`GIT_ASKPASS`, `SSH_ASKPASS`, a user's script holds a token);
 * - ssh: `~/.ssh` and the agent's socket;
 * - curl (and git over http): `~/.netrc`, `~/_netrc`, `$NETRC`;
 * - libpq: `~/.pgpass`, `$PGPASSFILE`, `~/.pg_service.conf`, `$PGSERVICEFILE`,
 *   `$PGSYSCONFDIR/pg_service.conf`;
 * - `~/.docker/config.json` (`$DOCKER_CONFIG`), the GitHub CLI's `hosts.yml`, and the cloud
 *   CLIs' folders (`~/.aws`, `~/.kube`, `~/.config/gcloud`).
 *
 * What git config files carry (`url.*.insteadOf` with a token, a remote URL with a
 * password) is taken out of the copies the sandbox shows of them (sandbox-git-config.ts).
 * Paths that do not exist are left out by the sandbox.
 */
export function credentialPaths(env: Readonly<Record<string, string | undefined>>, access: RemoteAccess = NO_ACCESS): string[] {
  const paths: string[] = [];
  const absolute = (value: string | undefined) => (value?.startsWith('/') ? value : undefined);
  const home = absolute(env.HOME);
  if (home)
    paths.push(
      join(home, '.git-credentials'),
      join(home, '.ssh'),
      join(home, '.git-credential-cache'),
      join(home, '.netrc'),
      join(home, '_netrc'),
      join(home, '.pgpass'),
      join(home, '.pg_service.conf'),
    );
  const xdg = absolute(env.XDG_CONFIG_HOME) ?? (home && join(home, '.config'));
  if (xdg) paths.push(join(xdg, 'git', 'credentials'), join(absolute(env.GH_CONFIG_DIR) ?? join(xdg, 'gh'), 'hosts.yml'));
  const cache = absolute(env.XDG_CACHE_HOME) ?? (home && join(home, '.cache'));
  if (cache) paths.push(join(cache, 'git', 'credential'));
  const docker = absolute(env.DOCKER_CONFIG) ?? (home && join(home, '.docker'));
  if (docker) paths.push(join(docker, 'config.json'));
  // The cloud CLIs' keys (a gcloud credential helper for git keeps its tokens there too).
  if (home) paths.push(join(home, '.aws'), join(home, '.kube'));
  if (xdg) paths.push(join(xdg, 'gcloud'));
  const pgSysconf = absolute(env.PGSYSCONFDIR);
  if (pgSysconf) paths.push(join(pgSysconf, 'pg_service.conf'));
  for (const name of ['SSH_AUTH_SOCK', 'NETRC', 'PGPASSFILE', 'PGSERVICEFILE', 'GIT_ASKPASS', 'SSH_ASKPASS'] as const) {
    const path = absolute(env[name]);
    if (path) paths.push(path);
  }
  const inHome = (file: string) => (file.startsWith('~/') && home ? join(home, file.slice(2)) : file);
  for (const [key, value] of access.config) {
    if (!/^credential\.(.+\.)?helper$/i.test(key)) continue;
    const file = /--file[= ](\S+)/.exec(value)?.[1];
    if (file) paths.push(inHome(file));
    // The cache daemon's socket: its folder, which the daemon makes (and remakes) when it starts.
    const socket = /--socket[= ](\S+)/.exec(value)?.[1];
    if (socket) paths.push(dirname(inHome(socket)));
  }
  return [...new Set(paths)];
}

/** A URL without the user and password it may carry (`https://user:token@host/…`): for logs and pages. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1');
}

/** How far `repo`'s checkout (HEAD) is from the remote's trunk as last fetched: commits only it has, and commits only the remote has. */
export async function distanceFromRemote(
  repo: string,
  name: string,
  trunk: string,
): Promise<{ head: Sha; remoteSha: Sha; ahead: number; behind: number } | undefined> {
  const tracked = `refs/remotes/${name}/${trunk}`;
  const shas = await runGit(repo, ['rev-parse', 'HEAD', tracked]);
  const [head, remoteSha] = shas.stdout.split('\n');
  if (shas.exitCode !== 0 || !isFullSha(head) || !isFullSha(remoteSha)) return undefined;
  const counts = await gitOut(repo, ['rev-list', '--left-right', '--count', `${head}...${remoteSha}`]);
  const [ahead, behind] = counts.split(/\s+/).map(Number);
  return { head, remoteSha, ahead: ahead ?? 0, behind: behind ?? 0 };
}

/**
 * Fetches one ref of the remote into the repository's store, recorded as `into` (tron agents
 * and their engine: docs/cluster.md). `sha` is undefined when the remote has no such ref.
 * `alsoObjectsOf`: ref patterns (`refs/tron/work/*`) whose commits come along in the same
 * round trip, into the store only — no ref of the repository records them, so nothing here
 * waits on or overwrites another job's refs; a later job finds those commits already here.
 */
export async function fetchRef(
  repo: string,
  remote: Remote,
  ref: string,
  into: string,
  alsoObjectsOf: readonly string[] = [],
): Promise<FetchResult> {
  // Their refs are written in the call's scratch git directory only, and go with it.
  const also = alsoObjectsOf.map((pattern, i) => `+${pattern}:refs/tron-also/${i}/${pattern.endsWith('*') ? '*' : 'ref'}`);
  const run = await networkGit(repo, remote, [...FETCH, remote.fetchUrl, `+${ref}:${into}`, ...also], { readRef: into, haves: true });
  if (run.exitCode !== 0) {
    if (/couldn't find remote ref/i.test(run.stderr)) return { ok: true, sha: undefined };
    return classifyFailure(run);
  }
  if (!isFullSha(run.ref)) return { ok: false, kind: 'transient', reason: 'failed', message: `git fetch wrote no ${into}` };
  await gitOut(repo, ['update-ref', '-m', `tron: fetch ${remote.name}`, into, run.ref]);
  return { ok: true, sha: run.ref };
}

/**
 * A turn's fetch on a tron agent, in one round trip: the remote's trunk (recorded as
 * fetchTrunk records it) and every ref under `workPrefix` (`refs/tron/work/`), whose
 * commits come into the store and whose `block`'s ref is recorded as `into` (fetchRef's
 * result: undefined when the remote has none). Two fetches' worth in one `git fetch` and
 * one upload-pack on the remote's host. A remote without trunk fails the one fetch: then
 * each is fetched alone, and trunk's says so.
 */
export async function fetchTrunkAndWork(
  repo: string,
  remote: Remote,
  work: { prefix: string; block: string; into: string },
): Promise<{ trunk: FetchResult; work: FetchResult }> {
  const fetchedTrunk = `refs/tron-fetched/${remote.trunk}`;
  const fetchedWork = `refs/tron-also/work/${work.block}`;
  const run = await networkGit(
    repo,
    remote,
    [...FETCH, remote.fetchUrl, `+refs/heads/${remote.trunk}:${fetchedTrunk}`, `+${work.prefix}*:refs/tron-also/work/*`],
    { readRefs: [fetchedTrunk, fetchedWork], haves: true },
  );
  if (run.exitCode !== 0) {
    if (/couldn't find remote ref/i.test(run.stderr))
      return {
        trunk: await fetchTrunk(repo, remote),
        work: await fetchRef(repo, remote, `${work.prefix}${work.block}`, work.into, [`${work.prefix}*`]),
      };
    const failed = classifyFailure(run);
    return { trunk: failed, work: failed };
  }
  const [trunkSha, workSha] = run.refs ?? [];
  if (!isFullSha(trunkSha)) {
    const failed: FetchResult = { ok: false, kind: 'transient', reason: 'failed', message: `git fetch wrote no ${fetchedTrunk}` };
    return { trunk: failed, work: failed };
  }
  const moves = [`update refs/remotes/${remote.name}/${remote.trunk} ${trunkSha}`];
  if (isFullSha(workSha)) moves.push(`update ${work.into} ${workSha}`);
  await gitOut(repo, ['update-ref', '-m', `tron: fetch ${remote.name}`, '--stdin'], `${moves.join('\n')}\n`);
  return { trunk: { ok: true, sha: trunkSha }, work: { ok: true, sha: isFullSha(workSha) ? workSha : undefined } };
}

/**
 * Deletes the remote's `refs` wherever they point, in one push; a ref that is not there is
 * no failure (git's receive-pack only warns) — though a server that refuses to delete a ref
 * it lacks fails the whole push, and one ref at a time then says which.
 */
export async function deleteRemoteRef(repo: string, remote: Remote, ...refs: [string, ...string[]]): Promise<PushResult> {
  const gone = await push(repo, remote, [remote.pushUrl, ...refs.map((ref) => `:${ref}`)]);
  if (!gone.ok && /remote ref does not exist/i.test(gone.message)) {
    if (refs.length === 1) return { ok: true };
    for (const ref of refs) {
      const one = await deleteRemoteRef(repo, remote, ref);
      if (!one.ok) return one;
    }
    return { ok: true };
  }
  return gone;
}

/**
 * Fetches several refs of the remote in one round trip, each `[ref, into]` as fetchRef
 * fetches one. All or none: a ref the remote lacks fails the call (`missing`), and the
 * caller may fetch each alone.
 */
export async function fetchRefs(
  repo: string,
  remote: Remote,
  pairs: ReadonlyArray<readonly [string, string]>,
): Promise<{ ok: true; shas: Sha[] } | RemoteFailure> {
  const run = await networkGit(repo, remote, [...FETCH, remote.fetchUrl, ...pairs.map(([ref, into]) => `+${ref}:${into}`)], {
    readRefs: pairs.map(([, into]) => into),
    haves: true,
  });
  if (run.exitCode !== 0) {
    if (/couldn't find remote ref/i.test(run.stderr))
      return { ok: false, kind: 'transient', reason: 'missing', message: run.stderr.trim() };
    return classifyFailure(run);
  }
  const shas = run.refs ?? [];
  if (shas.length !== pairs.length || !shas.every(isFullSha))
    return { ok: false, kind: 'transient', reason: 'failed', message: 'git fetch wrote not every ref asked for' };
  const script = pairs.map(([, into], i) => `update ${into} ${shas[i]}`).join('\n');
  await gitOut(repo, ['update-ref', '-m', `tron: fetch ${remote.name}`, '--stdin'], `${script}\n`);
  return { ok: true, shas };
}

/** Pushes `sha` to the remote's `ref`, by lease against `expected` (undefined: the ref must not exist). */
export function pushRef(repo: string, remote: Remote, ref: string, sha: Sha, expected: Sha | undefined): Promise<PushResult> {
  return push(repo, remote, [`--force-with-lease=${ref}:${expected ?? ''}`, remote.pushUrl, `${sha}:${ref}`]);
}

/** The remote's refs matching `patterns` (`ls-remote`), name → sha. */
export async function listRemoteRefs(
  repo: string,
  remote: Remote,
  patterns: readonly string[],
): Promise<{ ok: true; refs: Map<string, Sha> } | RemoteFailure> {
  const run = await networkGit(repo, remote, ['ls-remote', remote.fetchUrl, ...patterns], {});
  if (run.exitCode !== 0) return classifyFailure(run);
  const refs = new Map<string, Sha>();
  for (const line of run.stdout.split('\n')) {
    const [sha, name] = line.split('\t');
    if (isFullSha(sha) && name !== undefined) refs.set(name, sha);
  }
  return { ok: true, refs };
}

/** Deletes remote refs, each only if it still points where the caller saw it (lease). */
export function deleteRemoteRefs(repo: string, remote: Remote, refs: ReadonlyArray<{ ref: string; expected: Sha }>): Promise<PushResult> {
  if (refs.length === 0) return Promise.resolve({ ok: true });
  return push(repo, remote, [
    ...refs.map((r) => `--force-with-lease=${r.ref}:${r.expected}`),
    remote.pushUrl,
    ...refs.map((r) => `:${r.ref}`),
  ]);
}
