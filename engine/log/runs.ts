/**
 * A repository's run directories, `.tron/runs/<run-id>/`: listing them (ids sort by start
 * time), the latest, folding one, and reading the RUN argument of `tron report` and
 * `tron replay` — a run directory anywhere, or a run id under `.tron/runs/`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';
import { apply, initialState, type EngineState } from '../core/state.ts';
import { readLog } from './eventlog.ts';
import { noRunYet } from './run-select.ts';

/** `.tron/runs/` of a repository. */
export const runsDir = (repo: string): string => join(resolve(repo), '.tron', 'runs');

const isRunDir = (dir: string): boolean => existsSync(join(dir, 'events.jsonl'));

/** The run ids of a repository that hold a log, oldest first. */
export function listRuns(repo: string): string[] {
  const dir = runsDir(repo);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((id) => isRunDir(join(dir, id)))
    .sort();
}

/**
 * The newest run directory of a repository, or undefined before the first run. It looks
 * at the names from the newest down and stops at the first that holds a log: `tron serve`
 * asks at every request, and a repository may keep a thousand runs.
 */
export function latestRun(repo: string): string | undefined {
  const dir = runsDir(repo);
  if (!existsSync(dir)) return undefined;
  const id = readdirSync(dir)
    .sort()
    .findLast((name) => isRunDir(join(dir, name)));
  return id === undefined ? undefined : join(dir, id);
}

/** Folds a run's log into the engine state (a torn tail is left out, as the engine would). */
export function foldRun(runDir: string): EngineState {
  return readLog(join(runDir, 'events.jsonl')).events.reduce(apply, initialState());
}

/**
 * The run directory a RUN argument names: a directory holding `events.jsonl` (relative to
 * the current directory), else a run id under `.tron/runs/` of `repo`; without one, the
 * repository's latest run. Anything else is a coded input error that lists what exists.
 */
export function resolveRun(repo: string, run: string | undefined): string {
  if (run === undefined) {
    const latest = latestRun(repo);
    if (latest) return latest;
    throw new InputError([
      {
        code: 'TRON_NO_RUN',
        path: runsDir(repo),
        message: `${noRunYet(repo)}; or name a run directory (tron report DIR)`,
      },
    ]);
  }
  const asDir = resolve(run);
  if (isRunDir(asDir)) return asDir;
  const asId = join(runsDir(repo), run);
  if (isRunDir(asId)) return asId;
  const ids = listRuns(repo);
  const recent = ids.slice(-3).join(', ');
  const looked = existsSync(asDir) && statSync(asDir).isDirectory() ? `${asDir} holds no events.jsonl` : `no directory ${asDir}`;
  throw new InputError([
    {
      code: 'TRON_RUN_NOT_FOUND',
      path: run,
      message: `${looked}, and ${runsDir(repo)} has no run "${run}"; ${ids.length > 0 ? `its latest: ${recent}` : 'it has no runs yet'} (or pass --repo DIR)`,
    },
  ]);
}
