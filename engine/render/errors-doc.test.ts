import { describe, expect, it } from 'vitest';
import { PROBLEM_AREAS, PROBLEM_CODES, PROBLEMS, type ProblemArea } from '../core/problems.ts';
import { ERRORS_DOC_BANNER, renderErrorsDoc } from './errors-doc.ts';

const AREAS = Object.keys(PROBLEM_AREAS) as ProblemArea[];

/** The text of one area's section. */
function section(doc: string, area: ProblemArea): string {
  const start = doc.indexOf(`\n## ${PROBLEM_AREAS[area]}\n`);
  expect(start, area).toBeGreaterThan(0);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

describe('docs/ERRORS.md', () => {
  const doc = renderErrorsDoc();
  const lines = doc.split('\n');

  it('opens with the generator banner and is the same on every call', () => {
    expect(lines[0]).toBe(ERRORS_DOC_BANNER);
    expect(ERRORS_DOC_BANNER).toContain('engine/render/errors-doc.ts');
    expect(ERRORS_DOC_BANNER).toContain('engine/core/problems.ts');
    expect(ERRORS_DOC_BANNER).toContain('do not edit');
    expect(ERRORS_DOC_BANNER).toContain('`tron docs`');
    expect(renderErrorsDoc()).toBe(doc);
  });

  it('explains the exit statuses and that the code also appears in the event log', () => {
    expect(doc).toContain('(exit 2)');
    expect(doc).toContain('exit 1');
    expect(doc).toContain('Nothing was changed');
    expect(doc).toContain('`run.finished`');
  });

  it('shows a real problem line as its example', () => {
    expect(doc).toMatch(/^TRON_CYCLE: \.tron\/blocks\/b\.md: depends_on: blocks a → b → a depend on each other; /m);
  });

  it('has one section per area, in table order', () => {
    const headings = [...doc.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings).toEqual(AREAS.map((a) => PROBLEM_AREAS[a]));
  });

  it('has exactly one row per code, in its area, with its kind, summary and fix', () => {
    for (const code of PROBLEM_CODES) {
      const rows = lines.filter((l) => l.startsWith(`| \`${code}\` |`));
      expect(rows, code).toHaveLength(1);
      const { area, kind, summary, fix } = PROBLEMS[code];
      expect(rows[0]).toBe(`| \`${code}\` | ${kind} | ${summary} | ${fix} |`);
      expect(section(doc, area)).toContain(rows[0]);
    }
    expect(lines.filter((l) => /^\| `TRON_/.test(l))).toHaveLength(PROBLEM_CODES.length);
  });
});
