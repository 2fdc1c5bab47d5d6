/**
 * Which run a command reads: the latest run directory of a repository, or the one a user
 * names by its id or its path. Run ids sort by start time, so the latest is the last.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';

/**
 * What a command that reads runs says where there is none: start one — or, in a repository
 * without `.tron/config.toml`, set it up first with `tron init` (`tron start` would refuse).
 */
export function noRunYet(repo: string): string {
  return existsSync(join(repo, '.tron', 'config.toml'))
    ? 'no run yet; start one with `tron start`'
    : 'no run yet, and no .tron/ here: `tron init` sets this repository up, then `tron start`';
}

/** The run directories of a repository (those with an event log), oldest first. */
export function runDirs(repo: string): string[] {
  const runs = join(repo, '.tron', 'runs');
  if (!existsSync(runs)) return [];
  return readdirSync(runs)
    .filter((name) => existsSync(join(runs, name, 'events.jsonl')))
    .sort()
    .map((name) => join(runs, name));
}

/** The run `run` names (an id of the repository, or a run directory), else the latest; InputError when there is none. */
export function selectRun(repo: string, run: string | undefined, flag = '--run'): string {
  if (run !== undefined) {
    const dir = existsSync(join(run, 'events.jsonl')) ? resolve(run) : join(repo, '.tron', 'runs', run);
    if (existsSync(join(dir, 'events.jsonl'))) return dir;
    throw new InputError([
      { code: 'TRON_USAGE', path: flag, message: `"${run}" is neither a run id of ${repo} nor a run directory; see .tron/runs/` },
    ]);
  }
  const latest = runDirs(repo).at(-1);
  if (latest) return latest;
  throw new InputError([{ code: 'TRON_USAGE', path: repo, message: noRunYet(repo) }]);
}
