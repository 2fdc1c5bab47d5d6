import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { byNumber, byString, SortedMap } from './sorted-map.ts';

type Op = { set: number; value: string } | { delete: number };

const ops = fc.array(
  fc.oneof(
    fc.record({ set: fc.integer({ min: 0, max: 40 }), value: fc.constantFrom('a', 'b', 'c') }),
    fc.record({ delete: fc.integer({ min: 0, max: 40 }) }),
  ),
  { maxLength: 120 },
);

function run(list: Op[]): { versions: SortedMap<number, string>[]; models: Map<number, string>[] } {
  let map = SortedMap.empty<number, string>(byNumber);
  const model = new Map<number, string>();
  const versions = [map];
  const models = [new Map(model)];
  for (const op of list) {
    if ('set' in op) {
      map = map.set(op.set, op.value);
      model.set(op.set, op.value);
    } else {
      map = map.delete(op.delete);
      model.delete(op.delete);
    }
    versions.push(map);
    models.push(new Map(model));
  }
  return { versions, models };
}

const sorted = (m: Map<number, string>) => [...m.entries()].sort(([a], [b]) => a - b);

describe('the persistent sorted map', () => {
  it('holds what a Map would, in key order, and every earlier version still holds what it did', () => {
    fc.assert(
      fc.property(ops, (list) => {
        const { versions, models } = run(list);
        versions.forEach((v, i) => {
          const want = sorted(models[i]!);
          expect([...v.entries()]).toEqual(want);
          expect(v.size).toBe(want.length);
          expect(v.first()).toEqual(want[0]);
          for (let k = 0; k <= 40; k += 1) {
            expect(v.get(k)).toBe(models[i]!.get(k));
            expect(v.has(k)).toBe(models[i]!.has(k));
          }
        });
      }),
    );
  });

  it('returns itself for a change that changes nothing', () => {
    const map = SortedMap.of<string, number>(
      [
        ['b', 1],
        ['a', 2],
      ],
      byString,
    );
    expect(map.set('a', 2)).toBe(map);
    expect(map.delete('c')).toBe(map);
    expect([...map.keys()]).toEqual(['a', 'b']);
  });

  it('stays balanced however keys arrive: a lookup among 100,000 keys set in order takes at most 1.44 log2 n comparisons', () => {
    let comparisons = 0;
    const counting = (a: number, b: number) => {
      comparisons += 1;
      return a - b;
    };
    let map = SortedMap.empty<number, number>(counting);
    for (let i = 0; i < 100_000; i += 1) map = map.set(i, i);
    for (let i = 0; i < 100_000; i += 3) map = map.delete(i);
    const bound = Math.ceil(1.44 * Math.log2(map.size + 2));
    let worst = 0;
    for (let i = 0; i < 100_000; i += 1) {
      comparisons = 0;
      map.get(i);
      worst = Math.max(worst, comparisons);
    }
    expect(worst).toBeLessThanOrEqual(bound);
    expect(map.size).toBe(66_666);
  });
});
