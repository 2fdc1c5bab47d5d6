/**
 * The lane's effects with a remote ([remote]; decided in engine/core/lane/remote.ts).
 *
 * - Before a stack is built, the remote's trunk is fetched; if it moved ahead (someone
 *   else pushed), local trunk and your checkout follow it first, and the stack is built
 *   on it (`remote.fetched`).
 * - A landing is ONE atomic push (git/remote.ts: trunk by lease from the stack's base to
 *   its top, every block's landed ref created). Only after the remote accepted do local
 *   trunk, the local landed refs and your checkout follow — the same local transaction
 *   as without a remote (lane.ts). The intent (land.intent) is on disk before the push
 *   starts, so a crash at any instant leaves either nothing on the remote or the whole
 *   landing there, which the next start reads (`catchUpFromRemote`).
 * - A refused lease: the remote is read. If it already holds exactly this landing (an
 *   answer lost, a retry after a timeout that had gone through), it counts as pushed;
 *   if its trunk moved ahead of the stack's base, local trunk follows and the decision
 *   restacks (`remote.moved`); anything else is a trunk rewritten by someone: refused.
 * - A network failure comes back as `remote.failed` with the remote's words; the wait
 *   before a retry is its own effect (`remote.retry` → `remote.waited`), so replay holds.
 */
import { keepWork } from './work-ref.ts';
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import {
  fetchTrunk,
  pushBranches,
  pushLanding,
  readRemote,
  redactUrl,
  remoteProblemCode,
  type Remote,
  type RemoteFailure,
} from '../../git/remote.ts';
import { type EffectContext, type Moment, effect } from './context.ts';

/** What fetching before a stack found: go on from `trunk` (with `events` first), or stop with `events`. */
export type BeforeStack = { go: true; trunk: string; events: EventBody[] } | { go: false; events: EventBody[] };

/**
 * Fetches the remote's trunk before stacking on `e.trunk_sha`. Ahead of it: local trunk
 * and your checkout follow, and the stack goes on from there. Diverged from it (history
 * rewritten on the remote, or local commits the remote lacks): the stack stops with
 * trunk reported where the remote has it, which the lane treats as trunk moved by
 * someone else. A failed fetch changes nothing: the stack goes on, and the push's lease
 * still guards the landing.
 */
export async function fetchBeforeStack(c: EffectContext, remote: Remote, e: EventOf<'lane.stacked'>): Promise<BeforeStack> {
  const fetched = await fetchTrunk(c.repo, remote);
  if (!fetched.ok) return { go: true, trunk: e.trunk_sha, events: [failed(remote, e.stack, 'fetch', fetched, 1)] };
  const sha = fetched.sha;
  if (sha === undefined || sha === e.trunk_sha) return { go: true, trunk: e.trunk_sha, events: [] };
  if (!(await git.isAncestor(c.repo, e.trunk_sha, sha))) {
    return { go: false, events: [{ type: 'rebase.done', stack: e.stack, trunk_sha: sha, results: [] }] };
  }
  const pushedByWorker = await workerPushed(c, e.trunk_sha, sha);
  if (pushedByWorker) {
    const ids = e.blocks.map((b) => b.block);
    return { go: false, events: [{ type: 'land.refused', stack: e.stack, blocks: ids, actual: sha, detail: pushedByWorker }] };
  }
  const followed = await followRemote(c, e.trunk_sha, sha);
  if (!followed) return { go: false, events: [{ type: 'rebase.done', stack: e.stack, trunk_sha: await localTrunk(c), results: [] }] };
  return { go: true, trunk: sha, events: [{ type: 'remote.fetched', stack: e.stack, from: e.trunk_sha, sha }] };
}

/**
 * Lands a stack on the remote, then locally (`landLocally`: the ref transaction and your
 * checkout, exactly as without a remote).
 */
