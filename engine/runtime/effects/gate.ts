/**
 * The truth gate's observations (see engine/core/decide/gate.ts for what is decided from
 * them). Nothing here believes the worker: the facts are read from git and the suite is
 * run by the engine, in one of its own checkouts holding exactly the branch's head.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import { checkout, runSuite } from './checkouts.ts';
import { type EffectContext, effect, errorLine, type Queues } from './context.ts';
import { Coalesced } from './coalesce.ts';
import { suiteAt } from './suites.ts';

export const observeFacts = effect({
  where: 'queue',
  run: (c, e: EventOf<'facts.requested'>) => observe(c, e),
  // The facts are read from the block's worktree and branch: what fails there fails the gate.
  onFailure: (e, error): EventBody => ({
    type: 'facts.observed',
    block: e.block,
    purpose: e.purpose,
    base: e.base,
    head: e.base,
    commits: 0,
    trunk_sha: null,
    main_status: '',
    clean: false,
    status: '',
    tests: null,
    patch_id: '',
    fast_forward: false,
    worktree: `the facts could not be read: ${errorLine(error)}`,
  }),
});

async function observe(c: EffectContext, e: EventOf<'facts.requested'>): Promise<EventBody> {
  const dir = git.worktreePath(c.repo, e.block);
  // The worktree is the worker's: what is wrong with it is a fact about this block, never the run's end.
  const read = await readWorktree(c.repo, dir, `tron/${e.block}`, c.config.trunk);
  if ('problem' in read) return worktreeProblem(c, e, read.problem);
  const { head, trunk } = read;
  // The checkout the suite would run in is put at `head` while the facts are read: the
  // commit's tree is all it holds, whatever the facts then say.
  const name = c.checkouts.acquire();
  // With test runs on agents (c.suites) the checkout is made only if the engine must run the suite itself.
  const checkOut = () =>
    checkout(c, name, head).then(
      (path) => ({ path }),
      (error: unknown) => ({ error }),
    );
  const checkedOut = c.suites ? undefined : checkOut();
  try {
    // The observations are independent of each other: read at once (several gates at once
    // otherwise queue on each process in turn).
    const trunkSha = trunk ?? null;
    const [clean, commits, fastForward, status, engineDiff, patchId] = await Promise.all([
      git.isClean(dir).catch((error: unknown) => ({ problem: errorLine(error) })),
      git.commitsOver(c.repo, e.base, head).then((list) => list.length),
      trunkSha ? git.isAncestor(c.repo, trunkSha, head) : false,
      mainStatusOnce(c),
      git.changesUnder(c.repo, e.base, head, '.tron/'),
      git.patchId(c.repo, e.base, head),
    ]);
    if ('problem' in clean) return await worktreeProblem(c, e, `git status fails in the worktree: ${clean.problem}`);
    // Whether trunk is as the engine left it is decided from these facts, not here: the
    // engine may land another block while they are observed.
    const worthTesting = commits > 0 && clean.clean && engineDiff.length === 0 && (e.purpose === 'gate' || fastForward);
    const suite = worthTesting ? await testIn(c, () => checkedOut ?? checkOut(), e.block, e.purpose, head) : { setup: null, tests: null };
    return {
      type: 'facts.observed',
      block: e.block,
      purpose: e.purpose,
      base: e.base,
      head,
      commits,
      trunk_sha: trunkSha,
      main_status: status,
      clean: clean.clean,
      status: clean.status,
      ...(suite.setup ? { setup: suite.setup } : {}),
      tests: suite.tests,
      patch_id: patchId,
      fast_forward: fastForward,
      git_files: await git.adminDigests(c.repo),
      ...(c.engineFiles ? { engine_files: c.engineFiles.changes() } : {}),
      engine_diff: engineDiff,
    };
  } finally {
    await checkedOut;
    c.checkouts.release(name);
  }
}

/**
 * The worktree's head, read as git reads it, and whether its HEAD is still on the block's
 * branch: a worker that points HEAD elsewhere — at a ref that does not exist, at another
 * block's branch — or leaves a worktree git cannot read gets a problem, not a crash. Its
 * HEAD is read from its HEAD file where that is the plain file git writes (branchOfHead),
 * and the branch and trunk — refs the repository shares with its worktrees — by the
 * repository's long-lived resolver: no process, where nothing is odd.
 */
