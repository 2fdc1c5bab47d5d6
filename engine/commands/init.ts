/**
 * `tron init`: scaffold `.tron/` in a git repository — a commented config that loads as
 * written, an example block, and the .gitignore for what the engine writes at run time.
 * It never overwrites: if the config or the register already exist, nothing changes.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CONFIG_DEFAULTS, CONFIG_FILE } from '../project/config.ts';
import { formatDuration } from '../core/duration.ts';
import { formatProblem, type Problem } from '../core/errors.ts';
import { currentBranch, topLevel } from '../git/index.ts';
import { BLOCKS_DIR } from '../project/register.ts';
import type { Liveness } from '../spine/spine.ts';
import { loadSpine } from '../spine/load.ts';
import { isPresetName, PRESET_NAMES, WORKER_PRESETS, type PresetName } from '../workers/presets.ts';
import { findProgram, INSTALL_HINTS } from '../workers/preflight.ts';

/** The preset `tron init` writes without `--worker`: a real agent, on any OpenAI-compatible API. */
export const DEFAULT_PRESET: PresetName = 'openai';

/** What the engine writes under `.tron/` at run time, kept out of git. */
export const GITIGNORE_LINES = ['runs/', 'worktrees/', 'inbox/', 'sim-state/', 'engine.lock'] as const;

