/**
 * `tron view [RUN]`: the workflow diagram with one run laid over it — how many of its
 * blocks took each flow and reached each phase and handler — written as a page into the
 * run directory (`view/index.html`, with the viewer it needs beside it, so it opens from
 * disk with no network). The diagram is the spine that drove that run (its
 * `workflow.toml`), the counts come from its events alone.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readLog } from '../log/eventlog.ts';
import { selectRun } from '../log/run-select.ts';
import { checkSpineText, loadSpine } from '../spine/load.ts';
import type { TronEvent } from '../core/events.ts';
import { DatabaseRun, type DatabaseSource, databaseToRead } from '../log/db-read.ts';
import type { Spine } from '../spine/spine.ts';
import { renderRunView } from '../render/viewer.ts';
import { folderOf } from '../core/names.ts';

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

export interface ViewOptions {
  repo: string;
  /** A run id or run directory; the latest run when absent. */
  run?: string;
  /** Open the page in the desktop's browser. */
  open?: boolean;
  print: (line: string) => void;
  /** --database: read the run from tron's database (any host); RUN is then a run id. */
  database?: string;
  /** Whether --repo was given: with --database, it narrows the runs to that repository's. */
  repoGiven?: boolean;
  /** Where DISPLAY and WAYLAND_DISPLAY are read, and TRON_DATABASE_URL (default: this process's environment). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Whether a browser can be opened here: macOS always, elsewhere only with an X11 or Wayland display. */
export function hasDisplay(env: Readonly<Record<string, string | undefined>>, platform: NodeJS.Platform = process.platform): boolean {
  return platform === 'darwin' || platform === 'win32' || Boolean(env.DISPLAY || env.WAYLAND_DISPLAY);
}

/** The spine that drove the run, or (when it is gone or no longer reads) this tron's own, saying so. */
function spineOf(runDir: string, print: (line: string) => void): Spine {
  const file = join(runDir, 'workflow.toml');
  return spineFrom(file, existsSync(file) ? readFileSync(file, 'utf8') : undefined, print);
}

/** The spine of `text` (the run's workflow.toml, named `where`), or this tron's own when it is missing or does not read. */
function spineFrom(where: string, text: string | undefined, print: (line: string) => void): Spine {
  const { spine, problems } = text !== undefined ? checkSpineText(text, where) : { spine: undefined, problems: [] };
  if (spine && problems.length === 0) return spine;
  print(`tron view: ${where} ${text !== undefined ? 'does not read as a spine any more' : 'is missing'}; drawing this tron's own workflow`);
  return loadSpine();
}

/** Writes the run's page; returns its path. */
export async function writeRunView(runDir: string, print: (line: string) => void = () => {}): Promise<string> {
  const spine = spineOf(runDir, print);
  return writeView(join(runDir, 'view'), spine, readLog(join(runDir, 'events.jsonl')).events);
}

async function writeView(dir: string, spine: Spine, events: readonly TronEvent[]): Promise<string> {
  const files = await renderRunView(spine, events);
  for (const [path, text] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return join(dir, 'index.html');
}

/**
 * The page of a run read from the database, written where this host keeps that run: the
 * run directory of the repository when it is here, else a folder of the OS temp folder
 * (`tron-view/<repository>/<run>/`).
 */
async function writeDatabaseView(repo: string, source: DatabaseSource, run: string | undefined, print: (line: string) => void) {
  const dbRun = await DatabaseRun.open(source, run);
  try {
    const [events, files] = await Promise.all([dbRun.events(), dbRun.files()]);
    const spine = spineFrom(`${dbRun.label}: workflow.toml`, files['workflow.toml'], print);
    const here = source.repository !== undefined && existsSync(join(repo, '.tron'));
    const base = here
      ? join(repo, '.tron', 'runs', dbRun.at.run)
      : join(tmpdir(), 'tron-view', folderOf(dbRun.at.repository, sha256Hex), dbRun.at.run);
    return await writeView(join(base, 'view'), spine, events);
  } finally {
    await dbRun.end();
  }
}

export async function viewCommand(o: ViewOptions): Promise<number> {
  const env = o.env ?? process.env;
  const repo = resolve(o.repo);
  const source = databaseToRead({
    repo,
    repoGiven: o.repoGiven ?? true,
    ...(o.database !== undefined ? { database: o.database } : {}),
    ...(o.run !== undefined ? { run: o.run } : {}),
    env,
  });
  const page = source ? await writeDatabaseView(repo, source, o.run, o.print) : await writeRunView(selectRun(repo, o.run, 'RUN'), o.print);
  // The path alone on its own line (scripts read it), then how to open it.
  o.print(page);
  if (!o.open) {
    const hint = hasDisplay(env) ? '; tron view --open opens it for you' : '';
    o.print(`open it in a browser: ${pathToFileURL(page).href}${hint}`);
    return 0;
  }
  if (!hasDisplay(env)) {
    o.print(
      `tron view: no display here to open a browser on (DISPLAY and WAYLAND_DISPLAY are unset); open ${pathToFileURL(page).href} in a browser where the file is`,
    );
    return 0;
  }
  const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
  const child = spawn(opener, [page], { detached: true, stdio: 'ignore' });
  child.on('error', () => o.print(`tron view: could not run ${opener}; open the page above in a browser`));
  child.unref();
  return 0;
}
