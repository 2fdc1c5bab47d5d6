/**
 * Helpers for crash tests: run the real CLI as its own process (so it can die abruptly),
 * with command workers that can be interrupted at any instant and pick up again.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { processStartTime } from '../os/proc.ts';
import { configFile, makeProject } from './project.ts';
import { approvingWorkers, builderPrelude, writeBuilder } from './workers.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from './repo.ts';
import { readLog } from '../log/eventlog.ts';
import type { TronEvent } from '../core/events.ts';
import { tronPath } from '../root.ts';

export const BIN = tronPath('bin', 'tron.js');

/**
 * An honest builder: builds `<block>.txt` and its test, gives evidence when challenged,
 * rebases when asked to merge. Every step is idempotent, so a re-issued or resumed turn
 * does the right thing whatever was done before the crash.
 */
const BUILDER = `${builderPrelude('the file and its test')}echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"
printf "require('node:assert').ok(require('node:fs').existsSync(__dirname + '/../%s.txt'));\\n" "$TRON_BLOCK" > "tests/$TRON_BLOCK.test.js"
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;

/** Three blocks: two in parallel (one will need a rebase), one depending on the first. */
export async function crashProject(): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-crash-workers-'));
  const builder = writeBuilder(dir, BUILDER);
  return alsoRemoving(
    dir,
    makeProject({
      blocks: { alpha: {}, beta: {}, gamma: { depends_on: ['alpha'] } },
      config: configFile({
        maxParallel: 2,
        workers: approvingWorkers(builder),
      }),
    }),
  );
}

/** The repository, whose cleanup also removes `dir` (the workers' scripts made for it). */
async function alsoRemoving(dir: string, made: Promise<TestRepo>): Promise<TestRepo> {
  const repo = await made;
  return { ...repo, cleanup: (opts) => repo.cleanup(opts).finally(() => rmSync(dir, { recursive: true, force: true })) };
}

/**
 * A builder for a batch: `first` renames lib.js's greet to hello; `second`, b1 and b2 add
 * files of their own; b3 (built before first lands) adds a test that still calls greet —
 * green at its gate, red on the new trunk — and, sent back with the failure, rebases and
 * calls hello. b1…b3 build slowly, so `first` and `second` are approved first.
 */
const BATCH_BUILDER = `${builderPrelude('the file and its test')}case "$TRON_BLOCK" in
  first)
    case "$prompt" in
      *"What failed last round"*)
        # On a busy machine b3 can be stacked below first and land still calling greet; first
        # is then the culprit. It keeps greet beside hello, so the callers trunk has or will
        # have pass whether or not b3 has reached trunk when this turn runs, and its work is
        # one commit again (made below).
        git rebase -q main >/dev/null 2>&1 || git rebase --abort
        git reset -q --soft main
        printf "exports.hello = () => 'hi';\\nexports.greet = exports.hello;\\n" > lib.js ;;
      *)
        echo "exports.hello = () => 'hi';" > lib.js
        echo "require('node:assert').strictEqual(require('../lib.js').hello(), 'hi');" > tests/lib.test.js ;;
    esac ;;
  b3)
    # Built before first lands, b3 tests greet (green at its gate, red on the new trunk);
    # told what failed, or dispatched again from a trunk that has hello (after a crash), it
    # tests hello.
    case "$prompt" in
      *"What failed last round"*)
        git rebase -q main >/dev/null 2>&1 || git rebase --abort
        echo "require('node:assert').strictEqual(require('../lib.js').hello(), 'hi');" > tests/b3.test.js ;;
      *)
        if grep -q hello lib.js; then
          echo "require('node:assert').strictEqual(require('../lib.js').hello(), 'hi');" > tests/b3.test.js
        else
          sleep 1.5
          echo "require('node:assert').strictEqual(require('../lib.js').greet(), 'hi');" > tests/b3.test.js
        fi ;;
    esac ;;
  *)
    [ "$TRON_BLOCK" = second ] || sleep 1
    echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"
    printf "require('node:assert').ok(require('node:fs').existsSync(__dirname + '/../%s.txt'));\\n" "$TRON_BLOCK" > "tests/$TRON_BLOCK.test.js" ;;
esac
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;

/**
 * The test runner of the batch project: in the merge lane, a candidate without b1 (the one
 * of `first` and `second` that had to be rebased onto the other) waits until b1…b3 are
 * queued, so they are stacked together whatever the machine's load.
 */