export interface InitOptions {
  repo: string;
  worker?: PresetName;
  print: (line: string) => void;
  /** Where the claude and codex presets' programs are looked for (default: this process's). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** The sim script `tron init --worker sim` writes, relative to the repository. */
export const SIM_SCRIPT = '.tron/sim.toml';

/** Project files that give away the usual test command, first match wins. */
const TEST_COMMANDS: ReadonlyArray<readonly [string, string]> = [
  ['package.json', 'npm test'],
  ['Cargo.toml', 'cargo test'],
  ['go.mod', 'go test ./...'],
  ['pyproject.toml', 'python -m pytest'],
  ['setup.py', 'python -m pytest'],
  ['Makefile', 'make test'],
];

/**
 * The likely test command for a repository whose top level holds `files`; undefined when
 * nothing gives it away — then the config gets a commented placeholder, and `tron start`
 * says the test command is missing (TRON_CONFIG_REQUIRED) rather than run a guess.
 */
export function guessTestCommand(files: readonly string[]): string | undefined {
  return TEST_COMMANDS.find(([file]) => files.includes(file))?.[1];
}

/** The names `guessTestCommand` looks for, for the placeholder's comment. */
const LOOKED_FOR = TEST_COMMANDS.map(([file]) => file).join(', ');

const q = (s: string) => JSON.stringify(s);
/** `key = value` with its comment, comments aligned where the value is short. */
const row = (setting: string, comment: string) => `${setting.padEnd(24)} # ${comment}`;

/** The generated `.tron/config.toml`: every field, each with a comment saying what it does. */
export function renderConfig(opts: { trunk: string; test: string | undefined; preset: PresetName; liveness: Liveness }): string {
  const live = opts.liveness;
  return `# tron settings for this repository (checked in). Unknown keys are errors, so a typo
# is reported, never ignored. Durations are written "90s", "20m", "1h" or "1h30m".

${row(`trunk = ${q(opts.trunk)}`, 'the branch blocks land on; only tron should move it while it runs')}
${row(`max_parallel = ${CONFIG_DEFAULTS.max_parallel}`, 'build/review slots at once')}
${
  opts.test === undefined
    ? `# test = "…"   # REQUIRED: tron init found none of ${LOOKED_FOR}; write the command that runs
#                 your tests (exit 0 = green), e.g. test = "make check"; tron start refuses to run without it`
    : row(`test = ${q(opts.test)}`, "the engine's own test command, run by a shell at each head; exit 0 = green")
}
${row('# test_env = ["DATABASE_URL"]', 'variables of your environment the tests see, beyond PATH, HOME, LANG, TERM')}

[timeouts]
${row(`turn = ${q(CONFIG_DEFAULTS.timeouts.turn)}`, 'budget of one worker turn; an overrun worker is probed before anyone is paged')}
${row(`test = ${q(CONFIG_DEFAULTS.timeouts.test)}`, 'budget of one engine test run; past it the run is red and every process it started ends')}

# Who does the work: [workers.builder] and [workers.reviewer] are required.
# [workers.architect] is optional: without it, troubles that would consult the
# architect (a BLOCKED builder, spent budgets, replies it cannot read) go straight to
# the operator (you, through \`tron answer\`).
# adapter = "openai" (built-in agent) | "command" (any agent CLI) | "sim" (scripted).
# Preset: ${opts.preset} — ${WORKER_PRESETS[opts.preset].describe}.
# Other presets: tron init --worker ${PRESET_NAMES.join('|')} (run it in a scratch repository to copy one).

${WORKER_PRESETS[opts.preset].toml}
# Run whenever the operator is paged, with the page as one JSON object on stdin
# (an argv list, no shell). For example, a push notification through ntfy.sh:
# page_command = ["curl", "-sS", "--data-binary", "@-", "https://ntfy.sh/my-tron-pages"]

# The sandbox workers and tests run in (docs/SECURITY.md in the tron checkout): they
# can write only their own worktree and branch, and what \`writable\` lists. "auto" uses
# bubblewrap where it runs and says at start when it cannot; "bwrap" requires it.
# [sandbox]
${row('# mode = "auto"', '"auto" | "bwrap" | "off"')}
${row('# test_network = false', 'whether test runs may use the network (workers always may)')}

# Liveness — talk before you page. Uncomment to override the engine's spine values.
# [liveness]
${row(`# probe_wait = ${q(formatDuration(live.probeWaitMs))}`, 'how long a probe waits for signs of life or a WORKING reply')}
${row(`# extension = ${q(formatDuration(live.extensionMs))}`, 'time granted per sign of life')}
${row(`# max_extensions = ${live.maxExtensions}`, 'extensions per turn before the overrun counts as a hang')}
${row(`# reissues = ${live.reissues}`, 'times a silent turn is issued again before the operator is paged')}

# Prices in USD per million tokens, for workers that report tokens but no cost (Codex,
# the built-in agent); Claude Code reports its own cost. Each turn's tokens and cost are
# usage.recorded events, totalled per block, role and run in report.md. Keys are model
# names, or patterns with * ("claude-*").
# [prices."gpt-5.1"]
# input = 1.25
# cached = 0.125
# output = 10.0

# Budgets stop a runaway block or run. A block past block_usd or block_tokens has its
# running turn stopped and is parked for you with its spend (RETRY gives it a new budget
# of the same size); past run_usd no new turn starts and the run ends with exit 3.
# [budgets]
# block_usd = 2.0
# block_tokens = 2000000
# run_usd = 20.0
`;
}

/** The generated `.tron/blocks/example.md`: a valid block that shows every field. */
export function renderExampleBlock(test: string | undefined): string {
  const command = test === undefined ? '' : `: ${test.replace(/["\\]/g, '\\$&')}`;
  return `+++
# One block per file; the id is the file name (lower-case letters, digits, dashes).
# Edit this into your first real block, or delete it.
title = "Document how to run the tests"
# depends_on = ["other-block"]   # ids of blocks that must land first
# priority = 0                    # lower runs first; ties break by id
criteria = [                      # what the builder must give evidence for, one by one
  "README.md has a section named \\"Running the tests\\"",
  "that section gives the exact command that runs the suite${command}",
]
+++
The brief for the builder, in Markdown: what to do and why, and anything it should
know about the code. The builder works on its own branch in its own worktree; tron
runs the test command itself before anything is reviewed or lands.

Add a short "Running the tests" section to README.md (create the file if there is
none) that tells a new contributor how to run the test suite.
`;
}

/**
 * The generated `.tron/sim.toml` (the sim preset): a script for the example block that
 * does what it asks, and a `"*"` default that every other block plays, so the blocks a
 * newcomer adds land too — each with a note file as its stand-in for real work.
 */
export function renderSimScript(test: string | undefined): string {
  const section = `\n## Running the tests\n\n${test === undefined ? 'See the test command in .tron/config.toml.' : `Run the suite with \`${test}\`.`}\n`;
  const note = [
    '# {block}',
    '',
    "The sim builder's stand-in for the work of block {block}: a scripted worker writes no code.",
    'Give the block a script of its own in .tron/sim.toml, or run a real worker',
    '(tron init --worker openai|claude|codex in a scratch repository shows their settings).',
    '',
  ].join('\n');
  return `# The sim workers' script: per block and role, what each turn does, in order — write
# files, append to them, commit, run a shell line, reply. Where an entry says nothing, the
# worker answers like an honest one (>>DONE, evidence for every criterion, >>APPROVE).
# The whole format: docs/workers.md in the tron checkout.

# The example block: append the section it asks for to README.md, and commit.
[[blocks.example.builder]]
append = { "README.md" = ${q(section)} }
commit = "README: how to run the tests"

# To script a block of your own, add its entries by id, e.g. for .tron/blocks/login.md:
# [[blocks.login.builder]]
# write = { "src/login.js" = "export const login = () => 'token';\\n" }
# commit = "Add login"

# Every block without a script of its own plays this one; {block} stands for its id.
# Its builder commits a note file, so the block gets past the truth gate and lands.
[[blocks."*".builder]]
write = { "sim-work/{block}.md" = ${q(note)} }
commit = "{block}: the sim builder's stand-in work"
`;
}

/** Where `repo` sits in git: its work-tree top level and current branch, or a problem. */
async function gitFacts(repo: string): Promise<{ top: string; branch?: string } | Problem> {
  const notRepo = (why: string): Problem => ({
    code: 'TRON_NOT_A_REPO',
    path: repo,
    message: `${why}; run tron init at the top of a git repository (git init creates one)`,
  });
  if (!existsSync(repo)) return notRepo('no such directory');
  if (!statSync(repo).isDirectory()) return notRepo('not a directory');
  const root = await topLevel(repo);
  if (root === undefined) return notRepo('not inside a git work tree');
  if (realpathSync(root) !== realpathSync(repo)) {
    return {
      code: 'TRON_NOT_A_REPO',
      path: repo,
      message: `this is inside the git repository ${root}, not its top; run tron init --repo ${root}`,
    };
  }
  const branch = await currentBranch(repo);
  return branch === undefined ? { top: root } : { top: root, branch };
}

/** The agent CLI a command preset runs, when it is not on PATH. */
function missingProgram(preset: PresetName, env: Readonly<Record<string, string | undefined>>, repo: string): string | undefined {
  if (preset !== 'claude' && preset !== 'codex') return undefined;
  return findProgram(preset, env.PATH, repo) ? undefined : preset;
}

function fail(problems: Problem[], print: (line: string) => void): number {
  for (const p of problems) print(formatProblem(p));
  return 2;
}

/**
 * Scaffolds `.tron/` in `opts.repo`. Returns 0 when created, 2 (printing the problem)
 * when the repository is not a git work tree top or tron is already set up there.
 */
export async function initCommand(opts: InitOptions): Promise<number> {
  const preset = opts.worker ?? DEFAULT_PRESET;
  if (!isPresetName(preset)) {
    const message = `"${String(preset)}" is not a worker preset; use one of ${PRESET_NAMES.join(', ')}`;
    return fail([{ code: 'TRON_INIT_WORKER', path: '--worker', message }], opts.print);
  }
  const facts = await gitFacts(opts.repo);
  if ('code' in facts) return fail([facts], opts.print);

  const repo = opts.repo;
  const existing = [CONFIG_FILE, BLOCKS_DIR].filter((rel) => existsSync(path.join(repo, rel)));
  if (existing.length > 0) {
    return fail(
      existing.map((rel) => ({
        code: 'TRON_INIT_EXISTS',
        path: rel,
        message: 'tron is already set up here; nothing was changed (edit the files, or remove them and run tron init again)',
      })),
      opts.print,
    );
  }

  const test = guessTestCommand(readdirSync(repo));
  const trunk = facts.branch ?? CONFIG_DEFAULTS.trunk;
  const config = renderConfig({ trunk, test, preset, liveness: loadSpine().liveness });
  const gitignore = path.join(repo, '.tron/.gitignore');
  const kept = existsSync(gitignore) ? readFileSync(gitignore, 'utf8') : undefined;
  const missing = GITIGNORE_LINES.filter((line) => !(kept ?? '').split(/\r?\n/).includes(line));

  mkdirSync(path.join(repo, BLOCKS_DIR), { recursive: true });
  writeFileSync(path.join(repo, CONFIG_FILE), config, { flag: 'wx' });
  writeFileSync(path.join(repo, BLOCKS_DIR, 'example.md'), renderExampleBlock(test), { flag: 'wx' });
  const script = preset === 'sim' && !existsSync(path.join(repo, SIM_SCRIPT));
  if (script) writeFileSync(path.join(repo, SIM_SCRIPT), renderSimScript(test), { flag: 'wx' });
  if (kept === undefined) writeFileSync(gitignore, `${GITIGNORE_LINES.join('\n')}\n`, { flag: 'wx' });
  else if (missing.length > 0) writeFileSync(gitignore, `${kept}${kept.endsWith('\n') || kept === '' ? '' : '\n'}${missing.join('\n')}\n`);

  const tested = test === undefined ? 'no test command: set test' : `test "${test}"`;
  opts.print(`created ${CONFIG_FILE} (trunk ${trunk}, ${tested}, workers: ${preset} — ${WORKER_PRESETS[preset].describe})`);
  opts.print(`created ${BLOCKS_DIR}/example.md (an example block: edit it or replace it)`);
  if (script)
    opts.print(`created ${SIM_SCRIPT} (what the sim workers do: a script for the example block, and a default every other block plays)`);
  if (kept === undefined) opts.print(`created .tron/.gitignore (${GITIGNORE_LINES.join(', ')})`);
  else if (missing.length > 0) opts.print(`added ${missing.join(', ')} to .tron/.gitignore`);
  const program = missingProgram(preset, opts.env ?? process.env, repo);
  if (program) {
    opts.print('');
    opts.print(`warning: "${program}" is not on PATH; tron start will refuse to run until it is: ${INSTALL_HINTS[program]}, then log in`);
  }
  if (test === undefined) {
    opts.print('');
    opts.print(`warning: no ${LOOKED_FOR} here to tell the test command; set test in ${CONFIG_FILE} before tron start`);
  }
  opts.print('');
  opts.print(`next: check trunk and test in ${CONFIG_FILE}, write your blocks in ${BLOCKS_DIR}/, then run`);
  opts.print(`  tron start --repo ${repo}`);
  return 0;
}
