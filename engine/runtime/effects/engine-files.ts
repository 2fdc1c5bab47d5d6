/**
 * The engine's own files in the user's checkout: `.tron/config.toml` and the block files
 * `.tron/blocks/*.md`. The engine reads them once at start (and the blocks again on a
 * change in --watch); a worker without a sandbox can rewrite them behind its back — a
 * `test = "true"` in the config, a new block — whether git sees the edit or not (an
 * untracked file, an index flag). So the engine compares the files themselves with what
 * it loaded, at every gate (the `main_checkout_untouched` fact), and the next start looks
 * at what changed while the previous run ran.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_FILE } from '../../project/config.ts';
import { BLOCKS_DIR } from '../../project/register.ts';
import type { EventOf, TronEvent } from '../../core/events.ts';
import type { Problem } from '../../core/errors.ts';

/** sha256 hex of a regular file's bytes (links followed, as the loaders do); undefined when there is none. */
export function digestOfFile(path: string): string | undefined {
  try {
    if (!statSync(path).isFile()) return undefined;
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    return undefined;
  }
}

/** The block files of the checkout, as the register would read them: path → full path. */
function blockFiles(repo: string): Map<string, string> {
  const files = new Map<string, string>();
  let names: string[];
  try {
    names = readdirSync(join(repo, BLOCKS_DIR));
  } catch {
    return files;
  }
  for (const name of names.filter((n) => n.endsWith('.md')).sort()) {
    const full = join(repo, BLOCKS_DIR, name);
    try {
      if (statSync(full).isFile()) files.set(`${BLOCKS_DIR}/${name}`, full);
    } catch {
      // gone meanwhile
    }
  }
  return files;
}

interface Seen {
  key: string;
  digest: string | undefined;
}

/**
 * Compares the engine's files with what the engine loaded. A file whose size, times and
 * inode are as last seen is not read again, so a gate costs a `stat` per block file.
 */
export class EngineFiles {
  private readonly seen = new Map<string, Seen>();

  constructor(
    private readonly repo: string,
    /** The config's digest when the engine read it. */
    private readonly config: string | undefined,
    /** The blocks the engine loaded (updated in --watch): path → digest. */
    private readonly loaded: () => Iterable<{ file: string; digest: string }>,
  ) {}

  /** Each file that differs from what the engine loaded, as `<path> (changed|new|removed)`, sorted. */
  changes(): string[] {
    const out: string[] = [];
    const config = this.digest(CONFIG_FILE, join(this.repo, CONFIG_FILE));
    if (config !== this.config) out.push(`${CONFIG_FILE} (${config === undefined ? 'removed' : 'changed'})`);
    const present = blockFiles(this.repo);
    const known = new Map<string, string>();
    // A block taken in from an issue ([intake]) has no file in the checkout: its `file` is the issue's URL.
    for (const b of this.loaded()) if (!b.file.includes('://')) known.set(b.file, b.digest);
    for (const [file, full] of present) {
      const digest = this.digest(file, full);
      const was = known.get(file);
      if (was === undefined) out.push(`${file} (new)`);
      else if (digest !== was) out.push(`${file} (changed)`);
    }
    for (const file of known.keys()) if (!present.has(file)) out.push(`${file} (removed)`);
    return out.sort();
  }

  private digest(rel: string, full: string): string | undefined {
    let key: string;
    try {
      const s = statSync(full, { bigint: true });
      if (!s.isFile()) return undefined;
      key = `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    } catch {
      return undefined;
    }
    const cached = this.seen.get(rel);
    if (cached?.key === key) return cached.digest;
    const digest = digestOfFile(full);
    this.seen.set(rel, { key, digest });
    return digest;
  }
}

/** The time a file's metadata last changed (ms since the epoch); a process cannot set it back. */
export function changedAt(path: string): number | undefined {
  try {
    return statSync(path).ctimeMs;
  } catch {
    return undefined;
  }
}

/** A previous run's lifetime, from its log: when it started, when it last wrote, whether it watched. */
export interface RunWindow {
  run: string;
  from: number;
  to: number;
  watch: boolean;
}

/**
 * Whether a file's last change falls inside the run's lifetime. The file system stamps
 * times from a coarse clock, never ahead of the real time: a change the run saw is stamped
 * no later than the run's last event, and one made after it (the user's own edit between
 * runs) is stamped after — give or take the one tick the window's end allows for.
 */
export function changedDuring(path: string, window: RunWindow): number | undefined {
  const at = changedAt(path);
  if (at === undefined) return undefined;
  return at >= window.from && at <= window.to ? at : undefined;
}

/** The window of a run from its events; undefined for an empty log. */
export function runWindow(events: readonly TronEvent[]): RunWindow | undefined {
  const started = events.find((e): e is EventOf<'run.started'> => e.type === 'run.started');
  const last = events.at(-1);
  if (!started || !last) return undefined;
  return { run: started.run, from: started.ts, to: last.ts, watch: started.watch };
}

/**
 * The config changed while the previous run ran — a worker may have changed it — and has
 * not been touched since: the next start refuses until the user has looked (exit 2).
 */
export function configChangedInRun(repo: string, previous: readonly TronEvent[]): Problem | undefined {
  const started = previous.find((e): e is EventOf<'run.started'> => e.type === 'run.started');
  const window = runWindow(previous);
  if (!started?.config_digest || !window) return undefined;
  const full = join(repo, CONFIG_FILE);
  const digest = digestOfFile(full);
  if (digest === undefined || digest === started.config_digest) return undefined;
  const at = changedDuring(full, window);
  if (at === undefined) return undefined;
  return {
    code: 'TRON_CONFIG_CHANGED_IN_RUN',
    path: CONFIG_FILE,
    message:
      `changed at ${new Date(at).toISOString()}, while run ${window.run} was running, and not since: a worker may have changed it. ` +
      `Check it (\`git diff ${CONFIG_FILE}\`); if the change is yours, \`touch ${CONFIG_FILE}\` and start again`,
  };
}

/**
 * Why block `id`'s file is not to be built without the operator: it appeared or changed
 * while the previous run ran without --watch (so nobody asked the engine to take it), and
 * has not been touched since. Undefined when the file is as that run loaded it, or was
 * changed outside that run.
 */
export function blockChangedInRun(repo: string, id: string, digest: string, previous: readonly TronEvent[]): string | undefined {
  const window = runWindow(previous);
  if (!window || window.watch) return undefined;
  const loaded = previous.findLast((e): e is EventOf<'register.loaded'> => e.type === 'register.loaded');
  const was = loaded?.blocks.find((b) => b.id === id)?.digest;
  if (was === digest) return undefined;
  const file = `${BLOCKS_DIR}/${id}.md`;
  const at = changedDuring(join(repo, file), window);
  if (at === undefined) return undefined;
  return (
    `${file} ${was === undefined ? 'appeared' : 'changed'} at ${new Date(at).toISOString()}, while run ${window.run} ran without --watch: ` +
    'a worker may have written it. Read it; answer RETRY to build it as it stands, or ABANDON'
  );
}
