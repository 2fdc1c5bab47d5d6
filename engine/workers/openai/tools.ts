/**
 * The built-in agent's tools: OpenAI function definitions plus their implementations,
 * all confined to the turn's cwd (see tools-confine.ts). Read-only roles get the tools
 * that cannot change files; a write tool called by one anyway is refused in its result.
 * A tool never throws out of the loop: every failure is a result text the model reads.
 */
import type { Clock } from '../../os/clock.ts';
import type { ChatCompletionFunctionTool } from 'openai/resources/chat/completions';
import type { WorkerRole } from '../../core/roles.ts';
import { confine } from './tools-confine.ts';
import { Refused, editText, listEntries, readText, writeText } from './tools-fs.ts';
import { runCommand } from './tools-run.ts';
import type { Confinement, Sandbox } from '../sandbox.ts';
import { searchFiles } from './tools-search.ts';

export interface ToolContext {
  /** The worktree every path is confined to, and the cwd of `run`. */
  cwd: string;
  role: WorkerRole;
  /** The whole environment of `run` commands. */
  env: Record<string, string>;
  /** Longest a `run` may take, whatever timeout_s the model asks for. */
  toolTimeoutMs: number;
  /** The turn's signal: ends running commands when the turn ends. */
  signal: AbortSignal;
  /** Times a command's timeout (the system's by default): the turn's clock. */
  clock?: Clock;
  onSpawn?: (info: { pid: number; startTime: string }) => void;
  onExit?: (info: { pid: number; code: number | null; signal: string | null }) => void;
  /** Where `run` commands are confined (engine/workers/sandbox.ts); unconfined unless given. */
  sandbox?: Sandbox;
  confinement?: Confinement;
}

/** Longest text read_file returns in one call; more is paged with offset/limit. */
const READ_CHAR_LIMIT = 60_000;
const DEFAULT_READ_LINES = 2_000;

type Args = Record<string, unknown>;
type Impl = (args: Args, ctx: ToolContext) => Promise<string>;

function fn(name: string, description: string, properties: Record<string, unknown>, required: string[]): ChatCompletionFunctionTool {
  return {
    type: 'function',
    function: { name, description, parameters: { type: 'object', properties, required, additionalProperties: false } },
  };
}

const str = (description: string) => ({ type: 'string', description });
const int = (description: string) => ({ type: 'integer', description });

const definitions = {
  read_file: fn(
    'read_file',
    'Read a text file in the worktree. Paths are relative to the worktree root. Long files are paged: offset is the first line (1-based), limit the number of lines.',
    { path: str('file path relative to the worktree'), offset: int('first line, 1-based'), limit: int('number of lines') },
    ['path'],
  ),
  list_dir: fn(
    'list_dir',
    'List a directory of the worktree; directories end with "/".',
    { path: str('directory relative to the worktree; "." for the root') },
    ['path'],
  ),
  search: fn(
    'search',
    'Search the files under a path for a pattern, line by line (skips .git, node_modules and binary files). The pattern is plain text unless regex is true.',
    {
      pattern: str('text (or regular expression) to find'),
      path: str('directory or file to search; default "."'),
      regex: { type: 'boolean', description: 'treat pattern as a JavaScript regular expression' },
    },
    ['pattern'],
  ),
  run: fn(
    'run',
    'Run a command in the worktree root and get its exit code and output (stdout and stderr merged, long output cut in the middle). Give either argv (no shell) or shell (a /bin/sh command line).',
    {
      argv: { type: 'array', items: { type: 'string' }, description: 'program and arguments' },
      shell: str('a shell command line'),
      timeout_s: int('seconds before the command is killed'),
    },
    [],
  ),
  write_file: fn(
    'write_file',
    'Create or overwrite a file in the worktree with the given content (parent directories are created).',
    { path: str('file path relative to the worktree'), content: str('the whole new content') },
    ['path', 'content'],
  ),
  edit_file: fn(
    'edit_file',
    'Replace exactly one occurrence of `old` with `new` in a file. Fails if `old` is absent or occurs more than once: include more surrounding text to make it unique.',
    { path: str('file path relative to the worktree'), old: str('exact text to replace'), new: str('replacement text') },
    ['path', 'old', 'new'],
  ),
} as const;

