/**
 * Landing: trunk is fast-forwarded to a verified head and `refs/tron/landed/<id>` is
 * created (for every block of a stack, each at its own commit) in ONE ref transaction
 * with compare-and-swap, so git itself records what landed and no block lands twice. Afterwards the user's checkout of trunk, if any, is
 * moved with it (see the consistency rule in index.ts), without running the user's hooks.
 */
import { realpath } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import type { Problem } from '../core/errors.ts';
import { GitFailure, commandFailed, gitIn, gitOut, runGit, type Sha } from './run.ts';
import { branchOfHead, currentTrunkSha, isAncestor, revParse, statusOf } from './query.ts';
import { knownLine } from './known.ts';
import { LANDED_PREFIX } from './refs.ts';
import { lookUpObject } from './resolver.ts';
import { checkLanding } from './store.ts';
import { WORKTREES_DIR, commonDir, removeStaleLocks } from './worktree.ts';

/** What happened to the user's checkout of trunk after a landing. */
export type CheckoutSync =
  | { state: 'updated'; path: string }
  | { state: 'not-checked-out' }
  | { state: 'failed'; path: string; message: string };

export type LandResult = { ok: true; checkout: CheckoutSync } | { ok: false; actual: Sha; reason: 'trunk-moved' | 'already-landed' };

/**
 * Fast-forwards trunk from `expectedOld` to `sha` and records `refs/tron/landed/<id>`,
 * atomically: one block, as `landStack` lands several.
 */
export async function land(repo: string, opts: { trunk: string; expectedOld: string; sha: string; id: string }): Promise<LandResult> {
  return landStack(repo, { trunk: opts.trunk, expectedOld: opts.expectedOld, top: opts.sha, blocks: [{ id: opts.id, sha: opts.sha }] });
}

/**
 * Lands a stack in ONE ref transaction: trunk from `expectedOld` to `top` (compare-and-swap),
 * `refs/tron/landed/<id>` created at each block's own commit, and each block's branch
 * `tron/<id>`, where it exists, moved to that commit (compare-and-swap against the value
 * read just before), so wrapping finds the branch on trunk. If trunk is not at
 * `expectedOld` or a landed ref already exists, nothing changes and the actual trunk sha
 * comes back. A `top` that does not descend from `expectedOld`, or a block commit that
 * is not in between, is refused outright: trunk's first-parent history stays linear.
 */
export async function landStack(repo: string, opts: StackLanding): Promise<LandResult> {
  const moved = await moveRefs(repo, opts);
  if (!moved.ok) return moved;
  return { ok: true, checkout: await syncCheckout(repo, opts.trunk, opts.expectedOld, opts.top, opts.serialWorktrees) };
}

export interface StackLanding {
  trunk: string;
  expectedOld: string;
  top: string;
  blocks: ReadonlyArray<{ id: string; sha: string }>;
  /** The caller's queue for worktree administration, should finding the user's checkout need the list of worktrees. */
  serialWorktrees?: Serial;
}

/**
 * `landStack`'s ref transaction alone: the stack has landed when it returns ok. The
 * caller then moves the user's checkout (`followTrunk`) before anything reads it.
 */
