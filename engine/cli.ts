/**
 * The tron command line: the table of commands (engine/cli/table.ts) checks the
 * arguments, and HANDLERS below runs each command. This is the only module that turns errors
 * into exit statuses: a user mistake (InputError) prints its coded problems and exits 2,
 * never a stack trace.
 *
 * It stays small to import: `tron --version` and `--help` load this file and the table's
 * helpers only; each command's module is imported when that command runs.
 */
import { resolve } from 'node:path';
import { InputError, formatProblem } from './core/errors.ts';
import { coded } from './core/problems.ts';
import { systemClock } from './os/clock.ts';
import { codedLine } from './runtime/failure.ts';
import { isConnectionLoss, readLostLine } from './log/db-lost.ts';
import { commandHelp, parseCommand, type CommandSpec, type Values } from './cli/args.ts';
import { COMMANDS, type CommandName } from './cli/table.ts';
import { missingRepo } from './cli/repo-arg.ts';
import { didYouMean } from './core/suggest.ts';
import { TRON_VERSION } from './root.ts';

export type { CommandSpec } from './cli/args.ts';
export { COMMANDS } from './cli/table.ts';

type Handler = (values: Values, positionals: string[]) => Promise<number>;

const print = (line: string) => console.log(line);

/**
 * The environment of a command that runs workers, tests or a server: the copy bin/tron.js
 * took before it scrubbed the process (bin/own-env.js); called in-process (tests), the
 * process's own.
 */
function engineEnv(): Record<string, string | undefined> {
  const taken = (globalThis as Record<symbol, unknown>)[Symbol.for('tron.engine-environment')];
  return taken ? (taken as Record<string, string>) : { ...process.env };
}

const repoOf = (v: Values) => resolve(typeof v.repo === 'string' ? v.repo : '.');
/** The commands that read runs: --database, and whether --repo narrows it (engine/log/db-read.ts). */
const dbRead = (v: Values) => ({
  ...(typeof v.database === 'string' ? { database: v.database } : {}),
  repoGiven: typeof v.repo === 'string',
  env: process.env,
});

