import { readdirSync, readFileSync } from 'node:fs';
import { sep } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { tronPath } from '../root.ts';
import { needProgram, requireAll, skipWithout } from './needs.ts';

const GONE = needProgram('no-such-program-here', 'apt-get install -y no-such-program-here');
const NODE = needProgram('node', 'apt-get install -y nodejs');

describe('programs the tests need', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it('finds a program on PATH, or an explicit path, and says when one is not there', () => {
    expect(NODE.path).toMatch(/\/node$/);
    expect(GONE.path).toBeUndefined();
    expect(needProgram('Chromium', 'x', { at: '/nonexistent/chromium' }).path).toBeUndefined();
    expect(needProgram('Node', 'x', { at: NODE.path! }).path).toBe(NODE.path);
  });

  it('skips, printing one line with the program and its install command, where one is missing outside CI', () => {
    vi.stubEnv('CI', '');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(skipWithout('the test', NODE, GONE)).toBe(true);
    expect(warn.mock.calls).toEqual([
      ['skipped: the test — no-such-program-here is not installed here: apt-get install -y no-such-program-here'],
    ]);
    expect(skipWithout('the test', NODE)).toBe(false);
  });

  it('never skips under CI=true: the test runs and fails naming what is missing', () => {
    vi.stubEnv('CI', 'true');
    expect(skipWithout('the test', GONE)).toBe(false);
    expect(() => requireAll(NODE, GONE)).toThrow(
      'no-such-program-here is not installed here: apt-get install -y no-such-program-here (CI=true: nothing may skip)',
    );
    expect(() => requireAll(NODE)).not.toThrow();
  });
});

/** The text inside the parentheses that open at `at`, or undefined when they never close. */
function parenthesised(text: string, at: number): string | undefined {
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(at + 1, i);
  }
  return undefined;
}

/**
 * Why `file`'s `skipIf` conditions would skip without a word: each must come from
 * skipWithout (or skipWithoutPostgres), directly or through a constant, or be BWRAP_SKIP —
 * all of which print the missing program with its install command, and fail under CI.
 */
function silentSkips(file: string, text: string): string[] {
  const announced = new Set(['BWRAP_SKIP']);
  for (const m of text.matchAll(/const (\w+)(?::[^=]+)? = skipWithout(?:Postgres)?\(/g)) announced.add(m[1]!);
  const problems: string[] = [];
  for (const m of text.matchAll(/\.skipIf(?=\()/g)) {
    const condition = parenthesised(text, m.index + m[0].length)?.trim() ?? '';
    const fine = /^skipWithout(Postgres)?\(/.test(condition) || [...condition.matchAll(/\w+/g)].some(([word]) => announced.has(word));
    if (!fine)
      problems.push(`${file}: skipIf(${condition}) skips without naming the install command: use skipWithout (engine/testing/needs.ts)`);
  }
  return problems;
}

describe('tests that skip for a missing program', () => {
  it('say which program and its install command, through skipWithout, in every test file', () => {
    const files = ['engine', 'evaluation'].flatMap((dir) =>
      readdirSync(tronPath(dir), { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.test.ts'))
        .map((f) => `${dir}/${f.split(sep).join('/')}`)
        // This file's own examples are planted silent skips.
        .filter((f) => f !== 'engine/testing/needs.test.ts'),
    );
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((f) => silentSkips(f, readFileSync(tronPath(f), 'utf8')))).toEqual([]);
  });

  it('find a condition of their own making, which says nothing', () => {
    const own = "const has = (p: string) => false;\nit.skipIf(!has('go'))('go test', () => {});\n";
    expect(silentSkips('x.test.ts', own)).toEqual([
      "x.test.ts: skipIf(!has('go')) skips without naming the install command: use skipWithout (engine/testing/needs.ts)",
    ]);
    const said =
      "const NO_GO = skipWithout('the go run', GO);\nit.skipIf(NO_GO)('go test', () => {});\ndescribe.skipIf(BWRAP_SKIP !== undefined)('x', () => {});\n";
    expect(silentSkips('x.test.ts', said)).toEqual([]);
  });
});