export async function moveRefs(repo: string, opts: StackLanding): Promise<{ ok: true } | Extract<LandResult, { ok: false }>> {
  const trunkRef = `refs/heads/${opts.trunk}`;
  const ids = opts.blocks.map((b) => b.id).join(', ');
  const refused = async (): Promise<Extract<LandResult, { ok: false }> | undefined> => {
    const actual = await currentTrunkSha(repo, opts.trunk);
    if (actual !== opts.expectedOld) return { ok: false, actual, reason: 'trunk-moved' };
    for (const b of opts.blocks) {
      if ((await revParse(repo, `${LANDED_PREFIX}${b.id}`)) !== undefined) return { ok: false, actual, reason: 'already-landed' };
    }
    return undefined;
  };
  // One walk answers for every block: each commit must lie on the way from trunk to the top.
  // Beside it, what the landing puts on trunk must all be there (store.ts): damage stops the run.
  const [walked, checked] = await Promise.allSettled([
    between(repo, opts.expectedOld, opts.top),
    checkLanding(repo, opts.trunk, opts.expectedOld, opts.top),
  ]);
  if (checked.status === 'rejected') throw checked.reason;
  if (walked.status === 'rejected') throw walked.reason;
  const onTheWay = walked.value;
  for (const sha of [opts.top, ...opts.blocks.map((b) => b.sha)]) {
    if (onTheWay.has(sha)) continue;
    const result = await refused();
    if (result) return result;
    throw new GitFailure(
      'TRON_LAND_NOT_FAST_FORWARD',
      `refusing to land ${ids}: ${sha} is not between trunk ${opts.expectedOld} and the top of the stack ${opts.top}`,
    );
  }
  const lines = ['start', `update ${trunkRef} ${opts.top} ${opts.expectedOld}`];
  for (const b of opts.blocks) lines.push(`create ${LANDED_PREFIX}${b.id} ${b.sha}`);
  const branches = await branchHeads(
    repo,
    opts.blocks.map((b) => b.id),
  );
  for (const b of opts.blocks) {
    const now = branches.get(b.id);
    if (now !== undefined) lines.push(`update refs/heads/tron/${b.id} ${b.sha} ${now}`);
  }
  const script = [...lines, 'prepare', 'commit', ''].join('\n');
  const args = ['update-ref', '-m', `tron: land ${ids}`, '--stdin'];
  const result = await runGit(repo, args, script);
  if (result.exitCode !== 0) {
    const refusal = await refused();
    if (refusal) return refusal;
    throw commandFailed(repo, args, result);
  }
  return { ok: true };
}

/**
 * Brings this clone up to the landings the remote holds (engine/runtime/remote-recovery.ts,
 * `followRemote`, which has checked that `to` descends from `from` and holds each landed
 * sha), in one ref transaction: trunk from `from` to `to` (the same sha: unchanged) and each
 * of `landed` created as `refs/tron/landed/<id>` — then your checkout of trunk follows.
 * False, with nothing moved, when trunk is no longer at `from` or a landed ref was made
 * meanwhile.
 */
export async function followLandings(
  repo: string,
  opts: { trunk: string; from: Sha; to: Sha; landed: ReadonlyArray<{ id: string; sha: Sha }> },
): Promise<{ moved: boolean; checkout?: CheckoutSync }> {
  const lines = ['start', `update refs/heads/${opts.trunk} ${opts.to} ${opts.from}`];
  for (const b of opts.landed) lines.push(`create ${LANDED_PREFIX}${b.id} ${b.sha}`);
  const result = await runGit(
    repo,
    ['update-ref', '-m', 'tron: follow the remote', '--stdin'],
    [...lines, 'prepare', 'commit', ''].join('\n'),
  );
  if (result.exitCode !== 0) return { moved: false };
  if (opts.from === opts.to) return { moved: true };
  return { moved: true, checkout: await syncCheckout(repo, opts.trunk, opts.from, opts.to) };
}

/** After `moveRefs`: the user's checkout of trunk, if any, moved from `old` to `now` (see syncCheckout). */
export function followTrunk(repo: string, trunk: string, old: Sha, now: Sha, serial?: Serial): Promise<CheckoutSync> {
  return syncCheckout(repo, trunk, old, now, serial);
}

/**
 * The commits on the way from `old` to `top` (`old..top`), or none when `old` is not an
 * ancestor of `top`. A stack is a line of commits: following first parents from the top
 * to `old` shows the ancestry without asking git again; otherwise git is asked.
 */
async function between(repo: string, old: Sha, top: Sha): Promise<Set<Sha>> {
  // The line the lane's replay wrote, or a block's own commits on trunk, as git told them before (known.ts).
  const line = knownLine(repo, old, top);
  if (line !== undefined) return line;
  const parents = new Map<Sha, Sha | undefined>();
  for (const line of (await gitOut(repo, ['rev-list', '--parents', `${old}..${top}`])).split('\n')) {
    const [sha, first] = line.split(' ');
    if (sha) parents.set(sha, first);
  }
  let at: Sha | undefined = top;
  while (at !== undefined && parents.has(at)) at = parents.get(at);
  return at === old || (await isAncestor(repo, old, top)) ? new Set(parents.keys()) : new Set();
}

