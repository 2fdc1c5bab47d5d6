/**
 * `tron sim [TEMPLATE...] [--coverage] [--record] [--keep]`: run the SIM evaluation
 * templates (all of evaluation/templates/, or those named), one row per template as it
 * finishes, then a summary. Exit 0 only when every template passed — and, with
 * --coverage, every spine transition and escalation row was reached by a passing one.
 * --record writes the passing templates' runs as golden runs under runs/.
 */
import { coverage, renderCoverage } from '../../evaluation/coverage.ts';
import { failureDetail, header, row, runTemplates, summary } from '../../evaluation/harness.ts';
import { RUNS_DIR } from '../../evaluation/golden.ts';
import { selectTemplates, TEMPLATES_DIR } from '../../evaluation/template.ts';
import { loadSpine } from '../spine/load.ts';

export interface SimOptions {
  templates: string[];
  coverage?: boolean;
  record?: boolean;
  keep?: boolean;
  print: (line: string) => void;
  /** Where templates are looked up by name (tests). */
  templatesDir?: string;
  /** Where --record writes (tests). */
  runsDir?: string;
}

export async function simCommand(o: SimOptions): Promise<number> {
  const templates = selectTemplates(o.templates, o.templatesDir ?? TEMPLATES_DIR);
  const started = Date.now();
  o.print(header());
  const results = await runTemplates(templates, {
    keep: Boolean(o.keep),
    ...(o.record ? { recordTo: o.runsDir ?? RUNS_DIR } : {}),
    onResult: (r) => o.print(row(r)),
  });
  for (const r of results.filter((x) => !x.pass)) o.print(`\n${failureDetail(r)}`);
  if (o.record) {
    const recorded = results.filter((r) => r.recorded.length > 0).length;
    const skipped = results.filter((r) => !r.pass).map((r) => r.name);
    o.print(
      `\nrecorded ${recorded} golden run(s) under ${o.runsDir ?? RUNS_DIR}${skipped.length ? `; not recorded (failing): ${skipped.join(', ')}` : ''}`,
    );
  }
  let complete = true;
  if (o.coverage) {
    // Only passing templates count: an edge reached by a failing scenario is not shown to work.
    const c = coverage(
      loadSpine(),
      results.filter((r) => r.pass).map((r) => ({ name: r.name, events: r.runs.flatMap((x) => x.events) })),
    );
    o.print(`\n${renderCoverage(c)}${o.templates.length > 0 ? ' (of the templates named only)' : ''}`);
    complete = c.complete;
  }
  o.print(`\n${summary(results, Date.now() - started)}`);
  return results.every((r) => r.pass) && complete ? 0 : 1;
}
