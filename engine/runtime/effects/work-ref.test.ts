/**
 * A block's work ref on the remote (`refs/tron/work/<id>`, turns on agents) goes when the
 * block is abandoned, lands or begins a new attempt — against a real `git daemon` — and is
 * left alone when turns run in the engine's own process.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../os/clock.ts';
import { openRemote } from '../../git/remote.ts';
import { makeBareRemote, serveDaemon } from '../../testing/remote-server.ts';
import { makeRepo } from '../../testing/repo.ts';
import { type EffectContext, Queues } from './context.ts';
import { prepareWorktree } from './worktree.ts';
import { TurnTable } from './turn-table.ts';
import { abandonBlock, dropWorkRef } from './work-ref.ts';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A served bare remote holding `refs/tron/work/alpha`, a clone, and an effect context on it with `jobs`. */
async function setup(jobs: 'agents' | 'here') {
  const bare = await makeBareRemote();
  cleanups.push(() => bare.cleanup());
  const pushes: string[] = [];
  const served = await serveDaemon(bare, { onService: (service) => service === 'git-receive-pack' && pushes.push(service) });
  cleanups.push(() => served.stop().catch(() => undefined));
  const r = await makeRepo({ 'a.txt': 'a\n' });
  cleanups.push(() => r.cleanup());
  await r.git('push', '-q', bare.dir, 'main', 'main:refs/tron/work/alpha');
  await r.git('remote', 'add', 'origin', served.url);
  const remote = await openRemote(r.dir, { name: 'origin', trunk: 'main', timeoutMs: 30_000 });
  const printed: string[] = [];
  const turns = new TurnTable(systemClock, () => undefined);
  const c = {
    repo: r.dir,
    remote,
    config: { trunk: 'main', cluster: { jobs } },
    print: (line: string) => printed.push(line),
    turns,
    queues: new Queues(),
  } as unknown as EffectContext;
  const works = async () => (await bare.git('for-each-ref', '--format=%(refname)', 'refs/tron/work/')).split('\n').filter(Boolean);
  return { c, printed, turns, works, r, bare, pushes };
}

describe('a block’s work ref on the remote', () => {
  it('is deleted when the block is abandoned, and its turns stop', async () => {
    const { c, printed, turns, works } = await setup('agents');
    const signal = turns.start('alpha', 'alpha.1.builder', 1);
    const other = turns.start('beta', 'beta.1.builder', 1);
    await abandonBlock.run(c, { type: 'block.abandoned', block: 'alpha', reason: 'no', v: 1, seq: 9, ts: 0 });
    expect(await works()).toEqual([]);
    expect([signal.aborted, other.aborted]).toEqual([true, false]);
    expect(printed).toEqual([]);
  });

  it('goes with the work refs of the blocks that start together in two pushes at most, not one each', async () => {
    const { c, printed, works, r, bare, pushes } = await setup('agents');
    const ids = ['b1', 'b2', 'b3', 'b4', 'b5', 'b6'];
    await r.git('push', '-q', bare.dir, ...ids.map((id) => `main:refs/tron/work/${id}`));
    // Six asked at once, as six blocks' worktrees are: the first goes alone, the rest in the next push.
    await Promise.all([...ids, 'never-there'].map((id) => dropWorkRef(c, id)));
    expect(await works()).toEqual(['refs/tron/work/alpha']);
    expect(pushes.length).toBeLessThanOrEqual(2);
    expect(printed).toEqual([]);
  });

  it('is deleted once, a second deletion of a ref no longer there being no failure', async () => {
    const { c, printed, works } = await setup('agents');
    await dropWorkRef(c, 'alpha');
    await dropWorkRef(c, 'alpha');
    expect(await works()).toEqual([]);
    expect(printed).toEqual([]);
  });

  it('is deleted when the engine begins a new attempt of the block, which starts at its base', async () => {
    const { c, printed, works, r } = await setup('agents');
    const base = await r.git('rev-parse', 'HEAD');
    const ready = await prepareWorktree.run(c, { type: 'worktree.requested', block: 'alpha', attempt: 2, base, v: 1, seq: 3, ts: 0 });
    expect(ready).toMatchObject({ type: 'worktree.ready', block: 'alpha', attempt: 2, base });
    expect(await works()).toEqual([]);
    expect(printed).toEqual([]);
  });

  it('is left alone when turns run in the engine’s own process', async () => {
    const { c, works } = await setup('here');
    await dropWorkRef(c, 'alpha');
    expect(await works()).toEqual(['refs/tron/work/alpha']);
  });
});