export type ToolName = keyof typeof definitions;

/** Tools that cannot change files (run can, through the shell: a reviewer may run tests). */
export const readOnlyTools: readonly ToolName[] = ['read_file', 'list_dir', 'search', 'run'];
/** Every tool: the builder's kit. */
export const builderTools: readonly ToolName[] = ['read_file', 'list_dir', 'search', 'run', 'write_file', 'edit_file'];

/** The tools a role may use: only the builder writes. */
export function toolsForRole(role: WorkerRole): readonly ToolName[] {
  return role === 'builder' ? builderTools : readOnlyTools;
}

/**
 * One short line saying what a tool call does (`run npm test`, `edit_file src/a.ts`), for
 * the live board and the turn's log; arguments that do not parse are shown as given.
 */
export function describeCall(name: string, rawArgs: string): string {
  let args: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(rawArgs);
    if (parsed && typeof parsed === 'object') args = parsed as Record<string, unknown>;
  } catch {
    return `${name} ${rawArgs}`.slice(0, 160);
  }
  const what =
    name === 'run'
      ? Array.isArray(args.argv)
        ? args.argv.map(String).join(' ')
        : String(args.shell ?? '')
      : name === 'search'
        ? `${JSON.stringify(args.pattern ?? '')} in ${String(args.path ?? '.')}`
        : String(args.path ?? '');
  return `${name} ${what.replace(/\s+/g, ' ')}`.trim().slice(0, 160);
}

/** OpenAI function definitions for a tool list. */
export function toolDefinitions(names: readonly ToolName[]): ChatCompletionFunctionTool[] {
  return names.map((name) => definitions[name]);
}

