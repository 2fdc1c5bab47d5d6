/**
 * Command workers for tests: small shell scripts that behave like coding-agent CLIs
 * (read the prompt on stdin, print progress on stderr, commit, reply on stdout).
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configFile } from './project.ts';
import type { TurnRequest } from '../workers/adapter.ts';

/**
 * A builder that, in its first turn, says `line` on stderr and then works until the file
 * `go` exists — a turn that is visibly running for as long as a test wants — then
 * commits and replies `>>DONE`. Later turns answer the challenge.
 */
export function slowBuilder(dir: string, line: string, go: string): string {
  return writeBuilder(
    dir,
    `#!/bin/sh
cat > /dev/null
if [ "$TRON_TURN" = 1 ]; then
  echo "${line}" >&2
  while [ ! -e "${go}" ]; do sleep 0.05; done
  echo done > "$TRON_BLOCK.txt"; git add -A; git commit -qm "$TRON_BLOCK"
  echo ">>DONE"
else
  echo '>>CONFIRMED {"evidence":{"c1":"committed"}}'
fi
`,
  );
}

/**
 * config.toml with `builder` as the command builder and a reviewer that approves. Not
 * sandboxed: these builders wait on files in the test's own /tmp folder, which a sandbox
 * hides (the sandbox has tests of its own).
 */
export function commandConfig(builder: string): string {
  return configFile({ workers: approvingWorkers(builder), extra: '[sandbox]\nmode = "off"\n' });
}

/** The [workers] table: the command builder at `builder`, and a reviewer that approves whatever it reads. */
export function approvingWorkers(builder: string): string {
  const reviewer = `["sh", "-c", "cat > /dev/null; echo '>>APPROVE'"]`;
  return `[workers.builder]\nadapter = "command"\ncommand = ["${builder}"]\n\n[workers.reviewer]\nadapter = "command"\ncommand = ${reviewer}\n`;
}

/**
 * The start of an honest builder's script: it reads the prompt into `$prompt`; a merge
 * turn rebases onto main (BLOCKED on a conflict); a challenge gives `evidence` for c1.
 * What follows it builds, commits and answers `>>DONE`.
 */
export function builderPrelude(evidence: string): string {
  return `#!/bin/sh
prompt=$(cat)
if [ "$TRON_PHASE" = merge ]; then
  git rebase -q main >/dev/null 2>&1 || { git rebase --abort; echo '>>BLOCKED {"reason":"conflict"}'; exit 0; }
  echo ">>MERGED"; exit 0
fi
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"${evidence}"}}'; exit 0 ;;
esac
`;
}

/**
 * The intake tests' builder: it writes down its environment (`out/builder-<block>.env`,
 * where a test looks for a token that must not be there), writes greeting.txt, commits
 * and answers `>>DONE`; a challenge gets evidence for c1.
 */
export function greetingBuilder(out: string): string {
  return `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt says hello"}}'; exit 0 ;;
esac
env > "${out}/builder-$TRON_BLOCK.env"
echo hello > greeting.txt; git add -A; git commit -qm "$TRON_BLOCK"
echo ">>DONE"
`;
}

/**
 * The withdrawal tests' builder: it builds `<block>.txt` at once — unless the block's id
 * says "slow": then its turn runs (sleeps) until tron stops it.
 */
export function stoppableBuilder(): string {
  return `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"done"}}'; exit 0 ;;
esac
case "$TRON_BLOCK" in
  *slow*) sleep 120 ;;
esac
echo "$TRON_BLOCK" > "$TRON_BLOCK.txt"; git add -A; git commit -qm "$TRON_BLOCK"
echo ">>DONE"
`;
}

/** Writes `script` as `dir/builder.sh`, executable; its path. */
export function writeBuilder(dir: string, script: string): string {
  const path = join(dir, 'builder.sh');
  writeFileSync(path, script);
  chmodSync(path, 0o755);
  return path;
}

/** A turn of `role` on `block` in `cwd` of the repository at `repoDir`: what the sandbox tests confine. */
export function turnRequest(repoDir: string, role: TurnRequest['role'], block: string, cwd: string): TurnRequest {
  return {
    role,
    block,
    session: `${role}-${block}`,
    turn: 1,
    phase: 'build',
    kind: 'build',
    prompt: '',
    cwd,
    runDir: join(repoDir, '.tron', 'runs', 'r1'),
    repo: repoDir,
    timeoutMs: 60_000,
    signal: new AbortController().signal,
  };
}
