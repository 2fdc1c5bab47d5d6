import { describe, expect, it } from 'vitest';
import { Coalesced } from './coalesce.ts';

/** A coalescer whose round trips the test ends by hand, recording the keys of each. */
function manual() {
  const rounds: string[][] = [];
  const ends: Array<(fail?: Error) => void> = [];
  const c = new Coalesced<string, string>(
    (keys) =>
      new Promise((resolve, reject) => {
        rounds.push(keys);
        ends.push((fail) => (fail ? reject(fail) : resolve(new Map(keys.map((k) => [k, `${k}@${rounds.length}`])))));
      }),
    (error) => `failed: ${(error as Error).message}`,
  );
  return { c, rounds, ends };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('coalesced round trips', () => {
  it('sends the first ask at once and every ask made while it is in flight together in the next', async () => {
    const { c, rounds, ends } = manual();
    const first = c.ask('a');
    const later = [c.ask('b'), c.ask('c'), c.ask('b')];
    await tick();
    expect(rounds).toEqual([['a']]);
    ends[0]!();
    expect(await first).toBe('a@1');
    await tick();
    expect(rounds).toEqual([['a'], ['b', 'c']]);
    ends[1]!();
    expect(await Promise.all(later)).toEqual(['b@2', 'c@2', 'b@2']);
  });

  it('answers every ask of a failed round trip with its failure, and goes on with the next', async () => {
    const { c, rounds, ends } = manual();
    const first = c.ask('a');
    const second = c.ask('b');
    await tick();
    ends[0]!(new Error('remote down'));
    expect(await first).toBe('failed: remote down');
    await tick();
    expect(rounds).toEqual([['a'], ['b']]);
    ends[1]!();
    expect(await second).toBe('b@2');
  });
});
