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
  it('sends the asks of one turn together, and every ask made while that is in flight together in the next', async () => {
    const { c, rounds, ends } = manual();
    const first = [c.ask('a'), c.ask('b')];
    await tick();
    const later = [c.ask('b'), c.ask('c')];
    await tick();
    const last = c.ask('d');
    await tick();
    expect(rounds).toEqual([['a', 'b']]);
    ends[0]!();
    expect(await Promise.all(first)).toEqual(['a@1', 'b@1']);
    await tick();
    expect(rounds).toEqual([
      ['a', 'b'],
      ['b', 'c', 'd'],
    ]);
    ends[1]!();
    expect(await Promise.all([...later, last])).toEqual(['b@2', 'c@2', 'd@2']);
  });

  it('answers every ask of a failed round trip with its failure, and goes on with the next', async () => {
    const { c, rounds, ends } = manual();
    const first = c.ask('a');
    await tick();
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