/**
 * Where the `tron/<id>` branch of each of `ids` points, as the ref holds it (unpeeled):
 * asked of the repository's long-lived resolver, and of one `for-each-ref` when it cannot
 * say for every one — a branch that is not there, or not pointing at an object that is
 * (a landing's ref transaction checks each value again: compare-and-swap).
 */
async function branchHeads(repo: string, ids: readonly string[]): Promise<Map<string, Sha>> {
  const found = new Map<string, Sha>();
  const heads = await Promise.all(ids.map((id) => lookUpObject(repo, `refs/heads/tron/${id}`)));
  ids.forEach((id, i) => {
    const head = heads[i];
    if (typeof head === 'object') found.set(id, head.sha);
  });
  if (found.size === ids.length) return found;
  found.clear();
  const out = await gitOut(repo, ['for-each-ref', '--format=%(objectname) %(refname)', 'refs/heads/tron/']);
  for (const line of out.split('\n').filter(Boolean)) {
    const id = line.slice(line.indexOf(' ') + 1).slice('refs/heads/tron/'.length);
    if (ids.includes(id)) found.set(id, line.slice(0, line.indexOf(' ')));
  }
  return found;
}

/**
 * Moves the user's checkout of trunk from `old` to `now` (index and files), keeping
 * any local change to a file the landing did not touch. A conflicting local change
 * makes git refuse without touching anything; that comes back as `failed` with the fix.
 */
async function syncCheckout(repo: string, trunk: string, old: Sha, now: Sha, serial?: Serial): Promise<CheckoutSync> {
  const path = await trunkCheckoutPath(repo, trunk, serial);
  if (path === undefined) return { state: 'not-checked-out' };
  const git = await gitIn(path);
  // Refresh stat data first, as `git checkout` does, so touched-but-equal files are not "not uptodate".
  await git(['update-index', '-q', '--refresh']);
  const args = ['read-tree', '-m', '-u', old, now];
  const result = await git(args);
  if (result.exitCode === 0) return { state: 'updated', path };
  return {
    state: 'failed',
    path,
    message:
      `trunk moved to ${now} but your checkout at ${path} could not follow: ${result.stderr.trim()}; ` +
      `move the conflicting changes aside, then run \`git read-tree -m -u ${old} ${now}\` there`,
  };
}

/** The user's checkout of trunk: what the start-up check looks at. */
export interface MainCheckout {
  /** Some working tree of the user (normally the main one) has trunk checked out. */
  onTrunk: boolean;
  /** That working tree (or the main one, when none is on trunk) has uncommitted changes to tracked files. */
  dirty: boolean;
  /** The porcelain listing of those changes, for the message. */
  status: string;
  /** The working tree examined. */
  path: string;
}

/** Looks at the checkout a landing would move; untracked files do not count as dirty. */
export async function mainCheckout(repo: string, trunk: string, serial?: Serial): Promise<MainCheckout> {
  const onTrunkPath = await trunkCheckoutPath(repo, trunk, serial);
  const path = onTrunkPath ?? resolve(repo);
  const status = await statusOf(path, 'no');
  return { onTrunk: onTrunkPath !== undefined, dirty: status !== '', status, path };
}

/**
 * The start-up refusal, as a problem (exit 2): a checkout of trunk with uncommitted
 * tracked changes would be clobbered or block the next landing.
 */
export async function checkMainCheckout(repo: string, trunk: string): Promise<Problem | undefined> {
  const state = await mainCheckout(repo, trunk);
  if (!state.onTrunk || !state.dirty) return undefined;
  return {
    code: 'TRON_DIRTY_TRUNK_CHECKOUT',
    path: state.path,
    message:
      `the trunk branch "${trunk}" is checked out here with uncommitted changes:\n${state.status}\n` +
      `tron moves this checkout when it lands a block; commit or stash them (\`git stash\`), ` +
      `or switch to another branch (\`git switch -c wip\`), then start again`,
  };
}

/** Runs `work` in turn with the caller's other worktree administration (the engine's queue). */
export type Serial = <T>(work: () => Promise<T>) => Promise<T>;

