import { describe, expect, it } from 'vitest';
import { abandonedEarlierLine } from './abandoned-earlier.ts';

describe('what a run says of the blocks an earlier run abandoned', () => {
  it('says nothing when there are none', () => {
    expect(abandonedEarlierLine([])).toBeUndefined();
  });

  it('names every such block in one line, with its reason and the file to delete or move', () => {
    expect(
      abandonedEarlierLine([{ block: 'login', reason: 'out of scope\nmore words', file: '.tron/blocks/login.md' }, { block: 'export' }]),
    ).toBe(
      'tron: login (out of scope) and export were abandoned in an earlier run, and every `tron start` exits 3 while they stay in the register: ' +
        'delete or move .tron/blocks/login.md and .tron/blocks/export.md (a block file under a new name is a new block: it is built again)',
    );
  });

  it('sends a block taken in from an issue to its issue, which leaves the register once closed', () => {
    expect(abandonedEarlierLine([{ block: 'gh-7-dark-mode', reason: 'no', file: 'https://github.com/o/r/issues/7' }])).toBe(
      'tron: gh-7-dark-mode (no) was abandoned in an earlier run, and every `tron start` exits 3 while it stays in the register: ' +
        'close its issue, https://github.com/o/r/issues/7',
    );
  });
});
