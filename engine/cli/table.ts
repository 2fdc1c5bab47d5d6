/**
 * One table describes every command of the tron command line — its summary, arguments,
 * options and examples — and feeds the argument check, `--help`, docs/CLI.md and the
 * shell completions. Data only: what each command runs is in engine/cli.ts, keyed on the
 * same names, so the table can be read by the docs without loading any command.
 */
import type { CommandSpec, OptionSpec } from './args.ts';
import { POSTGRES_URL, POSTGRES_URL_FORM } from '../core/database-url.ts';

/** Every --database takes a PostgreSQL URL (the problem never repeats it: it may hold a password). */
const DATABASE_URL = { pattern: POSTGRES_URL, says: POSTGRES_URL_FORM };

export const repoOption = {
  repo: { type: 'string', value: 'DIR', complete: 'dir', description: 'the target repository (default: the current directory)' },
} as const satisfies Record<string, OptionSpec>;
/** --database of the commands that read runs (engine/log/db-read.ts). */
const databaseOption = {
  database: {
    type: 'string',
    form: DATABASE_URL,
    value: 'URL',
    description: "read the run from tron's PostgreSQL database, from any host (RUN is then a run id; with --repo, that repository's runs)",
  },
} as const satisfies Record<string, OptionSpec>;
const runArg = {
  name: 'RUN',
  optional: true,
  complete: 'run',
  description: 'a run directory, or a run id under .tron/runs/ of --repo (default: the latest run)',
} as const;

const TABLE = {
  init: {
    summary: 'scaffold .tron/ (config.toml, blocks/, .gitignore) in a repository',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      worker: { type: 'string', choices: ['openai', 'claude', 'codex', 'sim'], description: 'the worker preset to configure' },
    },
    examples: ['tron init --repo ../myapp --worker claude'],
  },
  start: {
    summary: 'run every ready block to a terminal phase, then exit (0 all landed, 3 parked/abandoned)',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      watch: { type: 'boolean', description: 'stay up; pick up new block files and answers at once' },
      plain: { type: 'boolean', description: 'print time-stamped lines instead of the live board, even on a terminal' },
      standby: {
        type: 'boolean',
        description: 'with [cluster] database: wait while another engine leads, and take over when its lease lapses',
      },
    },
    examples: ['tron start --repo ../myapp', 'tron start --repo ../myapp --watch', 'tron start --repo ../myapp --watch --standby'],
  },
  agent: {
    summary: "run worker turns and test runs for an engine on another host, from [cluster] database's queue, in this clone",
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      database: {
        type: 'string',
        form: DATABASE_URL,
        value: 'URL',
        description: "tron's PostgreSQL database (default: TRON_DATABASE_URL, then [cluster] database)",
      },
      slots: { type: 'string', value: 'N', description: 'how many jobs (turns, test runs) to run at once (default 1)' },
      roles: {
        type: 'string',
        value: 'ROLES',
        description:
          'the jobs to claim, comma-separated: builder, reviewer, architect (turns), test (test runs) (default builder,reviewer,test)',
      },
    },
    examples: [
      'tron agent --repo ~/clones/myapp --database postgres://tron_agent@db.example/tron --slots 2 --roles builder,reviewer',
      'tron agent --repo ~/clones/myapp --database postgres://tron_agent@db.example/tron --roles test',
    ],
  },
  status: {
    summary: 'the phase, attempt, age and reason of every block, folded from the events',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      json: { type: 'boolean', description: 'print JSON (camelCase keys, times in ms)' },
      database: {
        type: 'string',
        form: DATABASE_URL,
        value: 'URL',
        description: "read the latest run from tron's PostgreSQL database (any host; no repository needed)",
      },
    },
    examples: ['tron status --repo ../myapp', 'tron status --database postgres://tron@db.example/tron'],
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
  },
  report: {
    summary: 'run statistics, from the events alone',
    audience: 'user',
    args: [runArg],
    options: {
      ...repoOption,
      json: { type: 'boolean', description: 'print JSON (camelCase keys, times in ms)' },
      database: {
        type: 'string',
        form: DATABASE_URL,
        value: 'URL',
        description: "read the run from tron's PostgreSQL database (any host); RUN is then a run id",
      },
    },
    examples: [
      'tron report --repo ../myapp',
      'tron report --repo ../myapp 20261130-024812-001 --json',
      'tron report --database postgres://tron@db.example/tron',
    ],
  },
  replay: {
    summary: 're-drive a recorded run and prove the same decisions',
    audience: 'user',
    args: [runArg],
    options: { ...repoOption, ...databaseOption },
    examples: ['tron replay --repo ../myapp', 'tron replay runs/happy-deps', 'tron replay --database postgres://tron@db.example/tron'],
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
  },
  demo: {
    summary: 'a throwaway repository, scripted workers and a full run — no API key needed',
    audience: 'user',
    args: [],
    options: { keep: { type: 'boolean', description: 'keep the throwaway repository afterwards (its path is printed)' } },
  },
  completion: {
    summary: 'print a shell completion script for bash or zsh',
    audience: 'user',
    args: [{ name: 'SHELL', choices: ['bash', 'zsh'], description: 'bash or zsh' }],
    options: {},
    examples: ['eval "$(tron completion bash)"     # in ~/.bashrc', 'eval "$(tron completion zsh)"      # in ~/.zshrc, after compinit'],
  },
  help: {
    summary: 'print the commands, or one command’s arguments and options',
    audience: 'user',
    args: [{ name: 'COMMAND', optional: true, complete: 'command', description: 'the command to explain' }],
    options: {},
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
      ...databaseOption,
    },
    examples: [
      'tron logs --repo ../myapp -f login',
      'tron logs --repo ../myapp',
      'tron logs -f --database postgres://tron@db.example/tron',
    ],
  },
  serve: {
    summary: 'the HTTP API, the live event stream and the dashboard in a browser (docs/serve.md)',
    audience: 'user',
    args: [],
    options: {
      ...repoOption,
      host: { type: 'string', value: 'HOST', description: 'the address to bind (default 127.0.0.1; another needs TRON_SERVE_TOKEN)' },
      port: { type: 'string', value: 'PORT', description: 'the port (default 4680; 0: any free port)' },
      database: {
        type: 'string',
        form: DATABASE_URL,
        value: 'URL',
        description:
          "serve the latest run in tron's PostgreSQL database, from any host (with --repo, that repository's); answers are refused",
      },
    },
    examples: ['tron serve --repo ../myapp', 'TRON_SERVE_TOKEN=… tron serve --repo ../myapp --host 0.0.0.0 --port 8080'],
  },
  view: {
    summary: "the workflow diagram with a run's counts per flow and phase, as a page in the run directory",
    audience: 'user',
    args: [runArg],
    options: { ...repoOption, open: { type: 'boolean', description: 'open the page in a browser' }, ...databaseOption },
    examples: ['tron view --repo ../myapp', 'tron view --repo ../myapp --open'],
  },
  docs: {
    summary: 'regenerate docs/ and workflow/ from their sources (--check: verify, write nothing)',
    audience: 'contributor',
    args: [],
    options: { check: { type: 'boolean', description: 'exit 1 naming any stale generated file' } },
  },
  lint: {
    summary: 'lint engine/workflow.toml and the escalation table',
    audience: 'contributor',
    args: [],
    options: {
      spine: { type: 'string', value: 'FILE', complete: 'file', description: 'lint this spine file instead of engine/workflow.toml' },
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
  },
} satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof TABLE;
/** Every command by name. */
export const COMMANDS: Record<string, CommandSpec> = TABLE;
