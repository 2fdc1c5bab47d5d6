/**
 * `tron demo`: the whole spine on a throwaway repository with scripted (sim) workers —
 * no API key. Three blocks: two in parallel (the second must bring its branch up to
 * date before it lands), one that depends on another, and one whose first DONE is a
 * lie the truth gate catches.
 */
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { repoStateDir } from '../log/keys.ts';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import { startCommand } from './start.ts';
import { firstParentLog } from '../git/index.ts';
import { systemClock } from '../os/clock.ts';

const IDENTITY = {
  GIT_AUTHOR_NAME: 'tron demo',
  GIT_AUTHOR_EMAIL: 'demo@tron.invalid',
  GIT_COMMITTER_NAME: 'tron demo',
  GIT_COMMITTER_EMAIL: 'demo@tron.invalid',
};

const RUNNER = `// Runs every tests/*.test.js; exit 1 on the first failure.
const { readdirSync } = require('node:fs');
for (const f of readdirSync(__dirname + '/tests').filter((f) => f.endsWith('.test.js')).sort()) {
  require('./tests/' + f);
  console.log('ok', f);
}
`;

export const DEMO_FILES: Record<string, string> = {
  'package.json': '{ "name": "demo-app", "private": true, "scripts": { "test": "node test.js" } }\n',
  'test.js': RUNNER,
  'tests/smoke.test.js': "require('node:assert').ok(true);\n",
  'README.md': '# demo-app\n\nA tiny project for the tron demo.\n',
  '.gitignore': 'node_modules/\n',
  '.tron/.gitignore': 'runs/\nworktrees/\ninbox/\nsim-state/\nengine.lock\n',
  '.tron/config.toml': `# The demo's config: scripted workers, the project's own test command.
trunk = "main"
max_parallel = 2
test = "node test.js"

[timeouts]
turn = "2m"
test = "1m"

[workers.builder]
adapter = "sim"
script = ".tron/sim.toml"

[workers.reviewer]
adapter = "sim"
script = ".tron/sim.toml"
`,
  '.tron/blocks/greeting.md': `+++
title = "A greeting module"
priority = 1
criteria = ["greet(name) returns 'Hello, <name>!'", "a test covers it"]
+++
Add \`greet.js\` exporting \`greet(name)\`, with a test.
`,
  '.tron/blocks/farewell.md': `+++
title = "A farewell that builds on the greeting"
depends_on = ["greeting"]
criteria = ["farewell(name) returns the greeting followed by 'Goodbye.'"]
+++
Add \`farewell.js\` using \`greet\`, with a test.
`,
  '.tron/blocks/shout.md': `+++
title = "Shouting"
priority = 2
criteria = ["shout(text) upper-cases text and adds '!'"]
+++
Add \`shout.js\` exporting \`shout(text)\`, with a test.
`,
  '.tron/sim.toml': `# What the scripted workers do, turn by turn. Unscripted turns get honest defaults.

[[blocks.greeting.builder]]
write = { "greet.js" = "exports.greet = (name) => 'Hello, ' + name + '!';\\n", "tests/greet.test.js" = "const assert = require('node:assert');\\nconst { greet } = require('../greet.js');\\nassert.strictEqual(greet('Ada'), 'Hello, Ada!');\\n" }
commit = "Add greet()"
reply = '>>DONE {"summary":"greet() with a test"}'

[[blocks.shout.builder]]
# The lie: claims DONE having committed nothing. The truth gate checks for itself.
reply = ">>DONE"

[[blocks.shout.builder]]
write = { "shout.js" = "exports.shout = (text) => text.toUpperCase() + '!';\\n", "tests/shout.test.js" = "const assert = require('node:assert');\\nconst { shout } = require('../shout.js');\\nassert.strictEqual(shout('hi'), 'HI!');\\n" }
commit = "Add shout()"
reply = '>>DONE {"summary":"shout() with a test"}'

[[blocks.farewell.builder]]
write = { "farewell.js" = "const { greet } = require('./greet.js');\\nexports.farewell = (name) => greet(name) + ' Goodbye.';\\n", "tests/farewell.test.js" = "const assert = require('node:assert');\\nconst { farewell } = require('../farewell.js');\\nassert.strictEqual(farewell('Ada'), 'Hello, Ada! Goodbye.');\\n" }
commit = "Add farewell()"
reply = ">>DONE"
`,
};