/** What each command runs: its module is imported only when that command runs. */
const HANDLERS: { [K in CommandName]: Handler } = {
  init: async (v) => {
    const { initCommand } = await import('./commands/init.ts');
    const { isPresetName } = await import('./workers/presets.ts');
    const worker = typeof v.worker === 'string' && isPresetName(v.worker) ? v.worker : undefined;
    return initCommand({ repo: repoOf(v), ...(worker ? { worker } : {}), print });
  },
  start: async (v) => {
    const env = engineEnv();
    const { startCommand } = await import('./commands/start.ts');
    return startCommand({
      repo: repoOf(v),
      watch: Boolean(v.watch),
      plain: Boolean(v.plain),
      output: process.stdout,
      clock: systemClock,
      env,
      print,
      signals: true,
      standby: Boolean(v.standby),
    });
  },
  agent: async (v) => {
    const env = engineEnv();
    const { agentCommand } = await import('./commands/agent.ts');
    return agentCommand({
      repo: repoOf(v),
      ...(typeof v.database === 'string' ? { database: v.database } : {}),
      ...(typeof v.slots === 'string' ? { slots: Number(v.slots) } : {}),
      ...(typeof v.roles === 'string' ? { roles: v.roles.split(',').map((r) => r.trim()) } : {}),
      clock: systemClock,
      env,
      print,
      signals: true,
    });
  },
  status: async (v) => {
    const { statusCommand } = await import('./commands/status.ts');
    return statusCommand({
      repo: repoOf(v),
      json: Boolean(v.json),
      clock: systemClock,
      print,
      ...dbRead(v),
    });
  },
  answer: async (v, args) => {
    const { answerCommand } = await import('./commands/answer.ts');
    return answerCommand({ repo: repoOf(v), block: args[0], line: args[1], clock: systemClock, print, env: process.env });
  },
  report: async (v, args) => {
    const { reportCommand } = await import('./commands/report.ts');
    return reportCommand({
      repo: repoOf(v),
      run: args[0],
      json: Boolean(v.json),
      print,
      ...(typeof v.database === 'string' ? { database: v.database } : {}),
      env: process.env,
    });
  },
  replay: async (v, args) => {
    const { replayCommand } = await import('./commands/replay.ts');
    return replayCommand({ repo: repoOf(v), run: args[0], print, ...dbRead(v) });
  },
  clean: async (v) => {
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
  demo: async (v) => {
    const { demoCommand } = await import('./commands/demo.ts');
    return demoCommand({ keep: Boolean(v.keep), print, process: true });
  },
  completion: async (_v, args) => {
    const { completionScript } = await import('./cli/completion.ts');
    print(completionScript(args[0] === 'zsh' ? 'zsh' : 'bash', COMMANDS));
    return 0;
  },
  help: async (_v, args) => {
    const name = args[0];
    if (name === undefined) print(overview());
    else print(commandHelp(name, COMMANDS[known(name)]!));
    return 0;
  },
  logs: async (v, args) => {
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
      ...dbRead(v),
    });
  },
  serve: async (v) => {
    const env = engineEnv();
    const { serveCommand, parsePort } = await import('./commands/serve.ts');
    const stop = new AbortController();
    process.once('SIGINT', () => stop.abort());
    process.once('SIGTERM', () => stop.abort());
    return serveCommand({
      repo: repoOf(v),
      ...(typeof v.host === 'string' ? { host: v.host } : {}),
      ...(typeof v.port === 'string' ? { port: parsePort(v.port) } : {}),
      clock: systemClock,
      env,
      print,
      signal: stop.signal,
      ...(typeof v.database === 'string' ? { database: v.database } : {}),
      repoGiven: typeof v.repo === 'string',
    });
  },
  view: async (v, args) => {
    const { viewCommand } = await import('./commands/view.ts');
    return viewCommand({ repo: repoOf(v), ...(args[0] ? { run: args[0] } : {}), open: Boolean(v.open), print, ...dbRead(v) });
  },
  docs: async (v) => {
    const { docsCommand } = await import('./commands/docs.ts');
    return docsCommand({ check: Boolean(v.check), print });
  },
  lint: async (v) => {
    const { lintCommand } = await import('./commands/lint.ts');
    return lintCommand({ ...(typeof v.spine === 'string' ? { spine: resolve(v.spine) } : {}), print });
  },
  sim: async (v, args) => {
    const { simCommand } = await import('./commands/sim.ts');
    return simCommand({ templates: args, coverage: Boolean(v.coverage), record: Boolean(v.record), keep: Boolean(v.keep), print });
  },
};

/** The command named, or an InputError saying which were meant. */
function known(name: string): CommandName {
  if (Object.hasOwn(COMMANDS, name)) return name as CommandName;
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
    Object.entries(COMMANDS as Record<string, CommandSpec>)
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
    const which = known(name);
    const command = COMMANDS[which]!;
    const parsed = parseCommand(name, command, rest);
    if (!parsed.ok) throw new InputError([parsed.problem]);
    if (parsed.help) {
      print(commandHelp(name, command));
      return 0;
    }
    // A --repo that names nothing is said so by every command alike, before any of them looks inside it.
    const missing = typeof parsed.values.repo === 'string' ? missingRepo(resolve(parsed.values.repo)) : undefined;
    if (missing) throw new InputError([missing]);
    return await HANDLERS[which](parsed.values, parsed.positionals);
  } catch (err) {
    if (err instanceof InputError) {
      for (const p of err.problems) console.error(formatProblem(p));
      return 2;
    }
    // A command that only reads runs and lost the database midway changed nothing: said as the database's doing.
    if (name !== undefined && READERS.has(name) && isConnectionLoss(err)) {
      console.error(`tron ${name}: ${readLostLine(name, err)}`);
      return 1;
    }
    // A failure tron did not expect: one coded line; the stack only with --debug.
    console.error(`tron ${name ?? ''}: ${codedLine(err as Error, `tron ${name ?? ''}`.trim())}`);
    if (process.env.TRON_DEBUG === '1') console.error((err as Error).stack ?? String(err));
    return 1;
  }
}

/** The commands that only read runs (from the database with --database or [cluster]). */
const READERS = new Set(['status', 'logs', 'report', 'replay', 'view', 'serve']);

function refuse(message: string): number {
  console.error(coded('TRON_USAGE', message));
  return 2;
}
