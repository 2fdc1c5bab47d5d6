/**
 * What a failed test run says about its failures, read from its output: the failing tests'
 * own lines — the assertion, the expected and actual values, the place — and then the
 * runner's summary, instead of the last lines (which, for most runners, are only the
 * summary). Pure: text in, text out; the test run (engine/runtime/effects/testrun.ts) applies
 * it to the whole output and records the excerpt as the run's `failures`, and everything that
 * tells of a failed gate (the console, `tron logs`, the report, the builder's next prompt)
 * shows it, cut to its own room by the same function.
 *
 * The runners read, each by the lines that are its own (checked against real runs: Node's
 * test runner with its TAP and spec reporters, vitest, jest, pytest, go test, cargo test):
 * - TAP (`node --test`, tape, tap): each `not ok` line with its indented YAML diagnostics
 *   (a parent failing only because a subtest failed is left out), then `# tests`, `# pass`,
 *   `# fail` …;
 * - Node's spec reporter: the "✖ failing tests:" section, then `ℹ tests` …;
 * - vitest: the blocks of its "Failed Tests" (and "Failed Suites", "Unhandled Errors")
 *   section, then `Test Files` and `Tests`;
 * - jest: each `●` block, then `Test Suites:` and `Tests:`;
 * - pytest: each test of its FAILURES (and ERRORS) section — its heading, the `>` line, the
 *   `E` lines and the place — then the short summary and the last `=== … ===` line;
 * - go test: each `--- FAIL:` with the lines indented under it, a `panic:`, then the
 *   `FAIL`/`ok` package lines;
 * - cargo test: each `---- name stdout ----` block, then `test result:`.
 * Source-code frames, colour escapes and Node's internal stack frames are dropped.
 */

/** The runners whose failures are recognised. */
export type TestRunner = 'tap' | 'node-spec' | 'vitest' | 'jest' | 'pytest' | 'go' | 'cargo';

export interface TestFailures {
  runner: TestRunner;
  /** The runner's own heading of its failures, shown above them (so an excerpt reads as the runner's output again). */
  heading?: string;
  /** Each failing test's own lines. */
  failures: string[][];
  /** The runner's summary lines. */
  summary: string[];
}

