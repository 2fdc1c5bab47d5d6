/** Issue intake, purely: ids, criteria, dependencies and refusals from an issue alone. */
import { describe, expect, it } from 'vitest';
import type { ForgeIssue } from './forge.ts';
import { criteriaOf, dependsOf, issueBlockId, issueRef, issueToBlock, resolveDependencies } from './intake.ts';

function issue(number: number, title: string, body: string): ForgeIssue {
  return { number, title, body, labels: ['tron'], state: 'open', url: `https://github.example/acme/app/issues/${number}`, author: 'ada' };
}

describe('issue intake', () => {
  it('names a block gh-<number>-<slug of the title> (gl- for a GitLab issue), at most 63 characters, and gh-<number> for a title without words', () => {
    expect(issueBlockId(12, 'Add a login endpoint!')).toBe('gh-12-add-a-login-endpoint');
    expect(issueBlockId(12, 'Add a login endpoint!', 'gl')).toBe('gl-12-add-a-login-endpoint');
    expect(issueBlockId(7, '¿¿??')).toBe('gh-7');
    const long = issueBlockId(123456, 'x'.repeat(200));
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^[a-z0-9][a-z0-9-]{0,62}$/);
  });

  it('names a Linear issue lin-<team>-<number>-<slug>, and its brief names it as Linear does (ENG-12)', () => {
    const linear = {
      ...issue(12, 'Fix login', 'Users are logged out.\n\n- [ ] a session lasts a day'),
      url: 'https://linear.app/acme/issue/ENG-12',
    };
    const x = issueToBlock(linear, 'lin-eng');
    expect('block' in x && x.block).toMatchObject({ id: 'lin-eng-12-fix-login', criteria: ['a session lasts a day'] });
    expect('block' in x && x.block.brief).toContain('(From issue ENG-12: https://linear.app/acme/issue/ENG-12)');
    expect(issueRef(12, 'gl')).toBe('#12');
    const vague = issueToBlock({ ...linear, body: 'Make it nicer.' }, 'lin-eng');
    expect('problems' in vague && vague.problems).toEqual([expect.stringContaining('no acceptance criteria')]);
  });

  it('takes the criteria from the task list, checked or not', () => {
    expect(
      criteriaOf('Brief.\n\n- [ ] POST /login returns a token\n- [x] invalid credentials get 401\n* [ ] logs nothing secret\n'),
    ).toEqual(['POST /login returns a token', 'invalid credentials get 401', 'logs nothing secret']);
  });

  it('takes the criteria from a Criteria section when there is no task list, up to the next heading', () => {
    const body = 'Why.\n\n## Acceptance criteria\n\n- one\n1. two\n\n## Notes\n- not a criterion\n';
    expect(criteriaOf(body)).toEqual(['one', 'two']);
    expect(criteriaOf('**Criteria:**\n- bold heading works\n')).toEqual(['bold heading works']);
  });

  it('reads depends on #N lines, several on one line too', () => {
    expect(dependsOf('depends on #3\nDepends on #4, #5 and #6\nmentions #9')).toEqual([3, 4, 5, 6]);
  });

  it('makes a block of a good issue: title, body as the brief with the issue named, criteria', () => {
    const x = issueToBlock(issue(12, 'Add login', 'Do it well.\n\n- [ ] it works'));
    expect('block' in x && x.block).toMatchObject({ id: 'gh-12-add-login', title: 'Add login', criteria: ['it works'], priority: 0 });
    expect('block' in x && x.block.brief).toContain('From issue #12');
  });

  it('refuses an issue without criteria, saying how to add them', () => {
    const x = issueToBlock(issue(3, 'Vague', 'Make it better.'));
    expect('problems' in x && x.problems.join()).toMatch(/task list/);
  });

  it('resolves dependencies: to the block of a taken issue, dropped for a closed one, refused for an unlabelled one, and refuses cycles', () => {
    const items = [
      issueToBlock(issue(1, 'base', '- [ ] a')),
      issueToBlock(issue(2, 'top', '- [ ] b\n\ndepends on #1\ndepends on #50')),
      issueToBlock(issue(3, 'orphan', '- [ ] c\n\ndepends on #60')),
      issueToBlock(issue(4, 'loop a', '- [ ] d\n\ndepends on #5')),
      issueToBlock(issue(5, 'loop b', '- [ ] e\n\ndepends on #4')),
      issueToBlock(issue(6, 'after orphan', '- [ ] f\n\ndepends on #3')),
    ];
    const out = resolveDependencies(items, new Set([50]), 'tron');
    const of = (n: number) => out.find((x) => x.issue.number === n)!;
    const problems = (n: number) => {
      const x = of(n);
      return 'problems' in x ? x.problems.join('\n') : '';
    };
    const x2 = of(2);
    expect('block' in x2 && x2.block.dependsOn).toEqual(['gh-1-base']);
    expect(problems(3)).toMatch(/#60, which is not an open issue labelled `tron`/);
    expect(problems(4)).toMatch(/cycle/);
    expect(problems(5)).toMatch(/cycle/);
    expect(problems(6)).toMatch(/#3, which tron cannot start either/);
  });
});
