/**
 * The tron command line. One table describes every command — its summary, usage and
 * options — and feeds both the argument parser and `--help`. This is the only module
 * that turns errors into exit statuses: a user mistake (InputError) prints its coded
 * problems and exits 2, never a stack trace.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { InputError, formatProblem } from './core/errors.ts';
import { coded } from './core/problems.ts';
import { systemClock } from './core/clock.ts';
import { codedLine } from './runtime/failure.ts';

type Values = Record<string, string | boolean | undefined>;

interface CommandSpec {
  summary: string;
  usage: string;
  options: Record<string, { type: 'string' | 'boolean'; description: string }>;
  /** false for commands that are planned but not built yet. */
  run: ((values: Values, positionals: string[]) => Promise<number>) | false;
}

const print = (line: string) => console.log(line);
const repoOption = { repo: { type: 'string', description: 'the target repository (default: the current directory)' } } as const;
const repoOf = (v: Values) => resolve(typeof v.repo === 'string' ? v.repo : '.');

export const COMMANDS: Record<string, CommandSpec> = {
  init: {
    summary: 'scaffold .tron/ (config.toml, blocks/, .gitignore) in a repository',
    usage: 'tron init [--repo DIR] [--worker openai|claude|codex|sim]',
    options: { ...repoOption, worker: { type: 'string', description: 'the worker preset to configure' } },
    run: async (v) => {
      const { initCommand } = await import('./commands/init.ts');
      const { isPresetName } = await import('./workers/presets.ts');
      const worker = typeof v.worker === 'string' ? v.worker : undefined;
      if (worker !== undefined && !isPresetName(worker)) {
        throw new InputError([
          { code: 'TRON_USAGE', path: '--worker', message: `"${worker}" is not a preset; use openai, claude, codex or sim` },
        ]);
      }
      return initCommand({ repo: repoOf(v), ...(worker ? { worker } : {}), print });
    },
  },
  start: {
    summary: 'run every ready block to a terminal phase, then exit (0 all landed, 3 parked/abandoned)',
    usage: 'tron start [--repo DIR] [--watch]',
    options: { ...repoOption, watch: { type: 'boolean', description: 'stay up; pick up new block files and answers at once' } },
    run: async (v) => {
      const { startCommand } = await import('./commands/start.ts');
      return startCommand({ repo: repoOf(v), watch: Boolean(v.watch), clock: systemClock, env: process.env, print, signals: true });
    },
  },
  status: {
    summary: 'the phase, attempt and age of every block, folded from the events',
    usage: 'tron status [--repo DIR] [--json]',
    options: { ...repoOption, json: { type: 'boolean', description: 'print JSON' } },
    run: async (v) => {
      const { statusCommand } = await import('./commands/status.ts');
      return statusCommand({ repo: repoOf(v), json: Boolean(v.json), clock: systemClock, print });
    },
  },
  answer: {
    summary: 'answer a parked block as the operator: \'>>RETRY {"guidance":"…"}\' or \'>>ABANDON {"reason":"…"}\'',
    usage: "tron answer [--repo DIR] BLOCK '>>WORD {json}'",
    options: { ...repoOption },
    run: async (v, args) => {
      const { answerCommand } = await import('./commands/answer.ts');
      return answerCommand({ repo: repoOf(v), block: args[0], line: args[1], clock: systemClock, print });
    },
  },
  docs: {
    summary: 'regenerate docs/ and workflow/ from their sources (--check: verify, write nothing)',
    usage: 'tron docs [--check]',
    options: { check: { type: 'boolean', description: 'exit 1 naming any stale generated file' } },
    run: async (v) => {
      const { docsCommand } = await import('./commands/docs.ts');
      return docsCommand({ check: Boolean(v.check), print });
    },
  },
  lint: {
    summary: 'lint engine/workflow.toml and the escalation table',
    usage: 'tron lint [--spine FILE]',
    options: { spine: { type: 'string', description: 'lint this spine file instead of engine/workflow.toml' } },
    run: async (v) => {
      const { lintCommand } = await import('./commands/lint.ts');
      return lintCommand({ ...(typeof v.spine === 'string' ? { spine: resolve(v.spine) } : {}), print });
    },
  },
  sim: {
    summary: 'run the SIM evaluation templates and print a table',
    usage: 'tron sim [TEMPLATE...] [--coverage] [--record] [--keep]',
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
  replay: {
    summary: 're-drive a recorded run and prove the same decisions',
    usage: 'tron replay RUN_DIR',
    options: {},
    run: async (_v, args) => {
      const { replayCommand } = await import('./commands/replay.ts');
      return replayCommand({ runDir: args[0], print });
    },
  },
  report: {
    summary: 'run statistics, from events only',
    usage: 'tron report RUN_DIR [--json]',
    options: { json: { type: 'boolean', description: 'print JSON' } },
    run: async (v, args) => {
      const { reportCommand } = await import('./commands/report.ts');
      return reportCommand({ runDir: args[0], json: Boolean(v.json), print });
    },
  },
  demo: {
    summary: 'a throwaway repository, scripted workers and a full run — no API key needed',
    usage: 'tron demo [--keep]',
    options: { keep: { type: 'boolean', description: 'keep the throwaway repository (its path is printed)' } },
    run: async (v) => {
      const { demoCommand } = await import('./commands/demo.ts');
      return demoCommand({ keep: Boolean(v.keep), print });
    },
  },
};

function help(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}${c.run ? '' : ' (not built yet)'}`);
  return [
    'tron — a deterministic engine that supervises coding agents',
    '',
    'Usage: tron <command> [options]',
    '',
    'Commands:',
    ...rows,
    '',
    'Every command has --help.',
  ].join('\n');
}

function commandHelp(name: string, c: CommandSpec): string {
  const opts = Object.entries(c.options).map(([o, d]) => `  --${o}${d.type === 'string' ? ' VALUE' : ''}  ${d.description}`);
  return [
    `${c.usage}`,
    '',
    c.summary,
    ...(opts.length ? ['', 'Options:', ...opts] : []),
    ...(c.run ? [] : ['', `tron ${name} is not built yet.`]),
  ].join('\n');
}

/** Runs the CLI; returns the exit status. */
export async function main(argv: string[]): Promise<number> {
  // --debug, anywhere: stack traces of failures are printed (the engine reads TRON_DEBUG too).
  if (argv.includes('--debug')) process.env.TRON_DEBUG = '1';
  const [name, ...rest] = argv.filter((arg) => arg !== '--debug');
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    print(help());
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    console.error(coded('TRON_USAGE', `unknown command "${name}"; run \`npx tron --help\` for the list`));
    return 2;
  }
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      options: { ...command.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
    if (values.help) {
      print(commandHelp(name, command));
      return 0;
    }
    if (!command.run) {
      console.error(`tron ${name} is not built yet. See \`npx tron --help\` for what is.`);
      return 1;
    }
    return await command.run(values as Values, positionals);
  } catch (err) {
    if (err instanceof InputError) {
      for (const p of err.problems) console.error(formatProblem(p));
      return 2;
    }
    if (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) {
      console.error(coded('TRON_USAGE', `${err.message}; usage: ${command.usage}`));
      return 2;
    }
    // A failure tron did not expect: one coded line; the stack only with --debug.
    console.error(`tron ${name}: ${codedLine(err as Error, `tron ${name}`)}`);
    if (process.env.TRON_DEBUG === '1') console.error((err as Error).stack ?? String(err));
    return 1;
  }
}
