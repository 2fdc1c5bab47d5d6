/**
 * The effect runner's hands: each decision event that reaches outside the engine is
 * carried out here, and what it found comes back as an input event. Nothing here
 * decides anything; it observes and reports.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, lstatSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { execa } from 'execa';
import type { BodyOf, EventBody, EventOf } from '../core/events.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import * as git from '../git/index.ts';
import { runTests } from './testrun.ts';
import { processStartTime } from './proc.ts';
import type { Sandbox } from '../workers/sandbox.ts';
import { answerCommand } from '../render/narrate.ts';
import type { EngineFiles } from './engine-files.ts';

/**
 * git's worktree administration (add, prune, remove) is not safe to run concurrently in
 * one repository: one `worktree add` can read another's half-made admin folder, and a
 * prune can remove it. Every such call goes through this queue — and so do landings and
 * reads of the main checkout, so a fact never sees the checkout half moved.
 */
let worktreeQueue: Promise<unknown> = Promise.resolve();
export function serialWorktrees<T>(work: () => Promise<T>): Promise<T> {
  const next = worktreeQueue.then(work, work);
  worktreeQueue = next.catch(() => undefined);
  return next;
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
}

/** How every engine test run is confined and what it sees: the sandbox, `test_env`, the network setting. */
function testSetting(c: EffectContext) {
  return {
    env: c.env,
    passEnv: c.config.testEnv,
    sandbox: c.sandbox,
    network: c.config.sandbox.testNetwork,
    visible: [c.repo],
  };
}

/** Records the engine's own test processes like worker processes, so recovery can kill strays. */
function testProcesses(c: EffectContext, block: string, session: string) {
  return {
    onSpawn: (pid: number) => {
      const start = processStartTime(pid);
      if (start) c.note({ type: 'worker.spawned', block, session, turn: 0, pid, start_time: start });
    },
    onExit: (pid: number, code: number | null) => c.note({ type: 'worker.exited', block, session, turn: 0, pid, code, signal: null }),
  };
}

/**
 * Porcelain status of the main checkout, leaving out the engine's own `.tron/` folders
 * (its files are compared by digest instead), plus every tracked file whose index flag
 * hides edits from `git status` — skip-worktree, assume-unchanged — with a digest of its
 * content, so an edit under such a flag shows here too.
 */
export async function mainStatus(repo: string, trunk: string): Promise<string> {
  const state = await git.mainCheckout(repo, trunk);
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

export function prepareWorktree(c: EffectContext, e: EventOf<'worktree.requested'>): Promise<EventBody> {
  return serialWorktrees(() => prepareWorktreeNow(c, e));
}

async function prepareWorktreeNow(c: EffectContext, e: EventOf<'worktree.requested'>): Promise<EventBody> {
  const path = git.worktreePath(c.repo, e.block);
  const branch = `tron/${e.block}`;
  const orphan = await retireBranch(c, e.block, branch);
  await git.removeWorktree(c.repo, path);
  const base = e.base;
  const made = await git.createWorktree(c.repo, { id: e.block, base });
  return {
    type: 'worktree.ready',
    block: e.block,
    attempt: e.attempt,
    base,
    path: relative(c.repo, made.path),
    ...(orphan ? { orphan } : {}),
    git_files: await git.adminDigests(c.repo),
  };
}

/** Deletes tron/<id>, first preserving it as orphan/<id>-<n> when it holds commits not on trunk. */
async function retireBranch(c: EffectContext, id: string, branch: string): Promise<string | undefined> {
  const sha = await git.revParse(c.repo, `refs/heads/${branch}`);
  if (!sha) return undefined;
  await git.removeWorktree(c.repo, git.worktreePath(c.repo, id));
  let orphan: string | undefined;
  if (!(await git.allOnTrunk(c.repo, sha, c.config.trunk))) orphan = await git.preserveOrphan(c.repo, id, sha);
  await git.deleteBranch(c.repo, branch);
  return orphan;
}

export async function observeFacts(c: EffectContext, e: EventOf<'facts.requested'>): Promise<EventBody> {
  const dir = git.worktreePath(c.repo, e.block);
  const head = await git.headOf(dir);
  const commits = (await git.commitsOver(c.repo, e.base, head)).length;
  const trunkSha = (await git.revParse(c.repo, `refs/heads/${c.config.trunk}`)) ?? null;
  // Read the main checkout only between landings, never while one is moving it.
  const status = await serialWorktrees(() => mainStatus(c.repo, c.config.trunk));
  const clean = await git.isClean(dir);
  const fastForward = trunkSha ? await git.isAncestor(c.repo, trunkSha, head) : false;
  const engineDiff = await git.changesUnder(c.repo, e.base, head, '.tron/');
  // Whether trunk is as the engine left it is decided from these facts, not here: the
  // engine may land another block while they are observed.
  const worthTesting = commits > 0 && clean.clean && engineDiff.length === 0 && (e.purpose === 'gate' || fastForward);
  const tests = worthTesting
    ? await runTests({
        command: c.config.test,
        cwd: dir,
        runDir: c.runDir,
        log: `tests/${e.block}-${e.purpose}-${head.slice(0, 12)}.log`,
        timeoutMs: c.config.timeouts.testMs,
        ...testSetting(c),
        ...testProcesses(c, e.block, `tests:${e.purpose}`),
      })
    : null;
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
    tests,
    patch_id: await git.patchId(c.repo, e.base, head),
    fast_forward: fastForward,
    git_files: await git.adminDigests(c.repo),
    ...(c.engineFiles ? { engine_files: c.engineFiles.changes() } : {}),
    engine_diff: engineDiff,
  };
}

