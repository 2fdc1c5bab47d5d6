/**
 * Whether bubblewrap can sandbox on this machine, probed once per test file with the
 * engine's own probe arguments. Sandbox tests run wherever it can (CI installs it, see
 * .ci/run) and are skipped, with the reason printed, only where it cannot — never under
 * CI=true, where a file that needs it fails instead.
 */
import { spawnSync } from 'node:child_process';
import { findProgram } from '../workers/preflight.ts';
import { PROBE_ARGS } from '../workers/sandbox.ts';
import { inCi } from './needs.ts';

function probe(): { program?: string; skip?: string } {
  const program = findProgram('bwrap', process.env.PATH, '/');
  if (!program) return { skip: 'bwrap (bubblewrap) is not installed here: apt-get install -y bubblewrap' };
  const run = spawnSync(program, PROBE_ARGS, { encoding: 'utf8', timeout: 10_000 });
  if (run.status !== 0) return { skip: `bwrap cannot sandbox here: ${(run.stderr ?? '').trim() || `exit ${run.status}`}` };
  return { program };
}

const found = probe();

/** The bwrap program, or undefined where it cannot run. */
export const BWRAP: string | undefined = found.program;

/** Why sandbox tests are skipped here, or undefined when bwrap works; printed once when set. */
export const BWRAP_SKIP: string | undefined = found.skip;
// Under CI nothing may skip (engine/testing/needs.ts): a file that needs bwrap fails, naming it.
if (BWRAP_SKIP && inCi()) throw new Error(`the sandbox tests need bwrap: ${BWRAP_SKIP} (CI=true: nothing may skip)`);
if (BWRAP_SKIP) console.warn(`sandbox tests skipped: ${BWRAP_SKIP}`);