async function readWorktree(
  repo: string,
  dir: string,
  branch: string,
  trunk: string,
): Promise<{ head: string; trunk: string | undefined } | { problem: string }> {
  try {
    const ref = await git.branchOfHead(dir);
    if (ref !== `refs/heads/${branch}`) {
      const on = ref?.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : ref;
      return {
        problem: on
          ? `the worktree's HEAD is on ${on}, not on the block's branch ${branch}: check out ${branch} again (\`git checkout ${branch}\`) and commit there`
          : `the worktree's HEAD is not on the block's branch ${branch} (detached, or unreadable): check out ${branch} again and commit there`,
      };
    }
    const [head, at] = await Promise.all([git.revParse(repo, ref), git.revParse(repo, `refs/heads/${trunk}`)]);
    // No commit on the branch (or an object that is none): git's own error says what.
    if (head === undefined) return await git.headAndTrunk(dir, trunk);
    return { head, trunk: at };
  } catch (error) {
    return { problem: `git cannot read the worktree: ${errorLine(error)}` };
  }
}

/** The facts when the worktree could not be observed: the problem, and what the engine alone reads. */
async function worktreeProblem(c: EffectContext, e: EventOf<'facts.requested'>, problem: string): Promise<EventBody> {
  const [branchSha, trunkSha, status] = await Promise.all([
    git.revParse(c.repo, `refs/heads/tron/${e.block}`),
    git.revParse(c.repo, `refs/heads/${c.config.trunk}`),
    c.queues.main.run(() => mainStatus(c.repo, c.config.trunk, c.queues)),
  ]);
  return {
    type: 'facts.observed',
    block: e.block,
    purpose: e.purpose,
    base: e.base,
    head: branchSha ?? e.base,
    commits: 0,
    trunk_sha: trunkSha ?? null,
    main_status: status,
    clean: false,
    status: '',
    tests: null,
    patch_id: '',
    fast_forward: false,
    git_files: await git.adminDigests(c.repo),
    worktree: problem,
  };
}

/** The suite at `head`, in one of the gate's checkouts: the commit alone, not the worktree it was made in. */
async function testIn(
  c: EffectContext,
  checkedOut: () => Promise<{ path: string } | { error: unknown }>,
  block: string,
  purpose: string,
  head: string,
) {
  const at = { sha: head, block, session: `tests:${purpose}`, log: `tests/${block}-${purpose}-${head.slice(0, 12)}`, yieldToLane: true };
  return suiteAt(c, at, async () => {
    const out = await checkedOut();
    if ('error' in out) throw out.error;
    return c.checkouts.runs.run(() => runSuite(c, { ...at, dir: out.path }));
  });
}

/** The gates observed together read the main checkout together (coalesce.ts): one `status` for all of them. */
const mainReads = new WeakMap<object, Coalesced<'main', { status: string } | { error: unknown }>>();

/** The main checkout's status, read after this call began — only between landings, never while one is moving it. */
async function mainStatusOnce(c: EffectContext): Promise<string> {
  let reads = mainReads.get(c.queues);
  if (!reads) {
    const read = () => c.queues.main.run(() => mainStatus(c.repo, c.config.trunk, c.queues));
    reads = new Coalesced(
      async () => new Map([['main', await read().then((status) => ({ status }))] as const]),
      (error) => ({ error }),
    );
    mainReads.set(c.queues, reads);
  }
  const got = await reads.ask('main');
  if ('error' in got) throw got.error;
  return got.status;
}

/**
 * Porcelain status of the main checkout, leaving out the engine's own `.tron/` folders
 * (its files are compared by digest instead), plus every tracked file whose index flag
 * hides edits from `git status` — skip-worktree, assume-unchanged — with a digest of its
 * content, so an edit under such a flag shows here too.
 */
export async function mainStatus(repo: string, trunk: string, queues: Pick<Queues, 'serialWorktrees'>): Promise<string> {
  const state = await git.mainCheckout(repo, trunk, queues.serialWorktrees);
  const lines = state.status.split('\n').filter((line) => line.trim() !== '' && !line.slice(3).startsWith('.tron/'));
  for (const hidden of await git.hiddenByIndex(state.path)) {
    lines.push(`${hidden.flag} ${hidden.path} (${contentDigest(join(state.path, hidden.path))})`);
  }
  return lines.join('\n');
}

/** A short digest of a regular file (never following a link, never opening anything else). */
function contentDigest(path: string): string {
  try {
    const info = lstatSync(path);
    if (!info.isFile()) return info.isSymbolicLink() ? 'a link' : 'not a file';
    return createHash('sha256').update(readFileSync(path)).digest('hex').slice(0, 16);
  } catch {
    return 'missing';
  }
}