/** Writes `files` into a fresh git repository with one commit on main; returns its path. */
export async function makeDemoRepo(files: Record<string, string> = DEMO_FILES): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-demo-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  const git = (...args: string[]) => execa('git', args, { cwd: dir, env: IDENTITY });
  await git('init', '-q', '-b', 'main');
  await git('config', 'user.name', IDENTITY.GIT_AUTHOR_NAME);
  await git('config', 'user.email', IDENTITY.GIT_AUTHOR_EMAIL);
  await git('config', 'commit.gpgsign', 'false');
  await git('add', '-A');
  await git('commit', '-q', '-m', 'The demo app');
  return dir;
}

export interface DemoOptions {
  keep: boolean;
  print: (line: string) => void;
  /**
   * The CLI's own process: on SIGINT or SIGTERM, or when stdout's reader goes away
   * (`tron demo | head -3`: EPIPE), stop the run and remove the throwaway repository,
   * its engine lock with it, before exiting. In-process callers leave it off.
   */
  process?: boolean;
}

/**
 * Runs the demo. Its last lines are true when they are printed: without --keep the
 * repository is removed first and the last line says so (and how to keep it); with
 * --keep it names the repository and what to type to look at it.
 */
export async function demoCommand(opts: DemoOptions): Promise<number> {
  const repo = await makeDemoRepo();
  let closed = false;
  const print = (line: string) => {
    if (!closed) opts.print(line);
  };
  const stop = new AbortController();
  let interrupted: number | undefined;
  // The repository's signing key (engine/log/keys.ts) goes with it.
  const remove = () => {
    rmSync(repoStateDir(repo), { recursive: true, force: true });
    rmSync(repo, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted !== undefined) {
      // A second signal: no waiting for the run to wind down.
      if (!opts.keep) remove();
      process.exit(interrupted);
    }
    interrupted = signal === 'SIGINT' ? 130 : 143;
    print(`tron demo: ${signal} — stopping the run${opts.keep ? '' : ' and removing the throwaway repository'}`);
    stop.abort();
  };
  const onStdoutError = (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    // Nobody reads any more: stop quietly, clean up, exit as a process killed by SIGPIPE would.
    closed = true;
    interrupted ??= 141;
    stop.abort();
  };
  if (opts.process) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    process.stdout.on('error', onStdoutError);
  }
  let removed = false;
  try {
    print(`tron demo: a throwaway repository at ${repo}, three blocks, scripted workers`);
    print('');
    const exit = await startCommand({ repo, clock: systemClock, env: { ...process.env, ...IDENTITY }, print, stop: stop.signal });
    if (interrupted !== undefined) return interrupted;
    const log = (await firstParentLog(repo, 'refs/heads/main')).join('\n');
    print('');
    print(`trunk after the run (git log --first-parent main):\n${log}`);
    const runs = readdirSync(join(repo, '.tron', 'runs')).sort();
    const runDir = join(repo, '.tron', 'runs', runs.at(-1)!);
    print('');
    print(readFileSync(join(runDir, 'report.md'), 'utf8'));
    if (opts.keep) {
      print(`The throwaway repository is kept at ${repo}. To look at it:`);
      print(`  tron status --repo ${repo}`);
      print(`  tron report --repo ${repo}`);
      print(`  git -C ${repo} log --oneline --graph --all`);
      print(`  ls ${runDir}    # events.jsonl, transcript.md, report.md, manifest.json`);
      print(`Remove it when done: rm -rf ${repo}`);
    } else {
      remove();
      removed = true;
      print(`The throwaway repository ${repo} has been removed; \`tron demo --keep\` keeps it to look at.`);
    }
    return exit;
  } finally {
    if (opts.process) {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.stdout.off('error', onStdoutError);
    }
    if (!opts.keep && !removed) remove();
  }
}
