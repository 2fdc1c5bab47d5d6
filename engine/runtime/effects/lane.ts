/**
 * The merge lane's effects (see engine/core/lane/lane.ts for what is decided): build a
 * stack by replaying each block onto the one before, test a stack's top or a prefix, land
 * a stack in one ref transaction. All of it happens in the engine's `_lane` checkout and
 * in refs; no worker and no worker's worktree takes part. The lane runs one effect at a
 * time, so `_lane` is never shared.
 */
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import { checkout, runSuite, suiteGreen } from './checkouts.ts';
import { type EffectContext, effect } from './context.ts';
import { landAfterQueue } from './queue.ts';
import { fetchBeforeStack, landOnRemote } from './remote.ts';
import { suiteAt } from './suites.ts';

type RebaseResult = EventOf<'rebase.done'>['results'][number];

/**
 * Replays each block's own commits onto the one before, starting at trunk: first as many
 * as need no merge, all at once in the object store (replay.ts), then the rest one by one
 * (stack.ts). A block that
 * replays cleanly with its patch unchanged (or already sits there) stays in the stack and
 * the next goes on top of it; one whose patch changed or that conflicts is left out.
 * Trunk elsewhere than the decision says: nothing is replayed, and the actual sha reported.
 */
export const stackBlocks = effect({ run: (c, e: EventOf<'lane.stacked'>) => fetchThenStack(c, e) });

/**
 * [remote]: the remote's trunk is fetched (remote.ts) while the stack is replayed onto
 * trunk as the engine holds it, in the object store and `_lane` — neither of which the
 * fetch touches. Mostly the remote's trunk is where the engine left it, and that replay
 * stands; when someone else moved it, the replay is dropped and done again on the trunk
 * fetched. Trunk touched locally is found in `stack`, as without a remote.
 */
async function fetchThenStack(c: EffectContext, e: EventOf<'lane.stacked'>): Promise<EventBody | EventBody[]> {
  if (!c.remote || (await git.currentTrunkSha(c.repo, c.config.trunk)) !== e.trunk_sha) return stack(c, e);
  // The replay's failure counts only if the replay does: not when the remote moved under it.
  const replaying = stack(c, e).then(
    (done) => ({ done }),
    (error: unknown) => ({ error }),
  );
  const [before, replayed] = await Promise.all([fetchBeforeStack(c, c.remote, e), replaying]);
  if (!before.go) return before.events;
  if (before.trunk !== e.trunk_sha) return [...before.events, await stack(c, { ...e, trunk_sha: before.trunk })];
  if ('error' in replayed) throw replayed.error;
  return [...before.events, replayed.done];
}

async function stack(c: EffectContext, e: EventOf<'lane.stacked'>): Promise<EventBody> {
  const trunk = await git.currentTrunkSha(c.repo, c.config.trunk);
  if (trunk !== e.trunk_sha) return { type: 'rebase.done', stack: e.stack, trunk_sha: trunk, results: [] };
  const results: RebaseResult[] = [];
  let top = e.trunk_sha;
  // `_lane` is put at `onto` (made the first time) only for a block of several commits, which is cherry-picked there.
  const workdir = (onto: string): Promise<string> => checkout(c, '_lane', onto);
  let topIsNew = false;
  // Those that need no merge, in bulk; the rest (from the first that does) one by one.
  const bulk = await git.replayInStore(c.repo, e.trunk_sha, e.blocks);
  for (const r of bulk) {
    const outcome = r.outcome === 'fast_forward' ? 'fast_forward' : 'clean';
    results.push({ block: r.block, outcome, onto: top, sha: r.sha, patch_before: r.patch, patch_after: r.patch });
    top = r.sha;
    topIsNew = r.outcome === 'rebased';
  }
  for (const b of e.blocks.slice(bulk.length)) {
    const r = await git.replayOnto(c.repo, workdir, {
      sha: b.sha,
      onto: top,
      trunk: e.trunk_sha,
      ontoIsNew: topIsNew,
      ...(b.patch_id !== undefined ? { patch: b.patch_id } : {}),
    });
    if (r.outcome === 'conflict') {
      results.push({ block: b.block, outcome: 'conflict', onto: top, patch_before: r.patchBefore, files: r.files });
      continue;
    }
    const outcome = r.outcome === 'fast_forward' ? 'fast_forward' : r.patchAfter === r.patchBefore ? 'clean' : 'changed';
    results.push({ block: b.block, outcome, onto: top, sha: r.sha, patch_before: r.patchBefore, patch_after: r.patchAfter });
    if (outcome !== 'changed') {
      top = r.sha;
      topIsNew = r.outcome === 'rebased';
    }
  }
  return { type: 'rebase.done', stack: e.stack, trunk_sha: trunk, results };
}