const impls: Record<ToolName, Impl> = {
  async read_file(args, ctx) {
    const where = confine(args.path, 'read');
    if (!where.ok) return `error: ${where.error}`;
    const text = await readText(ctx.cwd, where.rel);
    const lines = text.split('\n');
    const offset = Math.max(1, toInt(args.offset) ?? 1);
    const limit = Math.max(1, toInt(args.limit) ?? DEFAULT_READ_LINES);
    let shown = lines.slice(offset - 1, offset - 1 + limit);
    let body = shown.join('\n');
    if (body.length > READ_CHAR_LIMIT) {
      body = body.slice(0, READ_CHAR_LIMIT);
      shown = body.split('\n');
    }
    const last = offset - 1 + shown.length;
    if (offset === 1 && last >= lines.length) return body;
    return `[lines ${offset}-${last} of ${lines.length} of ${where.rel}; pass offset to read more]\n${body}`;
  },

  async list_dir(args, ctx) {
    const where = confine(args.path ?? '.', 'read');
    if (!where.ok) return `error: ${where.error}`;
    const entries = await listEntries(ctx.cwd, where.rel);
    const names = entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name)).sort();
    return names.length === 0 ? `${where.rel} is empty` : names.join('\n');
  },

  async search(args, ctx) {
    if (typeof args.pattern !== 'string' || args.pattern === '') return 'error: a non-empty pattern is required';
    const where = confine(args.path ?? '.', 'read');
    if (!where.ok) return `error: ${where.error}`;
    let matcher: (line: string) => boolean;
    if (args.regex === true) {
      let re: RegExp;
      try {
        re = new RegExp(args.pattern);
      } catch (error) {
        return `error: invalid regular expression: ${(error as Error).message}`;
      }
      matcher = (line) => re.test(line);
    } else {
      const needle = args.pattern;
      matcher = (line) => line.includes(needle);
    }
    return searchFiles(ctx.cwd, where.rel, matcher);
  },

  async run(args, ctx) {
    const asked = toInt(args.timeout_s);
    const timeoutMs = asked === undefined ? ctx.toolTimeoutMs : Math.min(Math.max(asked, 1) * 1000, ctx.toolTimeoutMs);
    const common = {
      cwd: ctx.cwd,
      env: ctx.env,
      timeoutMs,
      signal: ctx.signal,
      ...(ctx.clock ? { clock: ctx.clock } : {}),
      onSpawn: ctx.onSpawn,
      onExit: ctx.onExit,
      ...(ctx.sandbox ? { sandbox: ctx.sandbox } : {}),
      ...(ctx.confinement ? { confinement: ctx.confinement } : {}),
    };
    if (Array.isArray(args.argv) && args.argv.length > 0 && args.argv.every((a) => typeof a === 'string')) {
      if (args.shell !== undefined) return 'error: give either argv or shell, not both';
      return runCommand({ argv: args.argv as string[] }, common);
    }
    if (typeof args.shell === 'string' && args.shell.trim() !== '') return runCommand({ shell: args.shell }, common);
    return 'error: give argv (a non-empty array of strings) or shell (a command line)';
  },

  async write_file(args, ctx) {
    if (typeof args.content !== 'string') return 'error: content must be a string';
    const where = confine(args.path, 'write');
    if (!where.ok) return `error: ${where.error}`;
    await writeText(ctx.cwd, where.rel, args.content);
    return `wrote ${where.rel} (${args.content.length} characters)`;
  },

  async edit_file(args, ctx) {
    if (typeof args.old !== 'string' || args.old === '') return 'error: old must be the non-empty text to replace';
    if (typeof args.new !== 'string') return 'error: new must be a string';
    const where = confine(args.path, 'write');
    if (!where.ok) return `error: ${where.error}`;
    const { old, new: replacement } = args;
    let problem = '';
    const edited = await editText(ctx.cwd, where.rel, (text) => {
      const first = text.indexOf(old);
      const count = text.split(old).length - 1;
      if (first < 0) problem = `error: the text to replace was not found in ${where.rel}; read the file and copy it exactly`;
      else if (count > 1)
        problem = `error: the text to replace occurs ${count} times in ${where.rel}; include more surrounding lines so it is unique`;
      else return text.slice(0, first) + replacement + text.slice(first + old.length);
      return undefined;
    }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') problem = `error: ${where.rel} is not an existing file; use write_file to create it`;
      else throw err;
      return false;
    });
    return edited ? `edited ${where.rel}` : problem;
  },
};

/**
 * Runs one tool call for a role and returns the result text. Unknown tools, bad JSON
 * arguments, refusals and filesystem errors all come back as `error: …` results.
 */
export async function runTool(name: string, rawArgs: string, ctx: ToolContext): Promise<string> {
  if (!(name in definitions)) {
    return `error: there is no tool ${JSON.stringify(name)}; available: ${toolsForRole(ctx.role).join(', ')}`;
  }
  const tool = name as ToolName;
  if (!toolsForRole(ctx.role).includes(tool)) {
    return `error: ${tool} is not available to the ${ctx.role}: ${ctx.role}s are read-only`;
  }
  let args: unknown;
  try {
    args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
  } catch {
    return `error: the arguments of ${tool} are not valid JSON: ${rawArgs.slice(0, 200)}`;
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return `error: the arguments of ${tool} must be a JSON object`;
  try {
    return await impls[tool](args as Args, ctx);
  } catch (error) {
    if (error instanceof Refused) return `error: ${error.message}`;
    return `error: ${tool} failed: ${describeFsError(error)}`;
  }
}

function toInt(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? Math.floor(value) : undefined;
}

/** A filesystem error without the absolute paths of the engine's machine. */
function describeFsError(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  const known: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EISDIR: 'it is a directory',
    ENOTDIR: 'a part of the path is not a directory',
    EACCES: 'permission denied',
    ELOOP: 'too many levels of symbolic links',
  };
  return (e.code && known[e.code]) ?? e.message ?? String(error);
}
