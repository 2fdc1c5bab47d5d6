/**
 * The tron command line. One table describes every command — its summary, arguments and
 * options — and feeds the argument check, `--help`, docs/CLI.md and the shell
 * completions (engine/cli/args.ts reads it). This is the only module that turns errors
 * into exit statuses: a user mistake (InputError) prints its coded problems and exits 2,
 * never a stack trace.
 *
 * It stays small to import: `tron --version` and `--help` load this file and the table's
 * helpers only; each command's module is imported when that command runs.
 */
import { resolve } from 'node:path';
import { InputError, formatProblem } from './core/errors.ts';
import { coded } from './core/problems.ts';
import { systemClock } from './core/clock.ts';
import { codedLine } from './runtime/failure.ts';
import { commandHelp, parseCommand, type CommandSpec, type OptionSpec, type Values } from './cli/args.ts';
import { didYouMean } from './cli/suggest.ts';
import { TRON_VERSION } from './root.ts';

export type { CommandSpec } from './cli/args.ts';

const print = (line: string) => console.log(line);
const repoOption = {
  repo: { type: 'string', value: 'DIR', complete: 'dir', description: 'the target repository (default: the current directory)' },
} as const satisfies Record<string, OptionSpec>;
const repoOf = (v: Values) => resolve(typeof v.repo === 'string' ? v.repo : '.');
const runArg = {
  name: 'RUN',
  optional: true,
  complete: 'run',
  description: 'a run directory, or a run id under .tron/runs/ of --repo (default: the latest run)',
} as const;