/** Setup and the tests at a stack's top (or a prefix's), in `_lane` holding exactly that sha. */
export const testCandidate = effect({ where: 'queue', run: (c, e: EventOf<'candidate.requested' | 'bisect.step'>) => testAt(c, e) });

async function testAt(c: EffectContext, e: EventOf<'candidate.requested' | 'bisect.step'>): Promise<EventBody> {
  const at = {
    sha: e.sha,
    block: e.blocks.at(-1)!,
    session: 'tests:lane',
    log: `tests/lane-${e.stack}-${e.blocks.length}-${e.sha.slice(0, 12)}`,
  };
  const suite = await suiteAt(c, at, async () => runSuite(c, { ...at, dir: await checkout(c, '_lane', e.sha) }));
  return {
    type: 'candidate.tested',
    stack: e.stack,
    sha: e.sha,
    blocks: e.blocks,
    ok: suiteGreen(suite),
    ...(suite.setup ? { setup: suite.setup } : {}),
    tests: suite.tests,
  };
}

/**
 * The one ref transaction: trunk to the top, each block's landed ref and branch to its
 * own commit. The stack has landed when it commits, and the lane goes on; moving your
 * checkout of trunk after it stays in the same turn of the main queue, so nothing reads
 * that checkout half moved and the next landing waits for it (a crash in between is
 * caught up at the next start: git.catchUpCheckout).
 */
export const landStack = effect({
  // [remote]: one atomic push first; local refs and your checkout follow only once the remote accepted.
  // [forge] merge = "queue": the queue moved the remote's trunk already; only tron's record of it is pushed (queue.ts).
  run: (c, e: EventOf<'land.intent'>) =>
    c.remote ? (e.queued ? landAfterQueue : landOnRemote)(c, c.remote, e, (accepted) => land(c, accepted)) : land(c, e),
});

async function land(c: EffectContext, e: EventOf<'land.intent'>): Promise<EventBody[]> {
  const ids = e.blocks.map((b) => b.block);
  const landing = {
    trunk: c.config.trunk,
    expectedOld: e.from,
    top: e.sha,
    blocks: e.blocks.map((b) => ({ id: b.block, sha: b.sha })),
    serialWorktrees: c.queues.serialWorktrees,
  };
  const result = await new Promise<Awaited<ReturnType<typeof git.moveRefs>>>((landed, failed) => {
    // The ref transaction needs no worktree; moving your checkout lists them, so that part waits for worktrees being made.
    void c.queues.main
      .run(async () => {
        let moved: Awaited<ReturnType<typeof git.moveRefs>>;
        try {
          moved = await git.moveRefs(c.repo, landing);
        } catch (error) {
          failed(error);
          return;
        }
        landed(moved);
        if (!moved.ok) return;
        const checkout = await git
          .followTrunk(c.repo, c.config.trunk, e.from, e.sha, c.queues.serialWorktrees)
          .catch((error: Error): git.CheckoutSync => ({ state: 'failed', path: c.repo, message: error.message }));
        if (checkout.state === 'failed')
          c.print(`tron: ${ids.join(', ')} landed, but your checkout of ${c.config.trunk} was not updated: ${checkout.message}`);
      })
      .catch(() => undefined);
  });
  if (!result.ok) {
    const detail =
      result.reason === 'trunk-moved' ? `trunk is at ${result.actual}, not ${e.from}` : `a landed ref of ${ids.join(', ')} already exists`;
    return [{ type: 'land.refused', stack: e.stack, blocks: ids, actual: result.actual, detail }];
  }
  return e.blocks.map((b) => ({ type: 'block.landed', block: b.block, sha: b.sha, from: e.from, top: e.sha }));
}

/**
 * [merge] verify_trunk: the suite once more, on trunk at a landed top, in the engine's
 * `_trunk` checkout — off the lane's path, one check at a time.
 */
export const testTrunk = effect({
  where: 'queue',
  run: (c, e: EventOf<'test.requested'>) => c.queues.trunkChecks.run(() => testTrunkNow(c, e)),
});

async function testTrunkNow(c: EffectContext, e: EventOf<'test.requested'>): Promise<EventBody> {
  const at = { sha: e.sha, block: e.block, session: 'tests:trunk', log: `tests/trunk-${e.sha.slice(0, 12)}`, yieldToLane: true };
  const suite = await suiteAt(c, at, async () => runSuite(c, { ...at, dir: await checkout(c, '_trunk', e.sha) }));
  const tests = suite.tests ?? suite.setup!;
  return { type: 'trunk.tested', block: e.block, sha: e.sha, ok: suiteGreen(suite), tests };
}
