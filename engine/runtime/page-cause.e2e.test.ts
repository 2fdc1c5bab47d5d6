import { describe, expect, it } from 'vitest';
import { statusCommand } from '../commands/status.ts';
import { systemClock } from '../os/clock.ts';
import { configFile, ofType, project, readRunFile, runTron } from '../testing/project.ts';

/** The test a builder keeps committing: red, with an assertion of its own words. */
const RED = "require('node:assert').strictEqual(1 + 1, 3, 'the sum of the invoice lines is its total');\n";

describe("a parked block's page", () => {
  it("carries the failing test's own lines, not only the trouble's name, when the architect pages", async () => {
    const sim = [1, 2, 3]
      .map(
        (n) =>
          `[[blocks.sum.builder]]\nwrite = { "tests/sum${n}.test.js" = ${JSON.stringify(RED)} }\ncommit = "sum ${n}"\nreply = ">>DONE"\n`,
      )
      .join('\n');
    const config = configFile({ extra: '\n[workers.architect]\nadapter = "sim"\nscript = ".tron/sim.toml"\n' });
    const repo = await project({ blocks: { sum: {} }, sim, config });
    const run = await runTron(repo);
    expect(run.exit, run.output.join('\n')).toBe(3);
    // The sim architect has no script for the block: it pages, and the page says what it was asked about.
    const page = ofType(run.events, 'page.sent')[0]!;
    expect(page.reason).toContain('the sim architect has no script for sum');
    expect(page.reason).toContain('the sum of the invoice lines is its total');
    const pages = readRunFile(run.runDir, 'pages.md');
    expect(pages).toContain('the sum of the invoice lines is its total');
    // Quoted as a block: no line of the output opens a page heading of its own.
    expect(pages.match(/^## /gm)).toHaveLength(1);
    const lines: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: systemClock, print: (l) => lines.push(l) });
    expect(lines.join('\n')).toContain('the sum of the invoice lines is its total');
  }, 120_000);
});
