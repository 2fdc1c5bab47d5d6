/**
 * The effect runner's hands: each decision event that reaches outside the engine is
 * carried out here, and what it found comes back as an input event. Nothing here
 * decides anything; it observes and reports.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { execa } from 'execa';
import type { BodyOf, EventBody, EventOf } from '../core/events.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import * as git from '../git/index.ts';
import type { Sandbox } from '../workers/sandbox.ts';
import { answerCommand } from '../render/narrate.ts';
import type { EngineFiles } from './effects/engine-files.ts';
import { type CheckoutPool, Slots, checkout, runSuite, suiteGreen } from './effects/checkouts.ts';

/**
 * git's worktree administration (add, prune, remove) is not safe to run concurrently in
 * one repository: one `worktree add` can read another's half-made admin folder, and a
 * prune can remove it. Every such call goes through this queue.
 */
const worktreeQueue = new Slots(1);
export function serialWorktrees<T>(work: () => Promise<T>): Promise<T> {
  return worktreeQueue.run(work);
}

/**
 * Landings move trunk and the user's checkout of it; reads of that checkout go through
 * the same queue, so a fact never sees the checkout half moved. A landing's ref
 * transaction touches no worktree administration and does not wait behind worktrees being
 * made or removed; only the move of the user's checkout (which lists the worktrees) also
 * takes the worktree queue — always inside this one, never the other way round.
 */
const mainQueue = new Slots(1);
export function serialMain<T>(work: () => Promise<T>): Promise<T> {
  return mainQueue.run(work);
}

export interface EffectContext {
  repo: string;
  runDir: string;
  config: Config;
  blocks: () => Map<string, Block>;
  env: Record<string, string | undefined>;
  /** Where test runs are confined (workers get theirs from their adapter). */
  sandbox: Sandbox;
  print: (line: string) => void;
  /** Appends a note event (process bookkeeping) to the run's log. */
  note: (body: EventBody) => void;
  /** The engine's own files as it loaded them, compared at every gate. */
  engineFiles?: EngineFiles;
  /** The gate's checkouts for test runs. */
  checkouts: CheckoutPool;
}

/**
 * Porcelain status of the main checkout, leaving out the engine's own `.tron/` folders
 * (its files are compared by digest instead), plus every tracked file whose index flag
 * hides edits from `git status` — skip-worktree, assume-unchanged — with a digest of its
 * content, so an edit under such a flag shows here too.
 */
