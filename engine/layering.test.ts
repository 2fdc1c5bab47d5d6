/**
 * The folder is the architecture: engine/ is built in layers, from the pure core up to
 * the command line, and a folder imports only from the layers below it (or its own).
 * This test reads every import of every source file and fails on one that reaches up,
 * and on two folders that import each other. docs/architecture.md explains the layers.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layers, from the ground up. A folder is named by its path under engine/
 * (`runtime/effects` is a layer of its own, below `runtime`); a file at the top of
 * engine/ by its name. `testing/` serves tests only and is no layer: no source imports it.
 */
const LAYERS: readonly (readonly string[])[] = [
  // The core's vocabulary — errors and their codes, roles, durations — which the tables use.
  ['core/errors.ts', 'core/problems.ts', 'core/roles.ts', 'core/duration.ts', 'root.ts'],
  // The tables the core decides by: the spine and escalation, the glossary and its parser.
  ['spine', 'gateway'],
  // The pure core: events, the fold, decide, facts, replay.
  ['core'],
  // The user's files, git, the operating system (a leaf), the command line's table and parser, the database's schema.
  ['project', 'git', 'os', 'cli', 'schema'],
  // Workers, the log, and the forge's API client (issues, pull requests, hosted checks).
  ['workers', 'log', 'forge'],
  ['runtime/effects'],
  // The job queue: effects as jobs in PostgreSQL, the pools that run them, agents' turns and tests.
  ['queue'],
  ['runtime'],
  ['render'],
  ['serve'],
  ['commands'],
  ['cli.ts'],
];

/**
 * The files of core/decide and core/lane, from the ground up: the lane's state and its fold,
 * then the concerns, each deciding its own inputs with what a rank below offers — the step
 * and `dispatch` every concern shares, the exception spine any concern escalates by, the
 * lane that blocks enter and trunk news halts, the gate that a builder's word opens —
 * never one of its own rank or above.
 */
const DECIDE_RANKS: readonly (readonly string[])[] = [
  // The lane's state and its fold, which engine/core/state.ts builds on.
  ['lane/stack.ts'],
  ['lane/fold.ts'],
  ['decide/step.ts'],
  ['decide/escalate.ts'],
  ['lane/lane.ts'],
  ['decide/gate.ts'],
  ['decide/turns.ts', 'lane/pr.ts', 'lane/remote.ts', 'decide/schedule.ts', 'decide/liveness.ts', 'decide/budget.ts', 'decide/withdraw.ts'],
  ['decide/decide.ts'],
];

/** The unit a file belongs to: the longest layer name that is a prefix of its path. */
function unitOf(path: string, layers: readonly (readonly string[])[]): string | undefined {
  const names = layers.flat().sort((a, b) => b.length - a.length);
  return names.find((n) => path === n || path.startsWith(`${n}/`));
}

/** Every non-test .ts file under `dir`, relative to it, with `/` separators. */
function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !f.endsWith('.d.ts'))
    .map((f) => f.split(sep).join('/'))
    .sort();
}

/** Imports that break the layering under `root`: upward, into testing/, from no layer, and folders importing each other. */
function layeringProblems(root: string, layers: readonly (readonly string[])[] = LAYERS): string[] {
  const level = new Map(layers.flatMap((names, i) => names.map((n) => [n, i] as const)));
  const problems: string[] = [];
  const edges = new Set<string>();
  for (const file of sources(root)) {
    const from = unitOf(file, layers);
    if (file.startsWith('testing/')) continue;
    if (from === undefined) {
      problems.push(`${file} is in no layer: add its folder to LAYERS in engine/layering.test.ts`);
      continue;
    }
    const info = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
    for (const { fileName: spec } of info.importedFiles) {
      if (!spec.startsWith('.')) continue;
      const target = relative(root, resolve(dirname(join(root, file)), spec))
        .split(sep)
        .join('/');
      if (target.startsWith('testing/')) {
        problems.push(`${file} imports ${target}: testing/ is for tests`);
        continue;
      }
      const to = unitOf(target, layers);
      if (to === undefined || to === from) continue;
      edges.add(`${from}→${to}`);
      if (level.get(to)! > level.get(from)!) problems.push(`${file} (${from}) imports ${target} (${to}), a layer above it`);
    }
  }
  for (const edge of edges) {
    const [a, b] = edge.split('→') as [string, string];
    if (a < b && edges.has(`${b}→${a}`)) problems.push(`${a} and ${b} import each other`);
  }
  return problems;
}

