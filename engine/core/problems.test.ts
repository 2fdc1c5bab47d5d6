import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatProblem } from './errors.ts';
import { coded, PROBLEM_AREAS, PROBLEM_CODES, PROBLEMS } from './problems.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const TABLE_FILE = 'engine/core/problems.ts';

/**
 * Names that look like codes but are not problems: the environment a worker sees, the
 * crash test hook, and constants. Each must still occur in the source (or the entry is
 * stale) and none may be a row of PROBLEMS.
 */
const NOT_CODES = {
  TRON_ROLE: 'worker environment',
  TRON_BLOCK: 'worker environment',
  TRON_SESSION: 'worker environment',
  TRON_TURN: 'worker environment',
  TRON_PHASE: 'worker environment',
  TRON_RUN_DIR: 'worker environment',
  TRON_RUN_MARKER: 'worker and test environment (the run marker recovery checks)',
  TRON_MARK: 'worker and test environment (the marker that finds their processes)',
  TRON_CRASH_AFTER_EVENT: 'crash test hook (environment)',
  TRON_CRASH_SWEEP: 'crash sweeps at every point, not a spread (environment)',
  TRON_DEBUG: 'set by --debug: print stack traces (environment)',
  TRON_PROC: 'process-table source, ps or proc (environment)',
  TRON_BENCH_SIZES: 'benchmark setting (environment)',
  TRON_BENCH_REPEATS: 'benchmark setting (environment)',
  TRON_BENCH_LANE: 'benchmark setting (environment)',
  TRON_BENCH_LANE_SIZES: 'benchmark setting (environment)',
  TRON_BENCH_SLOW_MS: 'benchmark setting (environment)',
  TRON_BENCH_KEEP: 'benchmark setting (environment)',
  TRON_BENCH_SERVE: 'benchmark setting (environment)',
  TRON_BENCH_REMOTE: 'benchmark setting (environment)',
  TRON_BENCH_REMOTE_STACKS: 'benchmark setting (environment)',
  TRON_BENCH_SERVE_ANSWERS: 'benchmark setting (environment)',
  TRON_BENCH_SERVE_CLIENTS: 'benchmark setting (environment)',
  TRON_BENCH_SERVE_RUNS: 'benchmark setting (environment)',
  TRON_BENCH_SERVE_SCRAPE_MS: 'benchmark setting (environment)',
  TRON_BENCH_COST: 'benchmark setting (environment)',
  TRON_BENCH_COST_ARGV: 'benchmark setting (environment)',
  TRON_BENCH_COST_AGAINST: 'benchmark setting (environment)',
  TRON_SERVE_TOKEN: 'the API token of `tron serve`, for scripts (environment)',
  TRON_WEBHOOK_SECRET: 'the secret `tron serve` checks GitHub webhook signatures with (environment)',
  TRON_BENCH_SIM_SEEDS: 'benchmark setting (environment)',
  TRON_BENCH_APPENDS: 'benchmark setting (environment)',
  TRON_BENCH_AGENTS: 'benchmark setting (environment)',
  TRON_BENCH_TIMELINE: 'benchmark setting (environment)',
  TRON_TEST_QUEUE_URL: "the queue test worker's database (environment)",
  TRON_TEST_ROLE: "the queue test worker's role (environment)",
  TRON_TEST_HEARTBEAT_MS: "the queue test worker's heartbeat (environment)",
  TRON_TEST_INSTANT: 'the queue test worker finishes jobs at once (environment)',
  TRON_TEST_REPOSITORY: "the queue test worker's repository (environment)",
  TRON_TEST_FINISH_ON: 'the signal the queue test worker finishes its held job on (environment)',
  TRON_DATABASE_URL: 'the database of [cluster] (environment)',
  TRON_TEST_DATABASE_URL: 'the database the tests use (environment)',
  TRON_VERSION: 'constant',
  TRON_ROOT: 'constant',
};