/**
 * The user's working tree that has trunk checked out, if any (git allows at most one).
 * Normally that is the repository folder itself, which its HEAD tells at once; otherwise
 * the list of worktrees is read — under `serial`, since a worktree being made meanwhile
 * can make that list fail to read.
 */
async function trunkCheckoutPath(repo: string, trunk: string, serial: Serial = (work) => work()): Promise<string | undefined> {
  if ((await branchOfHead(repo)) === `refs/heads/${trunk}`) return realpath(repo);
  const out = await serial(() => gitOut(repo, ['worktree', 'list', '--porcelain', '-z']));
  const engineRoot = resolve(await realpath(repo), WORKTREES_DIR) + sep;
  for (const record of out.split('\0\0')) {
    const fields = record.split('\0');
    const path = fields.find((f) => f.startsWith('worktree '))?.slice('worktree '.length);
    if (path === undefined || !fields.includes(`branch refs/heads/${trunk}`)) continue;
    if ((resolve(await realpath(path).catch(() => path)) + sep).startsWith(engineRoot)) continue;
    return path;
  }
  return undefined;
}

/**
 * Finishes a landing whose ref transaction committed but whose checkout update never ran
 * (the engine died in between): if the user's checkout of trunk holds exactly the tree of
 * one of `olds` — trunk shas the engine landed from — with nothing else changed, it is
 * moved to trunk now. Anything else is the user's own work and is left alone. Returns the
 * sha it moved the checkout from, if it did.
 */
export async function catchUpCheckout(repo: string, trunk: string, olds: readonly Sha[]): Promise<Sha | undefined> {
  const path = await trunkCheckoutPath(repo, trunk);
  if (path === undefined || olds.length === 0) return undefined;
  const now = await currentTrunkSha(repo, trunk);
  // Only reads until the move: a boot killed here leaves no lock behind (index.lock included).
  const sameAs = async (sha: Sha) =>
    (await runGit(path, ['diff', '--cached', '--quiet', '--no-ext-diff', '--no-textconv', sha, '--'])).exitCode === 0;
  if ((await runGit(path, ['diff', '--quiet', '--no-ext-diff', '--no-textconv'])).exitCode !== 0) return undefined;
  if (await sameAs(now)) return undefined;
  for (const old of olds) {
    if (old === now || !(await isAncestor(repo, old, now))) continue;
    if (!(await sameAs(old))) continue;
    // The checkout is exactly as a landing of the engine left it: a lock that no live
    // process holds is that landing's, killed in the middle of moving it.
    const gitDir = resolve(path, (await gitOut(path, ['rev-parse', '--git-dir'])).trim());
    await removeStaleLocks([join(gitDir, 'index.lock')]);
    const synced = await syncCheckout(repo, trunk, old, now);
    return synced.state === 'updated' ? old : undefined;
  }
  return undefined;
}

/**
 * The lock files a landing takes — trunk's ref, the landed ref, and the index of the
 * user's checkout of trunk while it is moved — left behind when the engine died in the
 * middle of one. Only called at boot, for a landing the previous run announced and never
 * saw end; returns the files it removed.
 */
export async function clearLandingLocks(repo: string, trunk: string, ids: readonly string[]): Promise<string[]> {
  const common = await commonDir(repo);
  // Updating trunk's ref also locks HEAD where trunk is checked out (its reflog), and packed-refs.
  const files = [
    join(common, 'refs', 'heads', `${trunk}.lock`),
    ...ids.flatMap((id) => [join(common, 'refs', 'tron', 'landed', `${id}.lock`), join(common, 'refs', 'heads', 'tron', `${id}.lock`)]),
    join(common, 'packed-refs.lock'),
    join(common, 'HEAD.lock'),
  ];
  const checkout = await trunkCheckoutPath(repo, trunk);
  if (checkout !== undefined) {
    const gitDir = resolve(checkout, (await gitOut(checkout, ['rev-parse', '--git-dir'])).trim());
    files.push(join(gitDir, 'index.lock'), join(gitDir, 'HEAD.lock'));
  }
  return removeStaleLocks([...new Set(files)]);
}