const ENGINE = resolve(import.meta.dirname);
const ROOT = resolve(ENGINE, '..');

/**
 * Import circles among the files under `root`'s `dirs` (tests and test helpers left out):
 * each a list of files that reach one another through their relative imports, types
 * included (a type import is a dependency a reader follows all the same). Tarjan's
 * strongly connected components, each of two files or more.
 */
function importCircles(root: string, dirs: readonly string[]): string[][] {
  const files = dirs.flatMap((d) => sources(join(root, d)).map((f) => `${d}/${f}`)).filter((f) => !f.includes('/testing/'));
  const known = new Set(files);
  const edges = new Map<string, string[]>();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(join(root, file), 'utf8'), true, true);
    edges.set(
      file,
      info.importedFiles
        .map((i) => i.fileName)
        .filter((spec) => spec.startsWith('.'))
        .map((spec) =>
          relative(root, resolve(dirname(join(root, file)), spec))
            .split(sep)
            .join('/'),
        )
        .filter((target) => known.has(target)),
    );
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const circles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const circle: string[] = [];
    for (let w = stack.pop()!; ; w = stack.pop()!) {
      on.delete(w);
      circle.push(w);
      if (w === v) break;
    }
    if (circle.length > 1) circles.push(circle.sort());
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return circles;
}

describe('the layers of engine/', () => {
  it('import only from layers below their own, and no two folders import each other', () => {
    expect(sources(ENGINE).length).toBeGreaterThan(100);
    expect(layeringProblems(ENGINE)).toEqual([]);
  });

  it('would catch a planted upward import, two folders importing each other, and a source importing testing/', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-layering-'));
    try {
      const write = (path: string, text: string) => {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), text);
      };
      write('core/state.ts', "import { Engine } from '../runtime/engine.ts';\nexport const s = Engine;\n");
      write('runtime/engine.ts', "import { s } from '../core/state.ts';\nexport const Engine = s;\n");
      write('git/run.ts', "import { repo } from '../testing/repo.ts';\nexport const r = repo;\n");
      write('testing/repo.ts', 'export const repo = 1;\n');
      expect(layeringProblems(dir)).toEqual([
        'core/state.ts (core) imports runtime/engine.ts (runtime), a layer above it',
        'git/run.ts imports testing/repo.ts: testing/ is for tests',
        'core and runtime import each other',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('has no import circle among the files of engine/ and evaluation/: each file can be read before the files that use it', () => {
    expect(importCircles(ROOT, ['engine', 'evaluation'])).toEqual([]);
  });

  it('would catch a planted circle of three files, type imports included', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-circles-'));
    try {
      mkdirSync(join(dir, 'x'));
      writeFileSync(join(dir, 'x', 'a.ts'), "import { b } from './b.ts';\nexport const a = b;\n");
      writeFileSync(join(dir, 'x', 'b.ts'), "import { c } from './c.ts';\nexport const b = c;\n");
      writeFileSync(join(dir, 'x', 'c.ts'), "import type { A } from './a.ts';\nexport const c = 1 as unknown as A;\n");
      writeFileSync(join(dir, 'x', 'd.ts'), "import { a } from './a.ts';\nexport const d = a;\n");
      expect(importCircles(dir, ['x'])).toEqual([['x/a.ts', 'x/b.ts', 'x/c.ts']]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps the decision concerns in their ranks: a file of core/decide or core/lane imports only such files of a rank below its own', () => {
    const core = join(ENGINE, 'core');
    const rankOf = new Map(DECIDE_RANKS.flatMap((files, rank) => files.map((f) => [f, rank] as const)));
    const ranked = (path: string) => path.startsWith('decide/') || path.startsWith('lane/');
    const problems: string[] = [];
    for (const file of sources(core).filter(ranked)) {
      const rank = rankOf.get(file);
      if (rank === undefined) {
        problems.push(`${file} is in no rank: add it to DECIDE_RANKS in engine/layering.test.ts`);
        continue;
      }
      const info = ts.preProcessFile(readFileSync(join(core, file), 'utf8'), true, true);
      for (const spec of info.importedFiles.map((i) => i.fileName).filter((s) => s.startsWith('.'))) {
        const other = relative(core, resolve(dirname(join(core, file)), spec))
          .split(sep)
          .join('/');
        if (ranked(other) && (rankOf.get(other) ?? Number.POSITIVE_INFINITY) >= rank)
          problems.push(`${file} imports ${other}, which is not of a rank below`);
      }
    }
    expect(problems).toEqual([]);
  });
});
