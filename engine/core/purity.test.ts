/**
 * The core is a checked boundary: nothing under engine/core/ — nor anything it
 * imports, transitively — may reach node built-ins, git, processes or the file system.
 * Time, git and test results enter the decision path only as recorded events; this
 * test is how that stays true (as Temporal's bundler rejects node modules in workflows).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it, onTestFinished } from 'vitest';

/** Packages the pure core may use: schemas only. */
const ALLOWED_PACKAGES = new Set(['zod']);

/** Every non-test .ts file under `dir`. */
function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => join(dir, f))
    .sort();
}

/**
 * Follows relative imports from `roots` and returns every import of a package or
 * built-in that is not allowed, with the chain of files that leads to it.
 */
function impureImports(roots: string[], base: string): string[] {
  const found: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string, chain: string[]): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const { fileName: spec } of info.importedFiles) {
      const here = [...chain, relative(base, file)];
      if (spec.startsWith('.')) {
        visit(resolve(dirname(file), spec), here);
        continue;
      }
      const pkg = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
      if (!ALLOWED_PACKAGES.has(pkg)) found.push(`${here.join(' → ')} imports ${spec}`);
    }
  };
  for (const root of roots) visit(root, []);
  return found;
}

/**
 * The globals through which time, chance, the environment and timers reach code without an
 * import: the core takes each of them as an event or a parameter instead.
 */
const IMPURE_GLOBALS = new Set([
  'Date',
  'process',
  'performance',
  'crypto',
  'globalThis',
  'setTimeout',
  'setInterval',
  'setImmediate',
  'queueMicrotask',
]);

/** Every file `roots` reach through relative imports. */
function reachable(roots: string[]): string[] {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const { fileName: spec } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles)
      if (spec.startsWith('.')) visit(resolve(dirname(file), spec));
  };
  for (const root of roots) visit(root);
  return [...seen].sort();
}

/** Each use of an impure global (or `Math.random`) in `files`, as `file:line name`. */
function impureGlobals(files: string[], base: string): string[] {
  const found: string[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const at = (node: ts.Node, name: string) =>
      found.push(`${relative(base, file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} ${name}`);
    const walk = (node: ts.Node): void => {
      if (
        ts.isPropertyAccessExpression(node) &&
        ts.isIdentifier(node.expression) &&
        node.expression.text === 'Math' &&
        node.name.text === 'random'
      )
        at(node, 'Math.random');
      else if (ts.isIdentifier(node) && IMPURE_GLOBALS.has(node.text)) {
        const parent = node.parent;
        // A property's or a type's name is not the global: `x.process`, `{ process: … }`, `Date` as a type is.
        const named =
          (ts.isPropertyAccessExpression(parent) && parent.name === node) ||
          ((ts.isPropertyAssignment(parent) ||
            ts.isPropertySignature(parent) ||
            ts.isPropertyDeclaration(parent) ||
            ts.isMethodDeclaration(parent)) &&
            parent.name === node);
        if (!named) at(node, node.text);
      }
      ts.forEachChild(node, walk);
    };
    walk(source);
  }
  return found;
}

const ENGINE = resolve(import.meta.dirname, '..');

describe('the pure core', () => {
  it('imports no node built-in, git, process library or file system, directly or through what it imports', () => {
    const core = sourcesUnder(join(ENGINE, 'core'));
    expect(core.length).toBeGreaterThan(10);
    expect(impureImports(core, ENGINE)).toEqual([]);
  });

  it('reads no clock, randomness, environment or timer through a global, directly or through what it imports', () => {
    const files = reachable(sourcesUnder(join(ENGINE, 'core')));
    expect(files.length).toBeGreaterThan(10);
    expect(impureGlobals(files, ENGINE)).toEqual([]);
  });

  it('would be caught reading the time, a random number or the environment without an import', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-purity-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, 'core'));
    writeFileSync(
      join(dir, 'core', 'decide.ts'),
      [
        'export const at = Date.now();',
        'export const coin = Math.random() < 0.5;',
        'export const home = process.env.HOME;',
        'setTimeout(() => undefined, 1);',
        '// Names that are not the globals pass: a field, a key, a property.',
        'export const ok = (o: { process: number; random: number }) => ({ process: o.process, Date: Math.max(o.random) });',
        '',
      ].join('\n'),
    );
    expect(impureGlobals(reachable(sourcesUnder(join(dir, 'core'))), dir)).toEqual([
      'core/decide.ts:1 Date',
      'core/decide.ts:2 Math.random',
      'core/decide.ts:3 process',
      'core/decide.ts:4 setTimeout',
    ]);
  });

  it('would be caught importing node:fs through a helper it imports', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-purity-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(join(dir, 'core'));
    mkdirSync(join(dir, 'spine'));
    writeFileSync(
      join(dir, 'core', 'decide.ts'),
      "import { z } from 'zod';\nimport { table } from '../spine/table.ts';\nexport const x = [z, table];\n",
    );
    writeFileSync(join(dir, 'spine', 'table.ts'), "import { readFileSync } from 'node:fs';\nexport const table = readFileSync;\n");
    expect(impureImports(sourcesUnder(join(dir, 'core')), dir)).toEqual(['core/decide.ts → spine/table.ts imports node:fs']);
  });
});
