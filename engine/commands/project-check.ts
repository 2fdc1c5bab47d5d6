/**
 * Everything `tron start` checks before it changes anything, in one pass: the config, the
 * register, the trunk the config names (it must exist in the repository), and whether the
 * configured workers can start. The problems of all of them are reported together, so a
 * wrong `trunk` is not held back until a typo elsewhere in the file is fixed.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { missingRepo } from '../cli/repo-arg.ts';
import { InputError, type Problem } from '../core/errors.ts';
import * as git from '../git/index.ts';
import type { Config } from '../project/config.ts';
import { loadConfig } from '../project/config.ts';
import { loadRegister, type Block } from '../project/register.ts';
import { preflightWorkers } from '../workers/preflight.ts';

/** TRON_NOT_A_REPO unless `repo` is a git repository's top (`tron start` and `tron status` both ask). */
export function requireRepo(repo: string): void {
  if (existsSync(join(repo, '.git'))) return;
  const missing = missingRepo(repo);
  if (missing) throw new InputError([missing]);
  throw new InputError([
    { code: 'TRON_NOT_A_REPO', path: repo, message: 'is not a git repository; run tron in the repository whose blocks it should land' },
  ]);
}

/** TRON_TRUNK_MISSING when `trunk` names no branch of `repo`. */
async function trunkProblem(repo: string, trunk: string): Promise<Problem | undefined> {
  try {
    await git.currentTrunkSha(repo, trunk);
    return undefined;
  } catch (err) {
    if (!(err instanceof git.GitStateError)) throw err;
    // A trunk branch whose commit is gone is a damaged store (exit 1), not a wrong config.
    await git.checkStore(repo, trunk);
    return err.problems[0];
  }
}

/**
 * The config and register of `repo`, or one InputError carrying every problem of the
 * config, the trunk, the register and (with `env`) the workers. Only reads.
 */
export async function checkProject(repo: string, env?: Record<string, string | undefined>): Promise<{ config: Config; blocks: Block[] }> {
  const { config, problems: configProblems, trunk } = loadConfig(repo);
  const trunkMissing = trunk === undefined ? undefined : await trunkProblem(repo, trunk);
  const { blocks, problems: registerProblems } = loadRegister(repo);
  const workerProblems = config && env ? preflightWorkers(config, env, repo) : [];
  const problems = [...configProblems, ...(trunkMissing ? [trunkMissing] : []), ...registerProblems, ...workerProblems];
  if (!config || problems.length > 0) throw new InputError(problems);
  return { config, blocks };
}
