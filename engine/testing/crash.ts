/**
 * Helpers for crash tests: run the real CLI as its own process (so it can die abruptly),
 * with command workers that can be interrupted at any instant and pick up again.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { configFile, makeProject } from './project.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from './repo.ts';
import { readLog } from '../runtime/eventlog.ts';
import type { TronEvent } from '../core/events.ts';
import { tronPath } from '../root.ts';

export const BIN = tronPath('bin', 'tron.js');

/**
 * An honest builder: builds `<block>.txt` and its test, gives evidence when challenged,
 * rebases when asked to merge. Every step is idempotent, so a re-issued or resumed turn
 * does the right thing whatever was done before the crash.
 */
const BUILDER = `#!/bin/sh
prompt=$(cat)
if [ "$TRON_PHASE" = merge ]; then
  git rebase -q main >/dev/null 2>&1 || { git rebase --abort; echo '>>BLOCKED {"reason":"conflict"}'; exit 0; }
  echo ">>MERGED"; exit 0
fi
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"the file and its test"}}'; exit 0 ;;
esac
echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"
printf "require('node:assert').ok(require('node:fs').existsSync(__dirname + '/../%s.txt'));\\n" "$TRON_BLOCK" > "tests/$TRON_BLOCK.test.js"
git add -A && git commit -qm "Build $TRON_BLOCK" >/dev/null 2>&1
echo ">>DONE"
`;

const REVIEWER = `#!/bin/sh
cat > /dev/null
echo ">>APPROVE"
`;

/** Three blocks: two in parallel (one will need a rebase), one depending on the first. */
export async function crashProject(): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-crash-workers-'));
  writeFileSync(join(dir, 'builder.sh'), BUILDER);
  writeFileSync(join(dir, 'reviewer.sh'), REVIEWER);
  chmodSync(join(dir, 'builder.sh'), 0o755);
  chmodSync(join(dir, 'reviewer.sh'), 0o755);
  return makeProject({
    blocks: { alpha: {}, beta: {}, gamma: { depends_on: ['alpha'] } },
    config: configFile({
      maxParallel: 2,
      workers: `[workers.builder]\nadapter = "command"\ncommand = ["${dir}/builder.sh"]\n\n[workers.reviewer]\nadapter = "command"\ncommand = ["${dir}/reviewer.sh"]\n`,
    }),
  });
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
