import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { needProgram, requireAll, skipWithout } from '../testing/needs.ts';
import { failureExcerpt, lastLines, readTestFailures, runOutput, type TestRunner } from './test-output.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder holding `files`, removed after the test. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-runner-'));
  dirs.push(dir);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

/** What `command` prints in `cwd`, stdout and stderr in one stream, as tron's test run records it. */
function output(command: string, cwd: string, env: Record<string, string> = {}): string {
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LANG: 'C.UTF-8', TERM: 'xterm', CI: 'true' };
  const run = spawnSync('/bin/sh', ['-c', `${command} 2>&1`], { cwd, env: { ...base, ...env }, encoding: 'utf8', timeout: 240_000 });
  expect(run.status, run.stdout).not.toBe(0);
  return run.stdout;
}

const recorded = (name: string) => readFileSync(new URL(`../testing/test-output/${name}`, import.meta.url), 'utf8');
const VITEST = new URL('../../node_modules/.bin/vitest', import.meta.url).pathname;
// The live runs of pytest and cargo: where one is missing they skip, with a line naming its install command (CI fails instead).
const PYTEST = needProgram('pytest', 'apt-get install -y python3-pytest', { names: ['pytest', 'pytest-3'] });
const CARGO = needProgram('cargo', 'apt-get install -y cargo');
const NO_PYTEST = skipWithout('the live pytest run', PYTEST);
const NO_CARGO = skipWithout('the live cargo test run', CARGO);

/**
 * What every runner's excerpt must hold of the sample: the failing assertion (the port
 * from the config: 80, not 8080), the error thrown in the other failing test, the summary;
 * and nothing of the passing test.
 */
function expectTheFailures(out: string, runner: TestRunner, summary: RegExp): string {
  expect(readTestFailures(out).map((f) => f.runner)).toEqual([runner]);
  const excerpt = failureExcerpt(out)!;
  expect(excerpt).toBeDefined();
  expect(excerpt).toMatch(/8080/);
  expect(excerpt).toMatch(/80/);
  expect(excerpt).toContain('boom inside');
  expect(excerpt).toMatch(summary);
  expect(excerpt).not.toMatch(/\badds\b/);
  expect(excerpt).not.toContain('\u001b[');
  // Read again it gives itself back: the console and the report cut the recorded excerpt to their size.
  expect(failureExcerpt(excerpt)).toBe(excerpt);
  return excerpt;
}

const NODE_SAMPLE = {
  'a.test.js': `const test = require('node:test');
const assert = require('node:assert');
test('adds numbers', () => { assert.strictEqual(1 + 1, 2); });
test('parses the config', () => { assert.deepStrictEqual({ port: 80 }, { port: 8080 }); });
test('group', async (t) => {
  await t.test('inner passes', () => {});
  await t.test('inner fails', () => { throw new Error('boom inside'); });
});
`,
};

