/**
 * The block register: `.tron/blocks/<id>.md`, one block per file, TOML front matter
 * between `+++` lines, then the brief. Parsing is pure; loading only reads. Every
 * problem of every file, and every cross-block problem (unknown ids, cycles), is
 * reported together, so one `tron start` shows the user everything to fix.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { loadConfig, type Config } from './config.ts';
import { parseToml, schemaProblems, type IssueStyle } from './config-problems.ts';
import { InputError, type Problem } from '../core/errors.ts';
import { BLOCK_ID } from '../core/names.ts';
import { checkRegister } from './register-rules.ts';
import type { Block } from './block.ts';

export { checkRegister, dependencyCycles, selfDependencies, unknownDependencies } from './register-rules.ts';

/** Where block files live, relative to the repository root. */
export const BLOCKS_DIR = '.tron/blocks';

/** The largest block file: its brief goes into every prompt of the block. */
export const BLOCK_FILE_LIMIT = 256 * 1024;

/** A block id is its file name without `.md` (its shape: engine/core/names.ts). */
export { BLOCK_ID };

export type { Block } from './block.ts';

const nonEmpty = z.string().refine((s) => s.trim() !== '', { message: 'must not be empty or blank; write the text' });

const FrontMatter = z.strictObject({
  title: nonEmpty,
  depends_on: z.array(z.string()).default([]),
  priority: z.number().int().default(0),
  criteria: z.array(nonEmpty).min(1),
});

const BLOCK_STYLE: IssueStyle = {
  // Missing keys are title and criteria (codeAt below); nothing here is a duration.
  codes: { unknownKey: 'TRON_BLOCK_UNKNOWN_KEY', invalid: 'TRON_BLOCK_INVALID' },
  knownKeysAt: () => Object.keys(FrontMatter.shape),
  missingHint: (parts) =>
    parts[0] === 'title'
      ? 'add title = "what this block does" to the front matter'
      : parts[0] === 'criteria'
        ? 'add criteria = ["…"], at least one acceptance criterion the builder must give evidence for'
        : undefined,
  codeAt: (parts) => (parts[0] === 'title' ? 'TRON_BLOCK_TITLE' : parts[0] === 'criteria' ? 'TRON_BLOCK_CRITERIA' : undefined),
};

const FENCE = /^\+\+\+[ \t]*\r?$/;

/** Splits `+++` front matter from the brief: `absent` when the file does not open with `+++`, `unclosed` when it never closes it. */
function splitFrontMatter(text: string): { toml: string; brief: string } | 'absent' | 'unclosed' {
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  if (!FENCE.test(lines[0] ?? '')) return 'absent';
  const close = lines.findIndex((line, i) => i > 0 && FENCE.test(line));
  if (close < 0) return 'unclosed';
  return { toml: lines.slice(1, close).join('\n'), brief: lines.slice(close + 1).join('\n') };
}

