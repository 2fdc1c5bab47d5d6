/**
 * A builder's work made on a `tron agent` comes into the engine's repository through the
 * remote (adoptWork). The agent's result names the sha it left on `refs/tron/work/<id>`:
 * when the engine's branch is there already — a turn that committed nothing — there is no
 * fetch; otherwise the work is fetched and the block's worktree moved to it. The word is
 * a hint, never believed: the branch only ever moves to what the remote holds. Blocks whose
 * work is asked for while a fetch is in flight come together in the next (work-fetch.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { openRemote } from '../git/remote.ts';
import { createWorktree, worktreePath } from '../git/worktree.ts';
import { makeBareRemote, serveDaemon } from '../testing/remote-server.ts';
import { makeRepo, testGit } from '../testing/repo.ts';
import { type EffectContext, Queues } from '../runtime/effects/context.ts';
import { adoptWork } from './job-queue.ts';
import { WorkFetches } from './work-fetch.ts';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The engine's repository with block `b`'s worktree at trunk, a served remote, and an agent's clone that pushed one commit of work. */
async function setup() {
  const bare = await makeBareRemote();
  cleanups.push(() => bare.cleanup());
  const served = await serveDaemon(bare);
  cleanups.push(() => served.stop().catch(() => undefined));
  const engine = await makeRepo({ 'a.txt': 'a\n' });
  cleanups.push(() => engine.cleanup());
  await engine.git('push', '-q', bare.dir, 'main');
  const base = await engine.git('rev-parse', 'HEAD');
  await createWorktree(engine.dir, { id: 'b', base });
  const agent = await makeRepo({});
  cleanups.push(() => agent.cleanup());
  await agent.git('fetch', '-q', bare.dir, `+main:refs/heads/work`);
  await agent.git('checkout', '-q', 'work');
  await agent.write('b.txt', 'the work\n');
  const work = await agent.commitAll('the work of b');
  await agent.git('push', '-q', bare.dir, `${work}:refs/tron/work/b`);
  await engine.git('remote', 'add', 'origin', served.url);
  const remote = await openRemote(engine.dir, { name: 'origin', trunk: 'main', timeoutMs: 30_000 });
  const fx = { repo: engine.dir, remote, queues: new Queues() } as unknown as EffectContext;
  const branch = () => engine.git('rev-parse', 'refs/heads/tron/b');
  const checkedOut = () => testGit(worktreePath(engine.dir, 'b'), 'rev-parse', 'HEAD');
  // The remote's connections from here on: a fetch is one.
  const before = served.served();
  const connections = () => served.served() - before;
  return { fx, base, work, connections, branch, checkedOut, agent, bare };
}

describe("adopting an agent's work", () => {
  it('fetches nothing when the agent says its branch is where the engine holds it already', async () => {
    const { fx, base, connections, branch, checkedOut } = await setup();
    await adoptWork(fx, 'b', base);
    expect(connections()).toBe(0);
    // The remote's work (which the agent did not name) is not taken on its word either way: the gate judges what the engine holds.
    expect(await branch()).toBe(base);
    expect(await checkedOut()).toBe(base);
  });

  it("fetches the remote's work and moves the block's worktree to it when the agent names another sha, or none", async () => {
    for (const said of ['f'.repeat(40), undefined]) {
      const { fx, work, connections, branch, checkedOut } = await setup();
      await adoptWork(fx, 'b', said);
      expect(connections()).toBe(1);
      // What the remote holds, whatever sha the agent named.
      expect(await branch()).toBe(work);
      expect(await checkedOut()).toBe(work);
    }
  });
});

describe("fetching blocks' work", () => {
  it('fetches the blocks asked for in one turn, or while a fetch is in flight, together in one round trip, each at its own sha', async () => {
    const { fx, work, connections, agent, bare } = await setup();
    const fetches = new WorkFetches(fx.repo, fx.remote!);
    // The agent pushed b's work; c and d get theirs at other commits.
    const c = await agent.git('commit-tree', '-m', 'c', '-p', work, `${work}^{tree}`);
    const d = await agent.git('commit-tree', '-m', 'd', '-p', work, `${work}^{tree}`);
    await agent.git('push', '-q', bare.dir, `${c}:refs/tron/work/c`, `${d}:refs/tron/work/d`);
    const before = connections();
    // b is asked for alone; c and d once its fetch is in flight.
    const b = fetches.fetch('b');
    await new Promise((r) => setImmediate(r));
    const [b1, c1, d1] = await Promise.all([b, fetches.fetch('c'), fetches.fetch('d')]);
    expect([b1, c1, d1]).toEqual([
      { ok: true, sha: work },
      { ok: true, sha: c },
      { ok: true, sha: d },
    ]);
    // b went alone; c and d, asked for meanwhile, in the next fetch together.
    expect(connections() - before).toBe(2);
    // Asked for in one turn (results read by one query): one fetch for all three.
    const again = connections();
    expect(await Promise.all([fetches.fetch('b'), fetches.fetch('c'), fetches.fetch('d')])).toEqual([b1, c1, d1]);
    expect(connections() - again).toBe(1);
    expect(await testGit(fx.repo, 'rev-parse', 'refs/tron/fetched-work/d')).toBe(d);
  });

  it('fetches each alone when one of a group is not on the remote, and says which has no work', async () => {
    const { fx, work } = await setup();
    const fetches = new WorkFetches(fx.repo, fx.remote!);
    const [b1, none, b2] = await Promise.all([fetches.fetch('b'), fetches.fetch('nothing'), fetches.fetch('b')]);
    expect(b1).toEqual({ ok: true, sha: work });
    expect(none).toEqual({ ok: true, sha: undefined });
    expect(b2).toEqual({ ok: true, sha: work });
  });
});