describe("a failed run's failing tests, read from a real run of each runner", () => {
  it('node --test (TAP): each not ok with its YAML diagnostics, not the parent that failed only by its subtest, then the counts', () => {
    // TAP by name: a plain `node --test` prints TAP to a pipe up to Node 22, and the spec reporter from Node 23 on.
    const out = output('node --test --test-reporter=tap', project(NODE_SAMPLE));
    const excerpt = expectTheFailures(out, 'tap', /^# fail 3$/m);
    expect(excerpt).toMatch(/^not ok \d+ - parses the config$/m);
    expect(excerpt).toContain('Expected values to be strictly deep-equal');
    expect(excerpt).toMatch(/^\s+not ok \d+ - inner fails$/m);
    expect(excerpt).not.toMatch(/not ok \d+ - group/);
    expect(excerpt).not.toContain('node:internal');
    expect(excerpt).not.toContain('duration_ms');
    // The last 30 lines, what the gate showed before, hold the counts and not the assertion.
    expect(lastLines(out, 30)).not.toContain('Expected values to be strictly deep-equal');
  });

  it("node --test with the spec reporter: the 'failing tests' section, then the counts", () => {
    const out = output('node --test --test-reporter=spec', project(NODE_SAMPLE));
    const excerpt = expectTheFailures(out, 'node-spec', /^ℹ fail 3$/m);
    expect(excerpt).toMatch(/^✖ failing tests:$/m);
    expect(excerpt).toMatch(/^✖ parses the config/m);
    expect(excerpt).toMatch(/^✖ inner fails/m);
  });

  it('vitest: each FAIL block of its Failed Tests section without the code frame, then Test Files and Tests', () => {
    const dir = project({
      'package.json': '{"type":"module"}\n',
      'math.test.js': `import { describe, expect, it } from 'vitest';
describe('math', () => {
  it('adds', () => { expect(1 + 1).toBe(2); });
  it('parses the config', () => { expect({ port: 80 }).toEqual({ port: 8080 }); });
});
it('group inner fails', () => { throw new Error('boom inside'); });
`,
    });
    const out = output(`${VITEST} run --root ${dir}`, dir);
    const excerpt = expectTheFailures(out, 'vitest', /^\s*Tests\s+2 failed \| 1 passed \(3\)$/m);
    expect(excerpt).toMatch(/FAIL\s+math\.test\.js > math > parses the config/);
    expect(excerpt).toContain('AssertionError: expected { port: 80 } to deeply equal { port: 8080 }');
    expect(excerpt).not.toMatch(/^\s*\d+\|/m);
  });

  it.skipIf(NO_PYTEST)('pytest: each test of FAILURES by its > and E lines and its place, then the short summary', () => {
    requireAll(PYTEST);
    const dir = project({
      'test_calc.py': `def test_adds():
    assert 1 + 1 == 2

def test_parses_config():
    config = {"port": 80}
    assert config == {"port": 8080}

class TestGroup:
    def test_inner_fails(self):
        raise ValueError("boom inside")
`,
    });
    const out = output(`${PYTEST.path} -p no:cacheprovider`, dir);
    const excerpt = expectTheFailures(out, 'pytest', /^=+ 2 failed, 1 passed in [\d.]+s =+$/m);
    expect(excerpt).toMatch(/^E\s+AssertionError: assert \{'port': 80\} == \{'port': 8080\}$/m);
    expect(excerpt).toMatch(/^test_calc\.py:6: AssertionError$/m);
    expect(excerpt).toMatch(/^FAILED test_calc\.py::TestGroup::test_inner_fails - ValueError: boom inside$/m);
  });

  it.skipIf(NO_CARGO)('cargo test: each ---- stdout block with its panic, then test result', () => {
    requireAll(CARGO);
    const dir = project({
      'Cargo.toml': '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
      'src/lib.rs': `#[cfg(test)]
mod tests {
    #[test]
    fn adds() { assert_eq!(1 + 1, 2); }
    #[test]
    fn parses_the_config() { let port = 80; assert_eq!(port, 8080, "the port from the config"); }
    #[test]
    fn inner_fails() { panic!("boom inside"); }
}
`,
    });
    const out = output(`${CARGO.path} test --offline --quiet`, dir, {
      CARGO_TARGET_DIR: join(dir, 'target'),
      CARGO_HOME: process.env.CARGO_HOME ?? join(process.env.HOME ?? '', '.cargo'),
    });
    const excerpt = expectTheFailures(out, 'cargo', /^test result: FAILED\. 1 passed; 2 failed;/m);
    expect(excerpt).toMatch(/^---- tests::parses_the_config stdout ----$/m);
    expect(excerpt).toMatch(/^assertion `left == right` failed: the port from the config$/m);
  });
});

describe("a failed run's failing tests, read from recorded output (engine/testing/test-output/)", () => {
  it.each([
    ['node-tap.txt', 'tap', /^# fail 3$/m],
    ['node-spec.txt', 'node-spec', /^ℹ fail 3$/m],
    ['vitest.txt', 'vitest', /Tests\s+2 failed \| 1 passed \(3\)/],
    ['jest.txt', 'jest', /^Tests:\s+2 failed, 1 passed, 3 total$/m],
    ['pytest.txt', 'pytest', /^=+ 2 failed, 1 passed in 0\.99s =+$/m],
    ['go.txt', 'go', /^FAIL\texample\.com\/calc\t0\.002s$/m],
    ['cargo.txt', 'cargo', /^test result: FAILED\. 1 passed; 2 failed;/m],
  ] as const)('%s: the failing assertion and the thrown error, then the summary', (file, runner, summary) => {
    const excerpt = expectTheFailures(recorded(file), runner, summary);
    expect(excerpt.split('\n').length).toBeLessThanOrEqual(40);
  });

  it('jest: each ● block without the code frame, with its place', () => {
    const excerpt = failureExcerpt(recorded('jest.txt'))!;
    expect(excerpt).toMatch(/^\s+● math › parses the config$/m);
    expect(excerpt).toMatch(/^\s+-\s+"port": 8080,$/m);
    expect(excerpt).toMatch(/at Object\.toEqual \(calc\.test\.js:3:58\)/);
    expect(excerpt).not.toMatch(/\|\s+test\(/);
  });
});

describe('the excerpt', () => {
  it('fits the room it is given: the first failure at least, a line saying how many more, then the whole summary', () => {
    const excerpt = failureExcerpt(recorded('node-tap.txt'), 12)!;
    const lines = excerpt.split('\n');
    expect(lines.length).toBeLessThanOrEqual(12);
    expect(lines[0]).toBe('not ok 2 - parses the config');
    expect(excerpt).toContain('… and 1 more failing test(s): see the log');
    expect(lines.slice(-4)).toEqual(['# tests 6', '# pass 2', '# fail 3', '# todo 1']);
    // Cut again, the count of those left out is kept.
    expect(failureExcerpt(excerpt, 8)).toContain('… and 1 more failing test(s): see the log');
  });

  it('says nothing of output no runner it knows printed, or of a passing run: the caller shows the last lines', () => {
    const thrown = 'node:assert:90\n  throw new AssertionError(obj);\n  ^\n\nAssertionError [ERR_ASSERTION]: 1 !== 2\n\nNode.js v20.20.2\n';
    expect(failureExcerpt(thrown)).toBeUndefined();
    expect(failureExcerpt('TAP version 13\nok 1 - adds\n1..1\n# tests 1\n# pass 1\n# fail 0\n')).toBeUndefined();
    expect(failureExcerpt('test result: ok. 3 passed; 0 failed; 0 ignored\n')).toBeUndefined();
    expect(lastLines('a\nb\nc', 2)).toBe('b\nc');
  });

  it('leaves out a TAP test marked TODO or SKIP', () => {
    const tap = 'not ok 1 - later # TODO not yet\nnot ok 2 - real\n  ---\n  error: broke\n  ...\n# fail 1\n';
    expect(failureExcerpt(tap)).toBe('not ok 2 - real\n  ---\n  error: broke\n  ...\n# fail 1');
  });

  it('is told as the failing tests when the run recorded them, and as the last lines by a run that did not (as every run before)', () => {
    expect(runOutput({ tail: '# pass 1\n# fail 1', failures: 'not ok 1 - x\n# fail 1' })).toBe(
      'the failing tests:\nnot ok 1 - x\n# fail 1',
    );
    expect(runOutput({ tail: 'not ok 1 - x\n# fail 1' })).toBe('last lines:\nnot ok 1 - x\n# fail 1');
  });
});