/** Every non-test source file under engine/ and evaluation/, except the table itself: path → text. */
function sources(): Map<string, string> {
  const files = new Map<string, string>();
  for (const dir of ['engine', 'evaluation']) {
    for (const name of readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })) {
      const file = `${dir}/${name.split('\\').join('/')}`;
      if (!/\.(ts|js|toml)$/.test(file) || /\.test\.ts$/.test(file) || file === TABLE_FILE) continue;
      files.set(file, readFileSync(join(ROOT, file), 'utf8'));
    }
  }
  return files;
}

/** Each TRON_* name in the sources, with the files it occurs in. */
function namesInSource(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const [file, text] of sources()) {
    for (const [name] of text.matchAll(/\bTRON_[A-Z][A-Z0-9_]*[A-Z0-9]\b/g)) {
      const where = found.get(name) ?? [];
      if (!where.includes(file)) where.push(file);
      found.set(name, where);
    }
  }
  return found;
}

describe('the problem table', () => {
  const names = namesInSource();
  const table = new Set<string>(PROBLEM_CODES);

  it('finds the scan working: it sees codes in the files that emit them', () => {
    expect(names.get('TRON_CYCLE')).toContain('engine/project/register-rules.ts');
    expect(names.get('TRON_USAGE')).toContain('engine/cli.ts');
    expect(names.get('TRON_SIM_TOML')).toContain('evaluation/template.ts');
    expect([...sources().keys()].some((f) => f.endsWith('.test.ts'))).toBe(false);
  });

  it('lists every TRON_* code that occurs in the engine and evaluation source', () => {
    const unlisted = [...names.keys()].filter((name) => !table.has(name) && !Object.hasOwn(NOT_CODES, name));
    expect(unlisted.map((name) => `${name} (in ${names.get(name)!.join(', ')})`)).toEqual([]);
  });

  it('has no dead rows: every code is used outside the table', () => {
    expect(PROBLEM_CODES.filter((code) => !names.has(code))).toEqual([]);
  });

  it('keeps the list of names that are not codes current and apart from the table', () => {
    for (const name of Object.keys(NOT_CODES)) {
      expect(names.has(name), `${name} still occurs in the source`).toBe(true);
      expect(table.has(name), `${name} is not a problem code`).toBe(false);
    }
  });

  it('gives every code a one-line summary and fix, each a sentence', () => {
    const sentence = /^(?:[A-Z`"]|git |tron )[^\n]*[^\s.]\.$/;
    for (const code of PROBLEM_CODES) {
      const { summary, fix } = PROBLEMS[code];
      expect(summary, `${code} summary`).toMatch(sentence);
      expect(fix, `${code} fix`).toMatch(sentence);
      expect(summary.split(' ').length, `${code} summary`).toBeGreaterThanOrEqual(4);
      expect(fix.split(' ').length, `${code} fix`).toBeGreaterThanOrEqual(3);
      expect(fix, code).not.toBe(summary);
    }
  });

  it('spells codes TRON_ then upper-case words, and files each under an area that exists', () => {
    for (const code of PROBLEM_CODES) {
      expect(code).toMatch(/^TRON_[A-Z]+(?:_[A-Z]+)*$/);
      expect(Object.keys(PROBLEM_AREAS)).toContain(PROBLEMS[code].area);
    }
    expect(new Set(Object.values(PROBLEMS).map((p) => p.area))).toEqual(new Set(Object.keys(PROBLEM_AREAS)));
  });

  it('is pure: the table module imports nothing', () => {
    const text = readFileSync(join(ROOT, TABLE_FILE), 'utf8');
    expect(text).not.toMatch(/^\s*import\b|\brequire\(|\bimport\(/m);
  });

  it('writes a coded line the way a problem is formatted', () => {
    const p = { code: 'TRON_CYCLE', path: '.tron/blocks/b.md: depends_on', message: 'blocks a → b → a depend on each other' } as const;
    expect(coded(p.code, `${p.path}: ${p.message}`)).toBe(formatProblem(p));
  });
});