export async function observeMerge(c: EffectContext, e: EventOf<'merge.locked'>): Promise<EventBody> {
  const trunkSha = await git.currentTrunkSha(c.repo, c.config.trunk);
  return {
    type: 'merge.observed',
    block: e.block,
    trunk_sha: trunkSha,
    sha: e.sha,
    fast_forward: await git.isAncestor(c.repo, trunkSha, e.sha),
    patch_id: e.base ? await git.patchId(c.repo, e.base, e.sha) : '',
  };
}

export async function landBlock(c: EffectContext, e: EventOf<'land.intent'>): Promise<EventBody> {
  const result = await serialWorktrees(() => git.land(c.repo, { trunk: c.config.trunk, expectedOld: e.from, sha: e.sha, id: e.block }));
  if (result.ok) {
    if (result.checkout.state === 'failed')
      c.print(`tron: ${e.block} landed, but your checkout of ${c.config.trunk} was not updated: ${result.checkout.message}`);
    return { type: 'block.landed', block: e.block, sha: e.sha, from: e.from };
  }
  return {
    type: 'land.refused',
    block: e.block,
    actual: result.actual,
    detail: result.reason === 'trunk-moved' ? `trunk is at ${result.actual}, not ${e.from}` : `refs/tron/landed/${e.block} already exists`,
  };
}

/** The suite once more, on trunk at the landed sha, in a detached checkout the engine owns. */
export async function testTrunk(c: EffectContext, e: EventOf<'test.requested'>): Promise<EventBody> {
  const dir = await serialWorktrees(() => git.createReviewCheckout(c.repo, { id: `_trunk`, sha: e.sha }));
  try {
    const tests = await runTests({
      command: c.config.test,
      cwd: dir,
      runDir: c.runDir,
      log: `tests/trunk-${e.sha.slice(0, 12)}.log`,
      timeoutMs: c.config.timeouts.testMs,
      ...testSetting(c),
      ...testProcesses(c, e.block, 'tests:trunk'),
    });
    return { type: 'trunk.tested', block: e.block, sha: e.sha, ok: tests.exit === 0 && !tests.timed_out, tests };
  } finally {
    await serialWorktrees(() => git.removeWorktree(c.repo, dir));
  }
}

export function wrapBlock(c: EffectContext, e: EventOf<'wrap.requested'>): Promise<EventBody> {
  return serialWorktrees(() => wrapBlockNow(c, e));
}

async function wrapBlockNow(c: EffectContext, e: EventOf<'wrap.requested'>): Promise<EventBody> {
  await git.removeWorktree(c.repo, git.reviewPath(c.repo, e.block));
  const orphan = await retireBranch(c, e.block, `tron/${e.block}`);
  await git.removeWorktree(c.repo, git.worktreePath(c.repo, e.block));
  return { type: 'block.wrapped', block: e.block, summary: e.summary, ...(orphan ? { orphan } : {}) };
}

/**
 * Pages the operator: pages.md, and the page_command with a JSON page on stdin. The
 * console shows the page from its `page.sent` event (engine/render/narrate.ts).
 */
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