const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;
const NODE_INTERNAL = /\(?node:(internal\/|async_hooks)/;
/** A source-code frame line (vitest, jest): `  4| code`, `> 9 | code`, `    |     ^`. */
const CODE_FRAME = /^\s*>?\s*\d*\s*\|/;
/** The counts of Node's summary worth showing: tests, pass and fail, and the others when not 0. */
const COUNTS = /^(tests|pass|fail) \d+$|^(cancelled|skipped|todo) [1-9]\d*$/;
/** Lines of one failure at most. */
const BLOCK_LINES = 14;

const indentOf = (line: string) => line.length - line.trimStart().length;

/** Lines after `start` until `stop` says a line ends the block. */
function until(lines: readonly string[], start: number, stop: (line: string) => boolean): string[] {
  const out: string[] = [];
  for (let i = start; i < lines.length && !stop(lines[i]!); i += 1) out.push(lines[i]!);
  return out;
}

function tap(lines: readonly string[]): TestFailures | undefined {
  const failures: string[][] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const m = /^(\s*)not ok \d+/.exec(lines[i]!);
    if (!m || /#\s*(TODO|SKIP)\b/i.test(lines[i]!)) continue;
    const depth = m[1]!.length;
    const body = until(lines, i + 1, (l) => l.trim() !== '' && indentOf(l) <= depth);
    const end = body.findIndex((l) => l.trim() === '...');
    // The YAML block to its closing `...`; in an excerpt, whatever of it was kept.
    const yaml = end >= 0 ? body.slice(0, end + 1) : body.filter((l) => l.trim() !== '');
    if (yaml.some((l) => /failureType:\s*'subtestsFailed'/.test(l))) continue;
    failures.push([lines[i]!, ...yaml.filter((l) => !/^\s*(duration_ms|failureType|code):/.test(l) && !NODE_INTERNAL.test(l))]);
  }
  const summary = lines.filter((l) => COUNTS.test(l.replace(/^# /, '')));
  if (failures.length === 0 && !summary.some((l) => /^# fail [1-9]/.test(l))) return undefined;
  return { runner: 'tap', failures, summary };
}

function nodeSpec(lines: readonly string[]): TestFailures | undefined {
  const at = lines.findIndex((l) => /^✖ failing tests:/.test(l));
  if (at < 0) return undefined;
  const failures: string[][] = [];
  let current: string[] | undefined;
  for (const line of lines.slice(at + 1)) {
    if (/^ℹ /.test(line)) break;
    if (/^test at /.test(line) || (/^✖ /.test(line) && current?.some((l) => /^✖ /.test(l)))) {
      current = [];
      failures.push(current);
    }
    if (!current) {
      if (line.trim() === '') continue;
      current = [];
      failures.push(current);
    }
    if (line.trim() !== '' && !NODE_INTERNAL.test(line)) current.push(line);
  }
  const summary = lines.filter((l) => /^ℹ /.test(l) && COUNTS.test(l.slice(2)));
  return { runner: 'node-spec', heading: lines[at]!, failures: failures.filter((f) => f.length > 0), summary };
}

function vitest(lines: readonly string[]): TestFailures | undefined {
  const header = /⎯+\s*(Failed Tests|Failed Suites|Unhandled Errors?)\b.*⎯/;
  const summaryLine = /^\s*(Test Files|Tests|Errors)\s{2,}\S/;
  const separator = /^\s*⎯+(\[\d+\/\d+\]⎯*)?\s*$/;
  if (!lines.some((l) => header.test(l))) return undefined;
  const failures: string[][] = [];
  let current: string[] | undefined;
  let inside = false;
  let heading: string | undefined;
  for (const line of lines) {
    if (header.test(line)) {
      inside = true;
      heading ??= line.trim();
      current = undefined;
      continue;
    }
    if (!inside) continue;
    if (summaryLine.test(line)) break;
    if (separator.test(line)) {
      current = undefined;
      continue;
    }
    if (line.trim() === '' || CODE_FRAME.test(line)) continue;
    if (!current || /^\s*FAIL\s/.test(line)) {
      current = [];
      failures.push(current);
    }
    current.push(line);
  }
  const summary = lines.filter((l) => summaryLine.test(l)).map((l) => l.trimEnd());
  return { runner: 'vitest', ...(heading ? { heading } : {}), failures, summary };
}

function jest(lines: readonly string[]): TestFailures | undefined {
  const summaryLine = /^(Test Suites|Tests):\s/;
  if (!lines.some((l) => summaryLine.test(l)) || !lines.some((l) => /^\s*● /.test(l))) return undefined;
  const failures: string[][] = [];
  for (let i = 0; i < lines.length; i += 1) {
    if (!/^\s*● /.test(lines[i]!)) continue;
    const body = until(lines, i + 1, (l) => /^\s*● /.test(l) || summaryLine.test(l) || /^\s*(PASS|FAIL)\s/.test(l));
    failures.push([lines[i]!, ...body.filter((l) => l.trim() !== '' && !CODE_FRAME.test(l) && !NODE_INTERNAL.test(l))]);
  }
  return { runner: 'jest', failures, summary: lines.filter((l) => summaryLine.test(l)) };
}

function pytest(lines: readonly string[]): TestFailures | undefined {
  const section = /^=+ (FAILURES|ERRORS) =+$/;
  const anySection = /^=+ .* =+$/;
  const final = /^=+ .*\b(failed|passed|error|errors|skipped|no tests ran)\b.* in [\d.]+s.*=+$/;
  if (!lines.some((l) => final.test(l))) return undefined;
  const failures: string[][] = [];
  let inside = false;
  let current: string[] | undefined;
  for (const line of lines) {
    if (section.test(line)) {
      inside = true;
      current = undefined;
      continue;
    }
    if (anySection.test(line)) {
      inside = false;
      continue;
    }
    if (!inside) continue;
    if (/^_{3,} .+ _{3,}$/.test(line)) {
      current = [line];
      failures.push(current);
      continue;
    }
    // What pytest marks as the failure: the failing line, the error, the place.
    if (current && (/^>/.test(line) || /^E\s/.test(line) || /^\S+:\d+: \S/.test(line))) current.push(line);
  }
  const shortAt = lines.findIndex((l) => /^=+ short test summary info =+$/.test(l));
  const short = shortAt < 0 ? [] : until(lines, shortAt + 1, (l) => anySection.test(l)).filter((l) => /^(FAILED|ERROR) /.test(l));
  const last = lines.filter((l) => final.test(l)).slice(-1);
  if (failures.length === 0 && short.length === 0) return undefined;
  const heading = lines.find((l) => section.test(l));
  const summary = [...(short.length > 0 ? [lines[shortAt]!, ...short] : []), ...last];
  return { runner: 'pytest', ...(heading ? { heading } : {}), failures, summary };
}

function goTest(lines: readonly string[]): TestFailures | undefined {
  const failures: string[][] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (/^--- FAIL: /.test(line)) {
      failures.push([line, ...until(lines, i + 1, (l) => l.trim() !== '' && indentOf(l) === 0)]);
    } else if (/^panic: /.test(line)) {
      failures.push(until(lines, i, (l) => l.trim() === '' || /^goroutine \d+/.test(l)));
    }
  }
  const summary = lines.filter((l) => /^(FAIL|ok)\s+\S+\s+([\d.]+s|\[)/.test(l));
  if (failures.length === 0 && !summary.some((l) => l.startsWith('FAIL'))) return undefined;
  return { runner: 'go', failures: failures.map((f) => f.filter((l) => l.trim() !== '')), summary };
}

function cargo(lines: readonly string[]): TestFailures | undefined {
  const summary = lines.filter((l) => /^test result: (FAILED|ok)\./.test(l));
  if (!summary.some((l) => l.startsWith('test result: FAILED'))) return undefined;
  const failures: string[][] = [];
  for (let i = 0; i < lines.length; i += 1) {
    if (!/^---- \S+ stdout ----$/.test(lines[i]!)) continue;
    const body = until(lines, i + 1, (l) => /^---- \S+ stdout ----$/.test(l) || /^(failures:|stack backtrace:|test result: )/.test(l));
    failures.push([lines[i]!, ...body.filter((l) => l.trim() !== '' && !/^note: run with `RUST_BACKTRACE/.test(l))]);
  }
  return { runner: 'cargo', failures, summary };
}

/** Says how many failing tests an excerpt left out; read back when an excerpt is cut again. */
const MORE = /^… and (\d+) more failing test\(s\): see the log$/;

const READERS = [tap, nodeSpec, vitest, jest, pytest, goTest, cargo] as const;

/** The failures of every runner whose failing output is in `output`, in the order above. */
export function readTestFailures(output: string): TestFailures[] {
  const lines = output
    .replace(ANSI, '')
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .filter((l) => !MORE.test(l));
  const found: TestFailures[] = [];
  for (const read of READERS) {
    const got = read(lines);
    if (got) found.push(got);
  }
  // Node's spec reporter repeats its failures in its own section; vitest's and jest's `×`
  // and `●` never overlap TAP's. A spec run is not also TAP.
  return found.filter((f) => f.runner !== 'tap' || !found.some((g) => g.runner === 'node-spec'));
}

/**
 * The failing tests' own lines, then the summary, in at most `maxLines` lines — or
 * undefined when no runner's failure is recognised in `output` (a caller then shows the
 * last lines, as before). Reading an excerpt again gives it back (cut to the new room), so
 * the console and the report can cut the recorded excerpt to their own size.
 */
export function failureExcerpt(output: string, maxLines = 40): string | undefined {
  const found = readTestFailures(output).filter((f) => f.failures.length > 0);
  if (found.length === 0) return undefined;
  const before = Number(MORE.exec(output.split('\n').find((l) => MORE.test(l)) ?? '')?.[1] ?? 0);
  const summary = found.flatMap((f) => f.summary);
  const total = found.reduce((n, f) => n + f.failures.length, 0);
  // Room for the failures, the "more" line and the summary; the first failure is shown whatever the room.
  const room = Math.max(1, maxLines - summary.length - 1);
  const out: string[] = [];
  let shown = 0;
  fill: for (const f of found) {
    for (const block of f.failures) {
      const head = f.heading && !out.includes(f.heading) ? [f.heading] : [];
      const lines = [...head, ...block.slice(0, BLOCK_LINES)];
      if (shown > 0 && out.length + lines.length > room) break fill;
      out.push(...(shown === 0 ? lines.slice(0, Math.max(head.length + 1, room)) : lines));
      shown += 1;
    }
  }
  const more = total - shown + before;
  if (more > 0) out.push(`… and ${more} more failing test(s): see the log`);
  return [...out, ...summary].join('\n');
}

/**
 * What a failed test run showed, with the words that say what it is: its failing tests
 * when the run recorded them, else its last lines (a run recorded before tron read
 * runners' output says it the same way it always did, so its replay decides the same).
 */
export function runOutput(run: { tail: string; failures?: string | undefined }): string {
  return run.failures !== undefined ? `the failing tests:\n${run.failures}` : `last lines:\n${run.tail}`;
}

/** The last `n` lines of `output`, as a failed run's tail was shown before any runner was read. */
export function lastLines(output: string, n: number): string {
  return output.split('\n').slice(-n).join('\n');
}
