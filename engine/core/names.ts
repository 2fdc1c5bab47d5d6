/**
 * The shapes of the names tron makes and later reads back as parts of a path: a block id,
 * a run id, an answer file in `.tron/inbox/`. A name read from a file, a log line, the
 * database or a worker's result is checked against its shape before it is joined to any
 * path or recorded in any event — `"../../.git"` is never a name, whoever wrote it.
 */

/** A block id is its file name without `.md`. */
export const BLOCK_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * A run id, as a run directory's name: `tron start` makes `20261130-024812-001`; tests and
 * the golden runs name theirs (`crash-mid-merge-1`). One plain component, never `.`/`..`.
 */
export const RUN_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** An answer file as `tron answer` names it (inbox.ts writeAnswer): `<ms>-<block>.json`, or `<ms>-<block>-<n>.json`. */
export const ANSWER_FILE = /^[0-9]{1,16}-[a-z0-9][a-z0-9-]{0,62}(?:-[0-9]{1,6})?\.json$/;

/** A test run's output, relative to the run directory, without `.log`: `tests/<block>-gate-<sha12>`, `tests/lane-…`, `tests/trunk-…`. */
export const TEST_LOG = /^tests\/[a-z0-9][a-z0-9-]{0,159}$/;

/** Whether `name` is a run id tron could have made: one plain path component. */
export function isRunId(name: unknown): name is string {
  return typeof name === 'string' && RUN_ID.test(name);
}

/**
 * Whether `name` can be one component of a path and nothing else: no separator, not `.` or
 * `..`, no NUL or other control character, at most 255 characters (a repository's name in
 * the database, which the folder's name gives by default).
 */
export function isPlainName(name: unknown): name is string {
  return typeof name === 'string' && /^[^/\\\p{Cc}]{1,255}$/u.test(name) && name !== '.' && name !== '..';
}

/**
 * Whether `name` can be a repository's name in the database: what `[cluster] repository`
 * gives, or the remote's normalized URL (`forge.example/team/app`, a local remote's path) —
 * so separators are allowed, but no control character, and at most 255 characters. It is
 * never joined to a path as it is: `folderOf` makes one component of it.
 */
export function isRepositoryName(name: unknown): name is string {
  return typeof name === 'string' && /^[^\p{Cc}]{1,255}$/u.test(name);
}

/**
 * One plain path component standing for a repository's name (a view's
 * `tron-view/<folder>/<run>/`): a plain name as it is, else its characters other than
 * letters, digits, `.`, `_` and `-` as `_`, and a short digest so two names never share it.
 */
export function folderOf(repository: string, digest: (text: string) => string): string {
  if (isPlainName(repository) && /^[A-Za-z0-9._-]+$/.test(repository) && !/^\.+$/.test(repository)) return repository;
  const plain = repository
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^[._]+/, '')
    .slice(0, 100);
  return `${plain || 'repository'}-${digest(repository).slice(0, 10)}`;
}

/** Whether `name` is an answer file's name as `tron answer` writes it: one plain component under .tron/inbox/. */
export function isAnswerFile(name: unknown): name is string {
  return typeof name === 'string' && ANSWER_FILE.test(name);
}

/** How a name that is not of its shape is said: quoted, its control characters escaped, at most 80 characters of it. */
export function shownName(name: unknown): string {
  const text = typeof name === 'string' ? name : String(name);
  const quoted = JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
  return quoted.replace(/[\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
