import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { runTemplates, failureDetail, type TemplateResult } from './harness.ts';
import { selectTemplates } from './template.ts';
import { coverage, unreached } from './coverage.ts';
import { loadSpine } from '../engine/spine/load.ts';

/**
 * The suite's guard: every SIM template, run as `tron sim` runs it, meets its
 * expectation, and together the passing ones reach every transition of the spine and
 * every row of the escalation table.
 */
const templates = selectTemplates([]);
let results: TemplateResult[] = [];

// Every template, two at a time: about a minute on a quiet machine, past five at load 19.
// Each template has its own timeout; this one only bounds the whole.
beforeAll(async () => {
  results = await runTemplates(templates);
}, 900_000);

afterAll(() => {
  for (const r of results) if (r.kept) rmSync(r.repo, { recursive: true, force: true });
});

describe('tron sim', () => {
  for (const t of templates) {
    it(`${t.name}: ${t.title}`, () => {
      const r = results.find((x) => x.name === t.name)!;
      expect(r.differences, failureDetail(r)).toEqual([]);
    });
  }

  it('reaches every spine transition and every escalation row with a passing template', () => {
    const passing = results.filter((r) => r.pass).map((r) => ({ name: r.name, events: r.runs.flatMap((x) => x.events) }));
    expect(unreached(coverage(loadSpine(), passing))).toEqual([]);
  });
});
