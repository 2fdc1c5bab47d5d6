/**
 * The `--repo` folder, checked the same way by every command before it looks inside: a
 * folder that does not exist is said to not exist — not "not a git repository", "no run
 * yet" or "no block x", which send the user looking in the wrong place (issue #43).
 */
import { existsSync } from 'node:fs';
import type { Problem } from '../core/errors.ts';

/** What TRON_NOT_A_REPO says of a `--repo` folder that is not there. */
export const REPO_MISSING =
  'does not exist; give --repo the folder of the repository whose blocks tron should land (or run tron inside it)';

/** TRON_NOT_A_REPO, naming `repo` (absolute), when there is nothing at that path; undefined otherwise. */
export function missingRepo(repo: string): Problem | undefined {
  return existsSync(repo) ? undefined : { code: 'TRON_NOT_A_REPO', path: repo, message: REPO_MISSING };
}
