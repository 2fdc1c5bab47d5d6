/**
 * `tron demo`: the whole spine on a throwaway repository with scripted (sim) workers —
 * no API key. Three blocks: two in parallel (the second must bring its branch up to
 * date before it lands), one that depends on another, and one whose first DONE is a
 * lie the truth gate catches.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { repoStateDir } from '../runtime/keys.ts';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import { startCommand } from './start.ts';
import { firstParentLog } from '../git/index.ts';
import { systemClock } from '../core/clock.ts';

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

export async function demoCommand(opts: { keep: boolean; print: (line: string) => void }): Promise<number> {
  const repo = await makeDemoRepo();
  opts.print(`tron demo: a throwaway repository at ${repo}, three blocks, scripted workers`);
  opts.print('');
  try {
    const exit = await startCommand({ repo, clock: systemClock, env: { ...process.env, ...IDENTITY }, print: opts.print });
    const log = (await firstParentLog(repo, 'refs/heads/main')).join('\n');
    opts.print('');
    opts.print(`trunk after the run (git log --first-parent main):\n${log}`);
    const runs = (await execa('ls', [join(repo, '.tron', 'runs')])).stdout.trim().split('\n');
    const runDir = join(repo, '.tron', 'runs', runs.at(-1)!);
    opts.print('');
    opts.print(readFileSync(join(runDir, 'report.md'), 'utf8'));
    opts.print(
      opts.keep
        ? `The run directory: ${runDir} (events.jsonl, transcript.md, report.md, manifest.json)`
        : `(the throwaway repository is removed; run \`npx tron demo --keep\` to look at it)`,
    );
    return exit;
  } finally {
    if (!opts.keep) {
      rmSync(repoStateDir(repo), { recursive: true, force: true });
      rmSync(repo, { recursive: true, force: true });
    }
  }
}
