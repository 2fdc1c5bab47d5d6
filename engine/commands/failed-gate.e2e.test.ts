/**
 * A gate that fails on `node --test`, told as a user and the builder meet it: the
 * failing test's own assertion — not only the runner's counts, which are all its last
 * lines hold — on the console, in `tron logs` (the run's story and the block's turns),
 * in the run's report.md, and in the builder's next prompt.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { logsCommand } from './logs.ts';
import { makeProject, ofType, readRunFile, runTron } from '../testing/project.ts';
import { commandConfig, writeBuilder } from '../testing/workers.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** The assertion node:assert makes of the failing test, as TAP's YAML carries it. */
const ASSERTION = 'Expected values to be strictly deep-equal';

/** A test file with one failing test and twenty passing ones after it: the failure is far above the last lines. */
const FAILING = `const test = require('node:test');
const assert = require('node:assert');
test('the port comes from the config', () => { assert.deepStrictEqual({ port: 80 }, { port: 8080 }); });
for (let i = 1; i <= 20; i++) test('check ' + i + ' passes', () => {});
`;
const FIXED = FAILING.replace('{ port: 80 }, { port: 8080 }', '{ port: 8080 }, { port: 8080 }');

describe('a gate that fails on node --test', () => {
  it("shows the failing test's assertion on the console, in tron logs, in the report and in the builder's next prompt", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-red-gate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'failing.js'), FAILING);
    writeFileSync(join(dir, 'fixed.js'), FIXED);
    // The first build commits the red test; the next, told why, fixes it. Each build's prompt is kept.
    const builder = writeBuilder(
      dir,
      `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"the port test passes"}}'; exit 0 ;;
esac
n=$(ls "${dir}" | grep -c '^build-prompt-')
printf '%s' "$prompt" > "${dir}/build-prompt-$n.md"
if [ "$n" = 0 ]; then cp "${dir}/failing.js" tests/port.test.js; else cp "${dir}/fixed.js" tests/port.test.js; fi
git add -A && git commit -qm "port test $n" && echo '>>DONE'
`,
    );
    // TAP by name, and the files by the shell's glob: from Node 22 a directory argument is a pattern that matches no
    // file, and from Node 23 a plain `node --test` prints the spec reporter to a pipe (tron reads both; this test reads TAP).
    const config = commandConfig(builder).replace('test = "node test.js"', 'test = "node --test --test-reporter=tap tests/*.test.js"');
    const repo = await makeProject({
      blocks: { port: {} },
      config,
      files: { 'tests/smoke.test.js': "require('node:test')('smoke', () => {});\n" },
    });
    cleanups.push(() => repo.cleanup());

    const run = await runTron(repo, { env: {} });

    expect(run.exit, run.output.join('\n')).toBe(0);
    expect(ofType(run.events, 'gate.failed').map((e) => e.facts.filter((f) => !f.ok).map((f) => f.name))).toEqual([['tests']]);
    const observed = ofType(run.events, 'facts.observed').find((e) => e.tests && e.tests.exit !== 0)!;
    const log = join(run.runDir, observed.tests!.log);
    // What the gate showed before: the last lines of the output, only passing checks and the counts.
    expect(readFileSync(log, 'utf8').split('\n').slice(-20).join('\n')).not.toContain(ASSERTION);

    // The console line: the failing test, its assertion and values, the counts, the log.
    const console = run.output.join('\n');
    const red = console.slice(console.indexOf('port: gate failed — tests'), console.indexOf('port: build → build'));
    expect(red).toMatch(/^[\d:]+ {5}not ok \d+ - the port comes from the config$/m);
    expect(red).toContain(ASSERTION);
    expect(red).toMatch(/^[\d:]+ {5}# fail 1$/m);
    expect(red).toContain(`log: ${log}`);
    expect(red).not.toContain('check 20 passes');
    expect(console).toContain('tests: the test command exited 1 in a clean checkout of');
    expect(console).toContain('(only committed files count); the failing tests:');

    // tron logs: the run's story, and the block's turns with the failed gate between them.
    const story: string[] = [];
    await logsCommand({ repo: repo.dir, print: (l) => story.push(l), write: () => {} });
    expect(story.join('\n')).toContain(ASSERTION);
    const turns: string[] = [];
    await logsCommand({ repo: repo.dir, block: 'port', print: (l) => turns.push(l), write: (t) => turns.push(t) });
    const text = turns.join('\n');
    const gate = text.indexOf('── port · gate failed ·');
    expect(gate).toBeGreaterThan(text.indexOf('── port · builder · build · port.1.builder turn 1'));
    expect(gate).toBeLessThan(text.indexOf('── port · builder · build · port.1.builder turn 2'));
    expect(text.slice(gate)).toContain(ASSERTION);

    // The report: the failed run with its failing test and its log.
    const report = readRunFile(run.runDir, 'report.md');
    const section = report.slice(report.indexOf('## Failed test runs'));
    expect(section).toMatch(
      /^- seq \d+, port at [0-9a-f]{12}: the tests exited 1; the failing tests \(log: tests\/port-gate-[0-9a-f]{12}\.log\):$/m,
    );
    expect(section).toMatch(/^ {2}not ok \d+ - the port comes from the config$/m);
    expect(section).toContain(ASSERTION);

    // The builder's next prompt carries the failing test's own lines.
    const prompts = readdirSync(dir)
      .filter((f) => f.startsWith('build-prompt-'))
      .sort();
    expect(prompts).toEqual(['build-prompt-0.md', 'build-prompt-1.md']);
    const next = readFileSync(join(dir, 'build-prompt-1.md'), 'utf8');
    expect(next).toContain('not ok 1 - the port comes from the config');
    expect(next).toContain(ASSERTION);
    expect(next).toContain('port: 8080');
  });
});