function digestOf(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** The block id a file name stands for (the name without `.md`). */
export function blockIdOf(file: string): string {
  return path.posix.basename(file.split(path.sep).join('/'), '.md');
}

/**
 * Parses one block file. `file` is its repository-relative path; the id comes from the
 * file name. The block is returned only when there are no problems.
 */
export function parseBlockFile(text: string, file: string): { block?: Block; problems: Problem[] } {
  const problems: Problem[] = [];
  const id = blockIdOf(file);
  if (!BLOCK_ID.test(id)) {
    problems.push({
      code: 'TRON_BLOCK_ID',
      path: file,
      message: `"${id}" is not a block id; rename the file to lower-case letters, digits and dashes (at most 63, starting with a letter or digit), e.g. add-login.md`,
    });
  }
  const parts = splitFrontMatter(text);
  if (parts === 'absent') {
    problems.push({
      code: 'TRON_BLOCK_FRONTMATTER',
      path: `${file}:1`,
      message: 'no front matter; start the file with a line "+++", the TOML settings (title, criteria, …), then another "+++" line',
    });
    return { problems };
  }
  if (parts === 'unclosed') {
    problems.push({
      code: 'TRON_BLOCK_FRONTMATTER',
      path: `${file}:1`,
      message:
        'the front matter opened with "+++" on line 1 is never closed; add a line "+++" after the TOML settings (title, criteria, …), before the brief',
    });
    return { problems };
  }
  const toml = parseToml(parts.toml, file, 'TRON_BLOCK_TOML', 1);
  if (toml.problem) return { problems: [...problems, toml.problem] };
  const parsed = FrontMatter.safeParse(toml.data);
  if (!parsed.success) return { problems: [...problems, ...schemaProblems(parsed.error, toml.data, file, BLOCK_STYLE)] };
  if (problems.length > 0) return { problems };
  const fm = parsed.data;
  return {
    block: {
      id,
      title: fm.title.trim(),
      dependsOn: [...new Set(fm.depends_on)],
      priority: fm.priority,
      criteria: fm.criteria.map((c) => c.trim()),
      brief: parts.brief.replace(/\r\n/g, '\n').trim(),
      file,
      digest: digestOf(text),
    },
    problems,
  };
}

/** Dispatch order among ready blocks: priority (lower first), then id. */
export function byPriority(a: Block, b: Block): number {
  return a.priority - b.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

// ---------------------------------------------------------------------------------
// Loading (reads only)

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Reads `<repo>/.tron/blocks/*.md` in sorted order (other files and folders are
 * ignored) and checks the register as a whole. A missing folder is an empty register:
 * git does not keep empty folders, so a fresh clone may lack one.
 */
export function loadRegister(repo: string): { blocks: Block[]; problems: Problem[] } {
  const dir = path.join(repo, BLOCKS_DIR);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code;
    if (why === 'ENOENT') return { blocks: [], problems: [] };
    return {
      blocks: [],
      problems: [{ code: 'TRON_REGISTER_READ', path: BLOCKS_DIR, message: `cannot read the folder (${why}); make it a readable folder` }],
    };
  }
  const blocks: Block[] = [];
  const problems: Problem[] = [];
  const broken: string[] = [];
  for (const name of names.filter((n) => n.endsWith('.md')).sort()) {
    const file = `${BLOCKS_DIR}/${name}`;
    const full = path.join(dir, name);
    let text: string;
    try {
      const info = statSync(full);
      if (!info.isFile()) continue;
      if (info.size > BLOCK_FILE_LIMIT) {
        problems.push({
          code: 'TRON_BLOCK_TOO_LARGE',
          path: file,
          message: `is ${info.size} bytes, more than the ${BLOCK_FILE_LIMIT / 1024}KB a block file may hold (its brief goes into every prompt of the block); shorten the brief, and point to files in the repository for the detail`,
        });
        broken.push(blockIdOf(file));
        continue;
      }
      text = utf8.decode(readFileSync(full));
    } catch (err) {
      const notText = err instanceof TypeError;
      const why = notText ? 'it is not UTF-8 text' : ((err as NodeJS.ErrnoException).code ?? String(err));
      const fix = notText ? 'save it as UTF-8 text' : 'make it a readable file';
      problems.push({ code: 'TRON_BLOCK_READ', path: file, message: `cannot read the block (${why}); ${fix}` });
      broken.push(blockIdOf(file));
      continue;
    }
    const result = parseBlockFile(text, file);
    problems.push(...result.problems);
    if (result.block) blocks.push(result.block);
    else broken.push(blockIdOf(file));
  }
  problems.push(...checkRegister(blocks, broken));
  return { blocks, problems };
}

/**
 * The config and the register of a repository, or one InputError carrying every problem
 * of both. Nothing is written.
 */
export function loadProject(repo: string): { config: Config; blocks: Block[] } {
  const { config, problems: configProblems } = loadConfig(repo);
  const { blocks, problems: registerProblems } = loadRegister(repo);
  const problems = [...configProblems, ...registerProblems];
  if (!config || problems.length > 0) throw new InputError(problems);
  return { config, blocks };
}