const BATCH_RUNNER = `const { existsSync, readdirSync, readFileSync } = require('node:fs');
const { basename, join } = require('node:path');
// The scenario needs b1…b3 stacked together. In the merge lane's checkout (_lane), a
// candidate without b1 waits until each of them not yet on trunk is queued in the lane
// (the engine's log says so), at most 30 s.
if (basename(process.cwd()) === '_lane' && !existsSync('tests/b1.test.js')) {
  const runs = join(process.cwd(), '..', '..', 'runs');
  const want = ['b1', 'b2', 'b3'].filter((b) => !existsSync('tests/' + b + '.test.js'));
  const log = () => {
    const dirs = existsSync(runs) ? readdirSync(runs).sort() : [];
    return dirs.length > 0 ? readFileSync(join(runs, dirs[dirs.length - 1], 'events.jsonl'), 'utf8') : '';
  };
  const queued = () => want.every((b) => log().includes('"type":"merge.queued","block":"' + b + '"'));
  for (let i = 0; i < 300 && !queued(); i += 1) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
}
for (const f of readdirSync(__dirname + '/tests').filter((f) => f.endsWith('.test.js')).sort()) require('./tests/' + f);
`;

/**
 * Five blocks for the merge lane: `first` and `second` land ahead (one of them rebased and
 * slowly tested); b1, b2, b3 queue behind and are stacked together; the stack is red
 * because of b3, is bisected, b1 and b2 land and b3 goes back to build, then lands on its own.
 */
export async function batchProject(): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-batch-workers-'));
  const builder = writeBuilder(dir, BATCH_BUILDER);
  return alsoRemoving(
    dir,
    makeProject({
      blocks: { first: { priority: -2 }, second: { priority: -1 }, b1: {}, b2: {}, b3: {} },
      files: {
        'test.js': BATCH_RUNNER,
        'lib.js': "exports.greet = () => 'hi';\n",
        'tests/lib.test.js': "require('node:assert').strictEqual(require('../lib.js').greet(), 'hi');\n",
      },
      config: configFile({
        maxParallel: 5,
        workers: approvingWorkers(builder),
      }),
    }),
  );
}

export interface CliRun {
  exitCode: number | undefined;
  signal: string | undefined;
  stdout: string;
  stderr: string;
}

/** `tron start` as a process of its own. */
export async function startCli(repo: TestRepo, env: Record<string, string> = {}): Promise<CliRun> {
  const r = await execa('node', [BIN, 'start', '--repo', repo.dir], {
    reject: false,
    stdin: 'ignore',
    env: { ...GIT_IDENTITY_ENV, ...env },
    timeout: 120_000,
  });
  return { exitCode: r.exitCode, signal: r.signal ?? undefined, stdout: String(r.stdout), stderr: String(r.stderr) };
}

/** Every run's events, oldest run first. */
export function allRuns(repo: TestRepo): TronEvent[][] {
  const runs = join(repo.dir, '.tron', 'runs');
  if (!existsSync(runs)) return [];
  return readdirSync(runs)
    .sort()
    .filter((id) => existsSync(join(runs, id, 'events.jsonl')))
    .map((id) => readLog(join(runs, id, 'events.jsonl')).events);
}

/** Whether a process with this pid still runs (a zombie not yet reaped does not). */
export function running(pid: number): boolean {
  return processStartTime(pid) !== undefined;
}

/**
 * A leader with turns or test runs on agents dies (SIGKILL) while `pid` — a worker or a test
 * process on an agent — runs on; a `--standby` started in `repoDir` takes over. Resolves with
 * that next leader once `pid` is gone, or after `withinMs` (then `gone` is false).
 */
export async function leaderDiesUntilGone(
  leader: ResultPromise,
  repoDir: string,
  env: Record<string, string>,
  pid: number,
  withinMs: number,
): Promise<{ next: ResultPromise; gone: boolean }> {
  leader.kill('SIGKILL');
  await leader;
  if (!running(pid)) throw new Error(`process ${pid} ended with the leader: nothing was left running to take over`);
  const next = execa('node', [BIN, 'start', '--repo', repoDir, '--plain', '--standby'], {
    env,
    reject: false,
    stdin: 'ignore',
    timeout: 240_000,
  });
  for (let waited = 0; waited < withinMs && running(pid); waited += 100) await new Promise((r) => setTimeout(r, 100));
  return { next, gone: !running(pid) };
}
