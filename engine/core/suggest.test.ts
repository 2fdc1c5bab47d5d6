import { describe, expect, it } from 'vitest';
import { didYouMean, editDistance, suggest } from './suggest.ts';

describe('editDistance', () => {
  it('counts a swapped pair of letters as one edit, like a wrong, missing or extra letter', () => {
    expect(editDistance('strat', 'start')).toBe(1);
    expect(editDistance('--wacth', '--watch')).toBe(1);
    expect(editDistance('stat', 'start')).toBe(1);
    expect(editDistance('statuss', 'status')).toBe(1);
    expect(editDistance('init', 'init')).toBe(0);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('launch', 'start')).toBeGreaterThan(2);
  });
});

describe('suggest', () => {
  const commands = ['init', 'start', 'status', 'answer', 'report', 'replay', 'clean', 'demo'];

  it('offers the nearest name for a typo, and nothing for a word that is not near any', () => {
    expect(suggest('strat', commands)).toEqual(['start']);
    expect(suggest('replya', commands)).toEqual(['replay']);
    expect(suggest('anwser', commands)).toEqual(['answer']);
    expect(suggest('launch', commands)).toEqual([]);
    expect(suggest('x', commands)).toEqual([]);
  });

  it('offers every name a typed prefix begins', () => {
    expect(suggest('re', commands)).toEqual(['report', 'replay']);
    expect(suggest('stat', commands)).toEqual(['start', 'status']);
  });

  it('says it as a sentence tail, or says nothing', () => {
    expect(didYouMean('--wacth', ['--repo', '--watch', '--help'])).toBe('; did you mean --watch?');
    expect(didYouMean('stat', commands)).toBe('; did you mean start or status?');
    expect(didYouMean('zzz', commands)).toBe('');
  });
});
