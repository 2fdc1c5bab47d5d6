/**
 * The repository stands alone: every file a comment or a document names is in it. A
 * path under one of the project's own folders (`engine/…`, `docs/…`) that names nothing,
 * a Markdown link to a file that is not there, or a citation of a design note kept
 * outside the repository fails this test.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const TOP = ['engine', 'docs', 'evaluation', 'prompts', 'workflow', 'runs', 'bin'];
/** A path under one of the project's folders, with a file extension. */
const PATH = new RegExp(`(?<![\\w./-])((?:${TOP.join('|')})/[\\w.@/-]*\\.(?:ts|md|toml|json|js|html|png|svg|jsonl))(?![\\w/-])`, 'g');
/** A Markdown link or image: `[text](target)`. */
const LINK = /\]\(([^)\s]+)\)/g;
/** Notes that live outside this repository and must not be cited. */
const OUTSIDE = /\b(?:DESIGN\.md|STYLE\.md|STYLE \d+|shared\/)/g;

/** The files whose references are checked: sources and docs by hand, generated docs too. */
function checkedFiles(root: string): string[] {
  const files: string[] = [];
  for (const top of ['engine', 'docs', 'evaluation']) {
    const dir = join(root, top);
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
      const path = `${top}/${f.split(sep).join('/')}`;
      if (/\.(ts|md)$/.test(path) && !path.includes('/templates/') && !path.includes('node_modules')) files.push(path);
    }
  }
  if (existsSync(join(root, 'README.md'))) files.push('README.md');
  return files.sort();
}

/** Every reference in the checked files that points at nothing, as `file: reference`. */
function brokenReferences(root: string): string[] {
  const broken: string[] = [];
  for (const file of checkedFiles(root)) {
    const text = readFileSync(join(root, file), 'utf8');
    // A test names the files it makes in its temporary folders: only its citations are checked.
    const isTest = file.endsWith('.test.ts');
    for (const m of isTest ? [] : text.matchAll(PATH)) {
      const path = m[1]!.replace(/[.]+$/, '');
      if (!existsSync(join(root, path))) broken.push(`${file}: ${path}`);
    }
    if (file.endsWith('.md')) {
      for (const m of text.matchAll(LINK)) {
        const target = m[1]!.split('#')[0]!;
        if (target === '' || /^[a-z]+:/i.test(target)) continue;
        const path = relative(root, resolve(dirname(join(root, file)), decodeURI(target)));
        if (path.startsWith('..')) broken.push(`${file}: ${target} (outside the repository)`);
        else if (!existsSync(join(root, path))) broken.push(`${file}: ${target}`);
      }
    }
    if (file === 'engine/references.test.ts') continue;
    for (const m of text.matchAll(OUTSIDE)) broken.push(`${file}: ${m[0]} (a note outside the repository)`);
  }
  return broken;
}

const ROOT = resolve(import.meta.dirname, '..');

/** A name a document places in a file: "`NAME` in `engine/….ts`", "`NAME` of `…`", "`NAME` (`…`)". */
const PLACED = /`([A-Za-z_]\w*)`(?:\s+(?:in|of|from)\s+|\s*\()`((?:engine|evaluation|bin)\/[\w./-]+\.(?:ts|js))`/g;

/**
 * Every name a hand-written document places in a file that the file does not define, as
 * `doc: NAME in path` — the recipes of docs/architecture.md ("add a row to `COMMANDS` in
 * `engine/cli/table.ts`") are followed by this, so a step that names a moved table fails.
 */
function misplacedNames(root: string): string[] {
  const out: string[] = [];
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  for (const doc of [...docs, ...(existsSync(join(root, 'README.md')) ? ['README.md'] : [])]) {
    const text = readFileSync(join(root, doc), 'utf8');
    // Generated documents say so in their banner; they are checked against their generators instead.
    if (/do not edit/i.test(text.slice(0, 400))) continue;
    for (const m of text.matchAll(PLACED)) {
      const [, name, path] = m as unknown as [string, string, string];
      const file = join(root, path);
      const source = existsSync(file) ? readFileSync(file, 'utf8') : '';
      const defined = new RegExp(`(?:const|let|var|function\\*?|class|type|interface|enum)\\s+${name}\\b|\\b${name}\\??\\s*[:=(]`);
      if (!defined.test(source)) out.push(`${doc}: ${name} in ${path}`);
    }
  }
  return out;
}

describe('references in the repository', () => {
  it('place every name a document gives a file in that file, so the recipes name what exists', () => {
    expect(misplacedNames(ROOT)).toEqual([]);
  });

  it('would catch a recipe naming a table in a file that does not define it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-references-'));
    try {
      mkdirSync(join(dir, 'engine', 'cli'), { recursive: true });
      mkdirSync(join(dir, 'docs'));
      writeFileSync(join(dir, 'engine', 'cli.ts'), 'export const HANDLERS = {};\n');
      writeFileSync(join(dir, 'engine', 'cli', 'table.ts'), 'export const COMMANDS = {};\n');
      writeFileSync(join(dir, 'docs', 'guide.md'), 'Add a row to `COMMANDS` in `engine/cli.ts`; `HANDLERS` (`engine/cli.ts`) runs it.\n');
      expect(misplacedNames(dir)).toEqual(['docs/guide.md: COMMANDS in engine/cli.ts']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('name only files that are in it, and cite no note kept outside it', () => {
    expect(checkedFiles(ROOT).length).toBeGreaterThan(100);
    expect(brokenReferences(ROOT)).toEqual([]);
  });

  it('would catch a comment naming a missing file, a dead Markdown link and a citation of an outside note', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-references-'));
    try {
      mkdirSync(join(dir, 'engine', 'core'), { recursive: true });
      mkdirSync(join(dir, 'docs'));
      writeFileSync(join(dir, 'engine', 'core', 'here.ts'), '// see engine/core/here.ts and engine/core/gone.ts\n');
      writeFileSync(join(dir, 'docs', 'guide.md'), '[ok](../engine/core/here.ts), [dead](missing.md), as DESIGN.md says\n');
      expect(brokenReferences(dir)).toEqual([
        'docs/guide.md: missing.md',
        'docs/guide.md: DESIGN.md (a note outside the repository)',
        'engine/core/here.ts: engine/core/gone.ts',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