export const COMMANDS: Record<string, CommandSpec> = {
  init: {
    summary: 'scaffold .tron/ (config.toml, blocks/, .gitignore) in a repository',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      worker: { type: 'string', choices: ['openai', 'claude', 'codex', 'sim'], description: 'the worker preset to configure' },
    },
    examples: ['tron init --repo ../myapp --worker claude'],
    run: async (v) => {
      const { initCommand } = await import('./commands/init.ts');
      const { isPresetName } = await import('./workers/presets.ts');
      const worker = typeof v.worker === 'string' && isPresetName(v.worker) ? v.worker : undefined;
      return initCommand({ repo: repoOf(v), ...(worker ? { worker } : {}), print });
    },
  },
  start: {
    summary: 'run every ready block to a terminal phase, then exit (0 all landed, 3 parked/abandoned)',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      watch: { type: 'boolean', description: 'stay up; pick up new block files and answers at once' },
      plain: { type: 'boolean', description: 'print time-stamped lines instead of the live board, even on a terminal' },
    },
    examples: ['tron start --repo ../myapp', 'tron start --repo ../myapp --watch'],
    run: async (v) => {
      const { startCommand } = await import('./commands/start.ts');
      return startCommand({
        repo: repoOf(v),
        watch: Boolean(v.watch),
        plain: Boolean(v.plain),
        output: process.stdout,
        clock: systemClock,
        env: process.env,
        print,
        signals: true,
      });
    },
  },
  status: {
    summary: 'the phase, attempt, age and reason of every block, folded from the events',
    audience: 'user',
    args: [],
    options: { ...repoOption, json: { type: 'boolean', description: 'print JSON (camelCase keys, times in ms)' } },
    run: async (v) => {
      const { statusCommand } = await import('./commands/status.ts');
      return statusCommand({ repo: repoOf(v), json: Boolean(v.json), clock: systemClock, print });
    },
  },
  answer: {
    summary: 'answer a parked block as the operator: \'>>RETRY {"guidance":"…"}\' or \'>>ABANDON {"reason":"…"}\'',
    audience: 'user',
    args: [
      { name: 'BLOCK', complete: 'block', description: 'the parked block (its file name in .tron/blocks/, without .md)' },
      { name: 'ANSWER', description: 'one line: \'>>RETRY {"guidance":"…"}\' or \'>>ABANDON {"reason":"…"}\'' },
    ],
    options: { ...repoOption },
    examples: [`tron answer --repo ../myapp login '>>RETRY {"guidance":"use the v2 API"}'`],
    run: async (v, args) => {
      const { answerCommand } = await import('./commands/answer.ts');
      return answerCommand({ repo: repoOf(v), block: args[0], line: args[1], clock: systemClock, print });
    },
  },
  report: {
    summary: 'run statistics, from the events alone',
    audience: 'user',
    args: [runArg],
    options: { ...repoOption, json: { type: 'boolean', description: 'print JSON (camelCase keys, times in ms)' } },
    examples: ['tron report --repo ../myapp', 'tron report --repo ../myapp 20261130-024812-001 --json'],
    run: async (v, args) => {
      const { reportCommand } = await import('./commands/report.ts');
      return reportCommand({ repo: repoOf(v), run: args[0], json: Boolean(v.json), print });
    },
  },
  replay: {
    summary: 're-drive a recorded run and prove the same decisions',
    audience: 'user',
    args: [runArg],
    options: { ...repoOption },
    examples: ['tron replay --repo ../myapp', 'tron replay runs/happy-deps'],
    run: async (v, args) => {
      const { replayCommand } = await import('./commands/replay.ts');
      return replayCommand({ repo: repoOf(v), run: args[0], print });
    },
  },
  clean: {
    summary: 'remove stale worktrees, old orphan branches and old run directories',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      'dry-run': { type: 'boolean', description: 'list what would be removed; change nothing' },
      all: { type: 'boolean', description: 'remove every orphan branch, however recent' },
      keep: { type: 'string', value: 'N', description: 'run directories to keep, newest first (default 10)' },
    },
    examples: ['tron clean --repo ../myapp --dry-run', 'tron clean --repo ../myapp --keep 3 --all'],
    run: async (v) => {
      const { cleanCommand, parseKeep } = await import('./commands/clean.ts');
      return cleanCommand({
        repo: repoOf(v),
        dryRun: Boolean(v['dry-run']),
        all: Boolean(v.all),
        ...(typeof v.keep === 'string' ? { keep: parseKeep(v.keep) } : {}),
        clock: systemClock,
        print,
      });
    },
  },
  demo: {
    summary: 'a throwaway repository, scripted workers and a full run — no API key needed',
    audience: 'user',
    args: [],
    options: { keep: { type: 'boolean', description: 'keep the throwaway repository afterwards (its path is printed)' } },
    run: async (v) => {
      const { demoCommand } = await import('./commands/demo.ts');
      return demoCommand({ keep: Boolean(v.keep), print, process: true });
    },
  },
  completion: {
    summary: 'print a shell completion script for bash or zsh',
    audience: 'user',
    args: [{ name: 'SHELL', choices: ['bash', 'zsh'], description: 'bash or zsh' }],
    options: {},
    examples: ['eval "$(tron completion bash)"     # in ~/.bashrc', 'eval "$(tron completion zsh)"      # in ~/.zshrc, after compinit'],
    run: async (_v, args) => {
      const { completionScript } = await import('./cli/completion.ts');
      print(completionScript(args[0] === 'zsh' ? 'zsh' : 'bash', COMMANDS));
      return 0;
    },
  },
  help: {
    summary: 'print the commands, or one command’s arguments and options',
    audience: 'user',
    args: [{ name: 'COMMAND', optional: true, complete: 'command', description: 'the command to explain' }],
    options: {},
    run: async (_v, args) => {
      const name = args[0];
      if (name === undefined) print(overview());
      else print(commandHelp(name, known(name)));
      return 0;
    },
  },
  logs: {
    summary: "what the workers are saying: a block's turns as they write them, or the run's events as lines",
    audience: 'user',
    args: [
      {
        name: 'BLOCK',
        optional: true,
        complete: 'block',
        description: "the block whose workers' output to show (default: the run's events)",
      },
    ],
    options: {
      ...repoOption,
      follow: { type: 'boolean', short: 'f', description: 'keep following, across turns, until the run finishes' },
      run: { type: 'string', value: 'RUN', complete: 'run', description: 'a run id or run directory (default: the latest run)' },
    },
    examples: ['tron logs --repo ../myapp -f login', 'tron logs --repo ../myapp'],
    run: async (v, args) => {
      const { logsCommand } = await import('./commands/logs.ts');
      const stop = new AbortController();
      process.once('SIGINT', () => stop.abort());
      return logsCommand({
        repo: repoOf(v),
        ...(args[0] ? { block: args[0] } : {}),
        follow: Boolean(v.follow),
        ...(typeof v.run === 'string' ? { run: v.run } : {}),
        print,
        write: (text) => void process.stdout.write(text),
        signal: stop.signal,
      });
    },
  },
  view: {
    summary: "the workflow diagram with a run's counts per flow and phase, as a page in the run directory",
    audience: 'user',
    args: [runArg],
    options: { ...repoOption, open: { type: 'boolean', description: 'open the page in a browser' } },
    examples: ['tron view --repo ../myapp', 'tron view --repo ../myapp --open'],
    run: async (v, args) => {
      const { viewCommand } = await import('./commands/view.ts');
      return viewCommand({ repo: repoOf(v), ...(args[0] ? { run: args[0] } : {}), open: Boolean(v.open), print });
    },
  },
  docs: {
    summary: 'regenerate docs/ and workflow/ from their sources (--check: verify, write nothing)',
    audience: 'contributor',
    args: [],
    options: { check: { type: 'boolean', description: 'exit 1 naming any stale generated file' } },
    run: async (v) => {
      const { docsCommand } = await import('./commands/docs.ts');
      return docsCommand({ check: Boolean(v.check), print });
    },
  },
  lint: {
    summary: 'lint engine/workflow.toml and the escalation table',
    audience: 'contributor',
    args: [],
    options: {
      spine: { type: 'string', value: 'FILE', complete: 'file', description: 'lint this spine file instead of engine/workflow.toml' },
    },
    run: async (v) => {
      const { lintCommand } = await import('./commands/lint.ts');
      return lintCommand({ ...(typeof v.spine === 'string' ? { spine: resolve(v.spine) } : {}), print });
    },
  },
  sim: {
    summary: 'run the SIM evaluation templates and print a table',
    audience: 'contributor',
    args: [{ name: 'TEMPLATE', optional: true, variadic: true, complete: 'template', description: 'templates to run (default: all)' }],
    options: {
      coverage: { type: 'boolean', description: 'print which templates reach every spine edge; exit 1 if one is unreached' },
      record: { type: 'boolean', description: "write the passing templates' runs as golden runs under runs/" },
      keep: { type: 'boolean', description: "keep every template's temporary repository (failing ones are always kept)" },
    },
    run: async (v, args) => {
      const { simCommand } = await import('./commands/sim.ts');
      return simCommand({ templates: args, coverage: Boolean(v.coverage), record: Boolean(v.record), keep: Boolean(v.keep), print });
    },
  },
};

