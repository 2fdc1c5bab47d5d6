/**
 * The engine's own checkouts: warming them at start only makes those not there — a `_lane` an earlier engine left (a crash, then a standby's
 * start) may be in use by the first stack before the warming reaches it.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRepo, type TestRepo } from '../../testing/repo.ts';
import { CheckoutPool, checkout, warmCheckouts, type CheckoutContext } from './checkouts.ts';
import { Queues } from './slots.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

async function twoCommits(): Promise<{ repo: TestRepo; first: string; second: string; c: CheckoutContext }> {
  const repo = await makeRepo({ 'a.txt': 'one\n' });
  repos.push(repo);
  const first = await repo.git('rev-parse', 'HEAD');
  await repo.write('a.txt', 'two\n');
  await repo.git('commit', '-qam', 'two');
  const second = await repo.git('rev-parse', 'HEAD');
  const c = { repo: repo.dir, queues: new Queues(), checkouts: new CheckoutPool() } as unknown as CheckoutContext;
  return { repo, first, second, c };
}

describe("the engine's checkouts", () => {
  it('leaves a checkout that is there already where its user put it when the warming at start reaches it', async () => {
    const { repo, first, second, c } = await twoCommits();
    // The first stack's test run holds `_lane` at its sha, with what the suite wrote so far.
    const lane = await checkout(c, '_lane', second);
    writeFileSync(join(lane, 'build-output.txt'), 'half a test run\n');
    await warmCheckouts(c, 1, first);
    expect(await repo.at(lane).git('rev-parse', 'HEAD')).toBe(second);
    expect(existsSync(join(lane, 'build-output.txt'))).toBe(true);
    // A checkout not there yet is made, at trunk.
    expect(await repo.at(join(repo.dir, '.tron', 'worktrees', '_check-1')).git('rev-parse', 'HEAD')).toBe(first);
  });
});