export async function mainStatus(repo: string, trunk: string): Promise<string> {
  const state = await git.mainCheckout(repo, trunk, serialWorktrees);
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

export async function prepareWorktree(c: EffectContext, e: EventOf<'worktree.requested'>): Promise<EventBody> {
  // Only the worktree commands wait for each other; reading the admin files does not.
  const { made, orphan } = await serialWorktrees(() => prepareWorktreeNow(c, e));
  return {
    type: 'worktree.ready',
    block: e.block,
    attempt: e.attempt,
    base: e.base,
    path: relative(c.repo, made.path),
    ...(orphan ? { orphan } : {}),
    git_files: await git.adminDigests(c.repo),
  };
}

async function prepareWorktreeNow(c: EffectContext, e: EventOf<'worktree.requested'>) {
  const path = git.worktreePath(c.repo, e.block);
  const branch = `tron/${e.block}`;
  // The common case, a block's first worktree, is one `worktree add`; a folder or branch
  // left from before (an earlier attempt, a crash, or planted) makes it refuse, changing
  // nothing, and is retired first — its work kept as orphan/<id>-<n> — then made again.
  if (!existsSync(path)) {
    try {
      return { made: await git.createWorktree(c.repo, { id: e.block, base: e.base }), orphan: undefined };
    } catch (error) {
      if (!(error instanceof git.GitStateError && error.code === 'TRON_WORKTREE_EXISTS')) throw error;
    }
  }
  const orphan = await retireBranch(c, e.block, branch);
  if (existsSync(path)) await git.removeWorktree(c.repo, path);
  const made = await git.createWorktree(c.repo, { id: e.block, base: e.base });
  return { made, orphan };
}

/** Deletes tron/<id>, first preserving it as orphan/<id>-<n> when it holds commits not on trunk. */
async function retireBranch(c: EffectContext, id: string, branch: string): Promise<string | undefined> {
  const sha = await git.revParse(c.repo, `refs/heads/${branch}`);
  if (!sha) return undefined;
  await git.removeWorktree(c.repo, git.worktreePath(c.repo, id));
  return dropBranch(c, id, branch, sha);
}

/** Deletes tron/<id> at `sha` (its worktree already gone), first preserving it as orphan/<id>-<n> when that holds commits not on trunk. */
async function dropBranch(c: EffectContext, id: string, branch: string, sha: string): Promise<string | undefined> {
  let orphan: string | undefined;
  if (!(await git.allOnTrunk(c.repo, sha, c.config.trunk))) orphan = await git.preserveOrphan(c.repo, id, sha);
  await git.deleteBranch(c.repo, branch, sha);
  return orphan;
}

export async function observeFacts(c: EffectContext, e: EventOf<'facts.requested'>): Promise<EventBody> {
  const dir = git.worktreePath(c.repo, e.block);
  const { head, trunk } = await git.headAndTrunk(dir, c.config.trunk);
  // The checkout the suite would run in is put at `head` while the facts are read: the
  // commit's tree is all it holds, whatever the facts then say.
  const name = c.checkouts.acquire();
  const checkedOut = checkout(c, name, head, serialWorktrees).then(
    (path) => ({ path }),
    (error: unknown) => ({ error }),
  );
  try {
    // The observations are independent of each other: read at once (several gates at once
    // otherwise queue on each process in turn).
    const trunkSha = trunk ?? null;
    const [commits, fastForward, status, clean, engineDiff, patchId] = await Promise.all([
      git.commitsOver(c.repo, e.base, head).then((list) => list.length),
      trunkSha ? git.isAncestor(c.repo, trunkSha, head) : false,
      // Read the main checkout only between landings, never while one is moving it.
      serialMain(() => mainStatus(c.repo, c.config.trunk)),
      git.isClean(dir),
      git.changesUnder(c.repo, e.base, head, '.tron/'),
      git.patchId(c.repo, e.base, head),
    ]);
    // Whether trunk is as the engine left it is decided from these facts, not here: the
    // engine may land another block while they are observed.
    const worthTesting = commits > 0 && clean.clean && engineDiff.length === 0 && (e.purpose === 'gate' || fastForward);
    const suite = worthTesting ? await testIn(c, await checkedOut, e.block, e.purpose, head) : { setup: null, tests: null };
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

/** The suite at `head`, in one of the gate's checkouts: the commit alone, not the worktree it was made in. */
async function testIn(c: EffectContext, checkedOut: { path: string } | { error: unknown }, block: string, purpose: string, head: string) {
  if ('error' in checkedOut) throw checkedOut.error;
  const log = `tests/${block}-${purpose}-${head.slice(0, 12)}`;
  return c.checkouts.runs.run(() => runSuite(c, { dir: checkedOut.path, block, session: `tests:${purpose}`, log, yieldToLane: true }));
}

/** Checks of trunk share the `_trunk` checkout: one at a time. */
const trunkChecks = new Slots(1);

/**
 * [merge] verify_trunk: the suite once more, on trunk at a landed top, in the engine's
 * `_trunk` checkout — off the lane's path, one check at a time.
 */
export function testTrunk(c: EffectContext, e: EventOf<'test.requested'>): Promise<EventBody> {
  return trunkChecks.run(() => testTrunkNow(c, e));
}

async function testTrunkNow(c: EffectContext, e: EventOf<'test.requested'>): Promise<EventBody> {
  const dir = await checkout(c, '_trunk', e.sha, serialWorktrees);
  const suite = await runSuite(c, {
    dir,
    block: e.block,
    session: 'tests:trunk',
    log: `tests/trunk-${e.sha.slice(0, 12)}`,
    yieldToLane: true,
  });
  const tests = suite.tests ?? suite.setup!;
  return { type: 'trunk.tested', block: e.block, sha: e.sha, ok: suiteGreen(suite), tests };
}

/**
 * Removes the block's review checkout and worktree (in the worktree queue), then its
 * branch (outside it: blocks landed together wrap side by side).
 */
export async function wrapBlock(c: EffectContext, e: EventOf<'wrap.requested'>): Promise<EventBody> {
  const branch = `tron/${e.block}`;
  const sha = await serialWorktrees(async () => {
    for (const path of [git.reviewPath(c.repo, e.block), git.worktreePath(c.repo, e.block)]) {
      if (existsSync(path)) await git.removeWorktree(c.repo, path);
    }
    return git.revParse(c.repo, `refs/heads/${branch}`);
  });
  const orphan = sha === undefined ? undefined : await dropBranch(c, e.block, branch, sha);
  return { type: 'block.wrapped', block: e.block, summary: e.summary, ...(orphan ? { orphan } : {}) };
}

/**
 * Pages the operator: pages.md, and the page_command with a JSON page on stdin. The
 * console shows the page from its `page.sent` event (engine/render/narrate.ts).
 */
/** At the end of a run: the engine's own checkouts (`_lane`, `_check-<n>`, `_trunk`) go; the next run makes them again. */
export function removeEngineCheckouts(c: EffectContext): Promise<void> {
  return serialWorktrees(async () => {
    const root = join(c.repo, git.WORKTREES_DIR);
    if (!existsSync(root)) return;
    for (const name of readdirSync(root).filter((n) => n.startsWith('_'))) await git.removeWorktree(c.repo, join(root, name));
  });
}

/** Pages the operator: the console, pages.md, and the page_command with a JSON page on stdin. */
export async function page(c: EffectContext, e: EventOf<'escalation.raised'>): Promise<BodyOf<'page.sent'>> {
  const id = `${e.block}#${e.seq}`;
  const answer = answerCommand(c.repo, e.block);
  appendFileSync(join(c.runDir, 'pages.md'), `## ${id} — ${e.block}: ${e.trouble}\n\n${e.detail}\n\nAnswer: \`${answer}\`\n\n`);
  let command: string | undefined;
  if (c.config.pageCommand) {
    const [file, ...args] = c.config.pageCommand;
    command = c.config.pageCommand.join(' ');
    const pageJson = JSON.stringify({ page: id, block: e.block, trouble: e.trouble, reason: e.detail, run: c.runDir, answer });
    const result = await execa(file!, args, { input: pageJson, reject: false, timeout: 60_000, cwd: c.repo });
    if (result.exitCode !== 0) c.print(`tron: the page command exited ${result.exitCode}: ${(result.stderr ?? '').toString().slice(-500)}`);
  }
  return { type: 'page.sent', block: e.block, page: id, reason: e.detail, ...(command ? { command } : {}) };
}