/** The command named, or an InputError saying which were meant. */
function known(name: string): CommandSpec {
  const command = COMMANDS[name];
  if (command) return command;
  throw new InputError([
    {
      code: 'TRON_USAGE',
      path: 'tron',
      message: `unknown command "${name}"${didYouMean(name, Object.keys(COMMANDS))} (run \`tron help\` for the list)`,
    },
  ]);
}

/** `tron --help`: the user's commands, then the contributor's, then the global options. */
export function overview(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const rows = (audience: CommandSpec['audience']) =>
    Object.entries(COMMANDS)
      .filter(([, c]) => c.audience === audience)
      .map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'tron — a deterministic engine that supervises coding agents',
    '',
    'Usage: tron COMMAND [ARGUMENTS] [OPTIONS]',
    '',
    'Commands:',
    ...rows('user'),
    '',
    'For work on tron itself, in its checkout:',
    ...rows('contributor'),
    '',
    'Options:',
    `  ${'-h, --help'.padEnd(13)}  print this help`,
    `  ${'-v, --version'.padEnd(13)}  print tron's version`,
    '',
    'Run `tron help COMMAND` (or `tron COMMAND --help`) for its arguments and options.',
  ].join('\n');
}

/** Runs the CLI; returns the exit status. */
export async function main(argv: string[]): Promise<number> {
  // --debug, anywhere: stack traces of failures are printed (the engine reads TRON_DEBUG too).
  if (argv.includes('--debug')) process.env.TRON_DEBUG = '1';
  const [name, ...rest] = argv.filter((arg) => arg !== '--debug');
  try {
    if (name === undefined || name === '--help' || name === '-h') {
      print(overview());
      return 0;
    }
    if (name === '--version' || name === '-v') {
      if (rest.length > 0) return refuse(`tron --version takes no arguments; surplus: ${rest.join(' ')}`);
      print(TRON_VERSION);
      return 0;
    }
    if (name.startsWith('-')) {
      const meant = didYouMean(name, ['--help', '--version']);
      return refuse(`unknown option ${name}${meant || '; a command comes first: tron COMMAND [OPTIONS]'}`);
    }
    const command = known(name);
    const parsed = parseCommand(name, command, rest);
    if (!parsed.ok) throw new InputError([parsed.problem]);
    if (parsed.help) {
      print(commandHelp(name, command));
      return 0;
    }
    return await command.run(parsed.values, parsed.positionals);
  } catch (err) {
    if (err instanceof InputError) {
      for (const p of err.problems) console.error(formatProblem(p));
      return 2;
    }
    // A failure tron did not expect: one coded line; the stack only with --debug.
    console.error(`tron ${name ?? ''}: ${codedLine(err as Error, `tron ${name ?? ''}`.trim())}`);
    if (process.env.TRON_DEBUG === '1') console.error((err as Error).stack ?? String(err));
    return 1;
  }
}

function refuse(message: string): number {
  console.error(coded('TRON_USAGE', message));
  return 2;
}