export async function landOnRemote(
  c: EffectContext,
  remote: Remote,
  e: EventOf<'land.intent'>,
  landLocally: (e: EventOf<'land.intent'>) => Promise<EventBody[]>,
): Promise<EventBody[]> {
  const ids = e.blocks.map((b) => b.block);
  const attempt = e.attempt ?? 1;
  const local = await localTrunk(c);
  if (local !== e.from) {
    return [{ type: 'land.refused', stack: e.stack, blocks: ids, actual: local, detail: `trunk is at ${local}, not ${e.from}` }];
  }
  const blocks = e.blocks.map((b) => ({ id: b.block, sha: b.sha }));
  const pushed = await pushLanding(c.repo, remote, { expectedOld: e.from, top: e.sha, blocks });
  const accepted = (found: boolean): Promise<EventBody[]> =>
    landLocally(e).then((after) => [
      { type: 'remote.pushed', stack: e.stack, from: e.from, sha: e.sha, blocks: e.blocks, ...(found ? { found } : {}) },
      ...after,
    ]);
  if (pushed.ok) return accepted(false);
  if (pushed.kind !== 'moved') return [failed(remote, e.stack, 'push', pushed, attempt)];
  // A lease refused: what does the remote hold now?
  const fetched = await fetchTrunk(c.repo, remote);
  if (!fetched.ok) return [failed(remote, e.stack, 'push', fetched, attempt)];
  const read = await readRemote(c.repo, remote);
  if (!read.ok) return [failed(remote, e.stack, 'push', read, attempt)];
  const now = fetched.sha;
  const ours = e.blocks.filter((b) => read.refs.landed.get(b.block) === b.sha);
  if (ours.length === e.blocks.length && now !== undefined && (await git.isAncestor(c.repo, e.sha, now))) return accepted(true);
  const theirs = e.blocks.filter((b) => read.refs.landed.has(b.block));
  const pushedByWorker = now === undefined ? undefined : await workerPushed(c, e.from, now);
  if (pushedByWorker) return [{ type: 'land.refused', stack: e.stack, blocks: ids, actual: now ?? null, detail: pushedByWorker }];
  if (now !== undefined && theirs.length === 0 && now !== e.from && (await git.isAncestor(c.repo, e.from, now))) {
    if (await followRemote(c, e.from, now)) {
      const detail = `the remote's ${remote.trunk} moved from ${e.from.slice(0, 12)} to ${now.slice(0, 12)} (someone else pushed)`;
      return [{ type: 'remote.moved', stack: e.stack, blocks: ids, from: e.from, sha: now, detail }];
    }
  }
  const detail =
    theirs.length > 0
      ? `the remote already has refs/tron/landed/ for ${theirs.map((b) => b.block).join(', ')}, not from this landing`
      : `the remote's ${remote.trunk} is at ${now ?? 'nothing'}, which does not descend from ${e.from} (history rewritten there)`;
  return [{ type: 'land.refused', stack: e.stack, blocks: ids, actual: now ?? null, detail }];
}

/** The wait before a push's next try: the decision said how long; the input says it passed. */
export const waitRetry = effect({
  run: (c, e: EventOf<'remote.retry'>) =>
    new Promise<EventBody>((resolve) => {
      c.clock.after(e.wait_ms, () => resolve({ type: 'remote.waited', stack: e.stack, attempt: e.attempt }));
    }),
});

/**
 * `[remote] push_branches`: a block that passed its gate is pushed as `tron/<id>`. A
 * branch already there is moved only when it holds a sha this run attested for the block
 * (tron's own earlier push); anything else is someone's and stays. Off the lane's path:
 * the outcome is a note, never a decision. With a database and turns run here, the
 * attested head also goes to the block's work ref, for a standby in another clone
 * (work-ref.ts keepWork).
 */
