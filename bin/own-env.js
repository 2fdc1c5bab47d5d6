/**
 * The engine's own environment, scrubbed before it starts any child (issue #44). Without a
 * sandbox, anything the engine runs — a builder, a test command — can read
 * `/proc/<engine>/environ`: the environment the engine was exec'd with, which holds the
 * forge token, the webhook and serve secrets, the database URL and every model key. Taking
 * a name out of `process.env` does not change that file: it shows the bytes the kernel put
 * on the process's stack at exec, whatever Node did since.
 *
 * So bin/tron.js, for `tron start`, `tron agent` and `tron serve`, does this first of all —
 * before it loads anything else: in the checkout, tsx's loader thread and the esbuild
 * process it starts take a copy of the environment as it is when they start:
 *
 * 1. takes a copy of its environment, left where engine/cli.ts finds it (`takenEnvironment`):
 *    the commands get that copy and pass from it, by name, what each of their calls needs
 *    (a worker's `env` list, the forge client's token, the database client's URL);
 * 2. rebuilds `process.env` on the heap with only the variables in KEPT (where things
 *    are, locale, terminal; no credential but the database client's own password
 *    variables, which it reads there), so a child started without an explicit
 *    environment inherits nothing else secret;
 * 3. writes over the exec'd environment on its own stack through `/proc/self/mem` (a
 *    process may always write its own memory), so `/proc/<engine>/environ` then lists
 *    the kept variables — never a password — and nothing else.
 *
 * What remains, said plainly in docs/SECURITY.md: the secrets are in the engine's heap, which
 * only a process allowed to ptrace the engine can read (a worker is the engine's descendant,
 * never its tracer under Yama's default scope 1); and a secret given on the command line
 * (`--database URL`) is in `/proc/<engine>/cmdline`.
 */
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';

/** Where the copy is left for engine/cli.ts (a registry symbol: dist/ and the sources alike find it). */
const TAKEN = Symbol.for('tron.engine-environment');

/**
 * The variables the engine's process keeps: where things are, the locale and terminal,
 * Node's and git's own switches, the git identity (the sim worker's commits inherit it),
 * the database client's connection settings (node-postgres reads PG* from `process.env`
 * at connect), and tron's own switches — never one that names a secret. Everything else lives only in the copy the command was given.
 */
const KEPT =
  /^(PATH|HOME|USER|LOGNAME|SHELL|PWD|HOSTNAME|LANG|LANGUAGE|LC_[A-Z_]+|TERM|COLORTERM|TZ|TMPDIR|XDG_[A-Z_]+|NO_COLOR|FORCE_COLOR|COLUMNS|LINES|CI|NODE_OPTIONS|NODE_PATH|NODE_EXTRA_CA_CERTS|GIT_CONFIG_GLOBAL|GIT_CONFIG_SYSTEM|GIT_CONFIG_NOSYSTEM|GIT_AUTHOR_NAME|GIT_AUTHOR_EMAIL|GIT_COMMITTER_NAME|GIT_COMMITTER_EMAIL|PGHOST|PGPORT|PGUSER|PGDATABASE|PGSSLMODE|PGAPPNAME|PGCONNECT_TIMEOUT|TRON_DEBUG|TRON_PROC|TRON_CRASH_AFTER_EVENT)$/;

/**
 * Kept in `process.env` for the database client (node-postgres reads them there when the
 * URL has no password) but never written back where `/proc/<engine>/environ` shows them.
 */
const KEPT_UNSHOWN = /^(PGPASSWORD|PGPASSFILE)$/;

/** Whether the engine's own process keeps variable `name` once scrubbed. */
export function keptInProcess(name) {
  return KEPT.test(name) || KEPT_UNSHOWN.test(name);
}

/**
 * Scrubs the engine's environment (see the file comment) and returns the copy taken
 * before. Where there is no `/proc` there is no environ file to rewrite either; where
 * rewriting it fails, `problem` says why (the caller warns: the run's secrets are then
 * readable by what it runs without a sandbox).
 */
export function scrubOwnEnvironment() {
  /** @type {Record<string, string>} */
  const env = {};
  globalThis[TAKEN] = env;
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  // Every variable leaves libc's table; the kept ones come back as fresh heap strings (setenv copies),
  // so nothing the process still reads points into the stack region overwritten below.
  for (const name of Object.keys(env)) delete process.env[name];
  const kept = Object.keys(env).filter(keptInProcess);
  for (const name of kept) process.env[name] = env[name];
  if (!existsSync('/proc/self/stat')) return { env };
  try {
    const { start, end } = environRegion();
    const size = end - start;
    const text = Buffer.alloc(size);
    // The kept variables, as the file will list them; what does not fit (it always does: a subset) is cut.
    const shown = kept.filter((name) => !KEPT_UNSHOWN.test(name));
    Buffer.from(shown.map((name) => `${name}=${env[name]}\0`).join('')).copy(text, 0, 0, size);
    const mem = openSync('/proc/self/mem', 'r+');
    try {
      writeSync(mem, text, 0, size, start);
    } finally {
      closeSync(mem);
    }
    const after = readFileSync('/proc/self/environ');
    if (!after.equals(text)) return { env, problem: '/proc/self/environ still shows what the engine was started with' };
    return { env };
  } catch (err) {
    return { env, problem: `could not rewrite /proc/self/environ: ${err.message}` };
  }
}

/** The copy scrubOwnEnvironment took in this process, if it ran. */
export function takenEnvironment() {
  return globalThis[TAKEN];
}

/** Where the exec'd environment lies in this process's memory: /proc/self/stat's env_start and env_end (Linux 3.5+). */
function environRegion() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // After the command name (which may hold spaces and parentheses) come the fields from the 3rd on.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = Number(fields[50 - 3]);
  const end = Number(fields[51 - 3]);
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start <= 0 || end < start || end - start > 1 << 24)
    throw new Error(`/proc/self/stat gives no environment region (${fields[50 - 3]}–${fields[51 - 3]})`);
  return { start, end };
}
