import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import { loadSpine, SPINE_FILE } from './load.ts';
import { keyPath, parseSpine } from './parse.ts';

const F = 'engine/workflow.toml';
const REAL = readFileSync(SPINE_FILE, 'utf8');

/** The real spine text with one replacement; a replacement that finds nothing fails the test. */
function edit(from: string | RegExp, to: string): string {
  const next = REAL.replace(from, to);
  if (next === REAL) throw new Error(`test edit: ${String(from)} is not in engine/workflow.toml`);
  return next;
}

const codesAndPaths = (text: string) => parseSpine(text, F).problems.map(({ code, path }) => ({ code, path }));

let tmp: string | undefined;
afterEach(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = undefined;
});
function tempSpine(text: string): string {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'tron-spine-'));
  const file = path.join(tmp, 'workflow.toml');
  writeFileSync(file, text);
  return file;
}

describe('parseSpine', () => {
  it('reads the phases of the real spine in file order', () => {
    const { spine, problems } = parseSpine(REAL, F);
    expect(problems).toEqual([]);
    const headers = [...REAL.matchAll(/^\[phases\.([a-z0-9_]+)\]/gm)].map((m) => m[1]);
    expect(headers.length).toBeGreaterThan(3);
    expect(spine?.phases.map((p) => p.name)).toEqual(headers);
  });

  it('turns durations into ms and fills in the defaults', () => {
    const text = [
      'version = 1',
      'start = "build"',
      '[budgets]',
      'architect = 2',
      '[liveness]',
      'probe_wait = "45s"',
      'extension = "1h30m"',
      'max_extensions = 0',
      'reissues = 2',
      '[phases.build]',
      'title = "Build"',
      'description = "Build it."',
      'gate = "truth"',
      'attempts = 4',
      'time = "90s"',
      'words.builder = ["DONE"]',
      'transitions = [{ on = "DONE", to = "landed", when = "done" }]',
      '[phases.landed]',
      'title = "Landed"',
      'description = "Done."',
      'terminal = true',
    ].join('\n');
    const { spine, problems } = parseSpine(text, F);
    expect(problems).toEqual([]);
    expect(spine).toEqual({
      version: 1,
      start: 'build',
      budgets: { architect: 2 },
      liveness: { probeWaitMs: 45_000, extensionMs: 90 * 60_000, maxExtensions: 0, reissues: 2 },
      phases: [
        {
          name: 'build',
          title: 'Build',
          description: 'Build it.',
          gate: 'truth',
          terminal: false,
          attempts: 4,
          timeMs: 90_000,
          words: { builder: ['DONE'] },
          transitions: [{ on: 'DONE', to: 'landed', when: 'done' }],
        },
        { name: 'landed', title: 'Landed', description: 'Done.', terminal: true, words: {}, transitions: [] },
      ],
    });
    expect(Object.keys(spine!.phases[1]!)).not.toContain('gate');
  });

  it('reports a TOML syntax error with the file, line and column', () => {
    const text = edit('start = "build"', 'start = "build');
    const line = text.split('\n').findIndex((l) => l.startsWith('start = ')) + 1;
    const problems = parseSpine(text, F).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]!.code).toBe('TRON_SPINE_TOML');
    expect(problems[0]!.path).toMatch(new RegExp(`^engine/workflow\\.toml:${line}:\\d+$`));
  });

  it('reports a misspelt key with its dotted path and the keys allowed there', () => {
    const problems = parseSpine(edit(/attempts = 3 /, 'atempts = 3 '), F).problems;
    expect(problems).toEqual([
      expect.objectContaining({
        code: 'TRON_SPINE_SCHEMA',
        path: `${F}: phases.build.atempts`,
        message: expect.stringContaining('attempts'),
      }),
    ]);
  });

  it('reports unknown roles, transition keys and top-level keys', () => {
    const text = edit('words.reviewer =', 'words.chef = ["X"]\nwords.reviewer =').replace(
      '{ on = "APPROVE",',
      '{ on = "APPROVE", then = 1,',
    );
    expect(codesAndPaths(`owner = "me"\n${text}`)).toEqual(
      expect.arrayContaining([
        { code: 'TRON_SPINE_SCHEMA', path: `${F}: owner` },
        { code: 'TRON_SPINE_SCHEMA', path: `${F}: phases.review.words.chef` },
        { code: 'TRON_SPINE_SCHEMA', path: `${F}: phases.review.transitions[0].then` },
      ]),
    );
  });

  it('reports a value of the wrong type, saying what was found', () => {
    const [p] = parseSpine(edit('architect = 2', 'architect = "two"'), F).problems;
    expect(p).toMatchObject({ code: 'TRON_SPINE_SCHEMA', path: `${F}: budgets.architect` });
    expect(p!.message).toContain('"two"');
  });

  it('reports a missing key', () => {
    expect(codesAndPaths(edit('title = "Review"\n', ''))).toEqual([{ code: 'TRON_SPINE_SCHEMA', path: `${F}: phases.review.title` }]);
  });

  it('reports a bad duration together with the other problems', () => {
    const text = edit('time = "30m"', 'time = "half an hour"')
      .replace('extension = "10m"', 'extension = "10 min"')
      .replace('gate = "wrap"', 'gate = "wrapper"');
    expect(codesAndPaths(text)).toEqual(
      expect.arrayContaining([
        { code: 'TRON_SPINE_DURATION', path: `${F}: phases.review.time` },
        { code: 'TRON_SPINE_DURATION', path: `${F}: liveness.extension` },
        { code: 'TRON_SPINE_SCHEMA', path: `${F}: phases.wrap.gate` },
      ]),
    );
  });

  it('rejects a phase name that is not a lower-case word', () => {
    expect(codesAndPaths(edit('[phases.landed]', '[phases.Landed]'))).toContainEqual({
      code: 'TRON_SPINE_SCHEMA',
      path: `${F}: phases.Landed`,
    });
  });
});

describe('keyPath', () => {
  it('writes keys dotted, indexes in brackets and odd keys quoted', () => {
    expect(keyPath(['phases', 'review', 'transitions', 1, 'to'])).toBe('phases.review.transitions[1].to');
    expect(keyPath(['phases', 'a b'])).toBe('phases."a b"');
  });
});

describe('loadSpine', () => {
  it('loads the checkout own spine from next to the module, whatever the cwd', () => {
    expect(path.isAbsolute(SPINE_FILE)).toBe(true);
    expect(SPINE_FILE.endsWith(path.join('engine', 'workflow.toml'))).toBe(true);
    expect(loadSpine().start).toBe('build');
  });

  it('throws one InputError carrying every lint problem of a spine that parses', () => {
    const file = tempSpine(edit('start = "build"', 'start = "biuld"').replace('architect = 2', 'architect = 0'));
    let error: unknown;
    try {
      loadSpine(file);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InputError);
    const problems = (error as InputError).problems;
    expect(problems.map((p) => p.code)).toEqual(expect.arrayContaining(['TRON_SPINE_START_UNKNOWN', 'TRON_SPINE_BUDGET']));
    expect(problems.every((p) => p.path.startsWith(`${file}: `))).toBe(true);
  });

  it('throws an InputError for a spine that does not parse, or cannot be read', () => {
    expect(() => loadSpine(tempSpine(edit('version = 1', 'version = 2')))).toThrow(/TRON_SPINE_SCHEMA: .*: version: must be one of 1/);
    expect(() => loadSpine(path.join(os.tmpdir(), 'tron-no-such-dir', 'workflow.toml'))).toThrow(/TRON_SPINE_READ/);
  });
});
