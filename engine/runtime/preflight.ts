/**
 * The check of trunk before work starts. A wrong or red test command used to be blamed on
 * the first block: its gate failed three times on trunk's fault, the architect was asked,
 * and the operator paged — paid turns on a problem no builder may fix. So before the first
 * turn of a run, the configured setup and test command run once on trunk's sha, in an
 * engine checkout (`.tron/worktrees/_preflight`, hermetic as every engine test run: the
 * same sandbox, environment and timeout). Red or missing: `TRON_TRUNK_RED`, exit 2, with
 * the command and its failing lines, before any block is touched. Red once and green on a
 * second try: the run goes on, and says trunk's tests are flaky.
 *
 * Green is remembered by trunk's sha and what decides the verdict (setup, test command,
 * test_env, the timeout), in tron's state folder outside the repository — where the
 * sandbox keeps every worker out — so the same trunk is not run twice.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatDuration } from '../core/duration.ts';
import { InputError } from '../core/errors.ts';
import type { TestRun } from '../core/events.ts';
import { failureExcerpt } from '../core/test-output.ts';
import * as git from '../git/index.ts';
import { repoStateDir } from '../log/keys.ts';
import type { Config } from '../project/config.ts';
import type { Sandbox } from '../workers/sandbox.ts';
import { runTests } from './effects/testrun.ts';

/** The failing lines a TRON_TRUNK_RED shows. */
const SHOWN_LINES = 20;
/** Verdicts remembered: the newest, by trunk sha and config. */
const KEPT = 50;

export interface PreflightOptions {
  repo: string;
  config: Config;
  trunkSha: string;
  env: Readonly<Record<string, string | undefined>>;
  sandbox: Sandbox;
  /** Whether the previous run found this sha green with the same suite (a landing's top, a check of trunk): then it is not run again. */
  testedGreen?: (sha: string) => boolean;
}

/** Checks trunk unless it was found green with this config before; throws TRON_TRUNK_RED when red. Returns a notice for a flaky trunk. */
export async function preflightTrunk(o: PreflightOptions): Promise<string | undefined> {
  const key = verdictKey(o.config, o.trunkSha);
  const file = join(repoStateDir(o.repo), 'trunk-green.json');
  const known = readKnown(file);
  if (known.includes(key) || o.testedGreen?.(o.trunkSha)) return undefined;
  const dir = await git.checkoutAt(o.repo, '_preflight', o.trunkSha);
  const logs = mkdtempSync(join(tmpdir(), 'tron-preflight-'));
  try {
    const first = await runOnce(o, dir, logs, 'first');
    let notice: string | undefined;
    if (!first.green) {
      const again = await runOnce(o, dir, logs, 'again');
      if (!again.green) throw red(o, first);
      notice = `tron: trunk's tests are flaky: ${first.what} on ${o.config.trunk} at ${o.trunkSha.slice(0, 12)}, then passed on a second run; blocks' gates may fail on trunk's fault${shown(first.run)}`;
    }
    writeKnown(file, [key, ...known].slice(0, KEPT));
    return notice;
  } finally {
    rmSync(logs, { recursive: true, force: true });
  }
}

/** What decides the verdict: the sha and every setting the run of the suite depends on. */
function verdictKey(config: Config, sha: string): string {
  const setting = { sha, setup: config.setup ?? null, test: config.test, testEnv: config.testEnv, ms: config.timeouts.testMs };
  return createHash('sha256').update(JSON.stringify(setting)).digest('hex');
}

interface Outcome {
  green: boolean;
  /** The command that failed, and how: `npm run tests exited 1`. */
  what: string;
  run: TestRun;
}

async function runOnce(o: PreflightOptions, dir: string, logs: string, name: string): Promise<Outcome> {
  const common = {
    cwd: dir,
    runDir: logs,
    env: o.env,
    passEnv: o.config.testEnv,
    sandbox: o.sandbox,
    visible: [o.repo],
    timeoutMs: o.config.timeouts.testMs,
  };
  if (o.config.setup) {
    const setup = await runTests({ ...common, command: o.config.setup, log: `${name}.setup.log`, network: true });
    if (setup.exit !== 0 || setup.timed_out)
      return { green: false, what: `setup \`${o.config.setup}\` ${how(setup, o.config.timeouts.testMs)}`, run: setup };
  }
  const tests = await runTests({ ...common, command: o.config.test, log: `${name}.log`, network: o.config.sandbox.testNetwork });
  return { green: tests.exit === 0 && !tests.timed_out, what: `\`${o.config.test}\` ${how(tests, o.config.timeouts.testMs)}`, run: tests };
}

function how(run: TestRun, budgetMs: number): string {
  if (run.timed_out) return `timed out after ${formatDuration(budgetMs)} ([timeouts] test)`;
  return run.exit === 127 ? 'exited 127 (command not found)' : `exited ${run.exit}`;
}

function red(o: PreflightOptions, first: Outcome): InputError {
  return new InputError([
    {
      code: 'TRON_TRUNK_RED',
      path: '.tron/config.toml: test',
      message: `${first.what} on ${o.config.trunk} at ${o.trunkSha.slice(0, 12)}, twice, in a clean checkout — before any block was touched${shown(first.run)}\n  make the tests pass on ${o.config.trunk}, or correct \`test\`${o.config.setup ? ' or `setup`' : ''} in .tron/config.toml, then start again`,
    },
  ]);
}

/** The failing lines of a run, indented, bounded. */
function shown(run: TestRun): string {
  const text = (run.failures !== undefined ? (failureExcerpt(run.failures, SHOWN_LINES) ?? run.failures) : run.tail).trimEnd();
  const lines = text.split('\n').slice(-SHOWN_LINES);
  return lines.length > 0 && text !== '' ? `; its output ended:\n${lines.map((l) => `    ${l}`).join('\n')}` : '';
}

function readKnown(file: string): string[] {
  if (!existsSync(file)) return [];
  try {
    const read = JSON.parse(readFileSync(file, 'utf8'));
    return Array.isArray(read) ? read.filter((x): x is string => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

function writeKnown(file: string, keys: string[]): void {
  try {
    mkdirSync(join(file, '..'), { recursive: true, mode: 0o700 });
    writeFileSync(file, `${JSON.stringify(keys)}\n`);
  } catch {
    // A verdict not remembered only costs the next start one more run of the suite.
  }
}