export const pushBranch = effect({
  request: (e: EventOf<'gate.passed'>, at: Moment) => ({
    block: e.block,
    sha: e.sha,
    ours: at.state.lane.remote ? at.history.flatMap((h) => (h.type === 'gate.passed' && h.block === e.block ? [h.sha] : [])) : [],
  }),
  run: async (c, r: { block: string; sha: string; ours: string[] }) => {
    await keepWork(c, r.block, r.sha);
    if (!c.remote || !c.config.remote?.pushBranches) return undefined;
    const read = await readRemote(c.repo, c.remote);
    const note = (ok: boolean, detail?: string): undefined => {
      c.note({ type: 'remote.branch.pushed', block: r.block, sha: r.sha, ok, ...(detail ? { detail } : {}) });
      return undefined;
    };
    if (!read.ok) return note(false, read.message);
    const there = read.refs.branches.get(r.block);
    if (there === r.sha) return note(true);
    if (there !== undefined && !r.ours.includes(there))
      return note(false, `tron/${r.block} on the remote is at ${there}, which tron did not push: left alone`);
    const pushed = await pushBranches(c.repo, c.remote, [{ id: r.block, sha: r.sha, expected: there }]);
    return pushed.ok ? note(true) : note(false, pushed.message);
  },
});

/**
 * The fact a remote makes checkable: only the engine puts a block's work on the remote's
 * trunk. When the remote's trunk moved from `from` to `now` and now holds the head of a
 * block branch that is not on local trunk (`tron/<id>`: a worker's own commits), a worker
 * pushed it — possible only without a sandbox, which gives no worker the credentials. A
 * head the remote records as landed (`refs/tron/landed/<id>`: tron's own push, whose
 * record a crash cut off) is not that. Says so, or undefined (also when the remote cannot
 * be read to tell).
 */
async function workerPushed(c: EffectContext, from: string, now: string): Promise<string | undefined> {
  const hits: Array<[string, string]> = [];
  for (const [branch, head] of await git.branchesOf(c.repo, 'tron/*')) {
    if (head === from || (await git.isAncestor(c.repo, head, from))) continue;
    if (await git.isAncestor(c.repo, head, now)) hits.push([branch, head]);
  }
  if (hits.length === 0 || !c.remote) return undefined;
  const read = await readRemote(c.repo, c.remote);
  if (!read.ok) return undefined;
  const landed = new Set(read.refs.landed.values());
  const hit = hits.find(([, head]) => !landed.has(head));
  if (!hit) return undefined;
  return `the remote's ${c.config.trunk} (now ${now.slice(0, 12)}) holds ${hit[0]} at ${hit[1].slice(0, 12)}, a block's own commits tron never pushed: a worker pushed them to the remote`;
}

function failed(remote: Remote, stack: number, op: 'fetch' | 'push', f: RemoteFailure, attempt: number): EventBody {
  return {
    type: 'remote.failed',
    stack,
    op,
    kind: f.kind,
    reason: f.reason,
    code: remoteProblemCode(f),
    message: `${remote.name} (${redactUrl(remote.pushUrl)}): ${f.message}`,
    attempt,
  };
}

function localTrunk(c: EffectContext): Promise<string> {
  return git.currentTrunkSha(c.repo, c.config.trunk);
}

/**
 * Local trunk from `from` to the remote's `to` (a descendant), and your checkout with
 * it, in the main queue as a landing does. False when local trunk is no longer at `from`.
 */
async function followRemote(c: EffectContext, from: string, to: string): Promise<boolean> {
  return c.queues.main.run(async () => {
    const moved = await git.moveRefs(c.repo, {
      trunk: c.config.trunk,
      expectedOld: from,
      top: to,
      blocks: [],
      serialWorktrees: c.queues.serialWorktrees,
    });
    if (!moved.ok) return false;
    const checkout = await git
      .followTrunk(c.repo, c.config.trunk, from, to, c.queues.serialWorktrees)
      .catch((error: Error): git.CheckoutSync => ({ state: 'failed', path: c.repo, message: error.message }));
    if (checkout.state === 'failed')
      c.print(`tron: ${c.config.trunk} followed the remote, but your checkout was not updated: ${checkout.message}`);
    return true;
  });
}
