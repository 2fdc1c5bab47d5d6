/**
 * A webhook wakes the engine's forge reads early. `tron serve` receives GitHub's webhook
 * (engine/serve/webhook.ts) and rings here: it rewrites `.tron/forge/wake`. The running
 * engine watches that file: `[intake]`'s poller polls at once (engine/forge/watch.ts),
 * and a pull request's wait for its checks, reviews or merge queue ends at once
 * (engine/runtime/effects/pr.ts).
 *
 * A webhook carries no decision: what is recorded is what the read that follows finds —
 * the same `register.loaded`, `issue.withdrawn` or `pr.observed` a timer's read records —
 * so a run replays whichever way the engine heard, a duplicate delivery is one more read
 * (a 304 when nothing changed), and a lost one only leaves the next timer to find it.
 */
import { existsSync, mkdirSync, renameSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';

function wakeDir(repo: string): string {
  const dir = join(repo, '.tron', 'forge');
  mkdirSync(dir, { recursive: true });
  // The folder ignores itself, whatever the repository's .gitignore says.
  if (!existsSync(join(dir, '.gitignore'))) writeFileSync(join(dir, '.gitignore'), '*\n');
  return dir;
}

/** Rings the engine of `repo`: what GitHub said, for whoever reads the file (nothing reads more than its change). */
export function ringWake(repo: string, what: { event: string; delivery?: string }): void {
  const dir = wakeDir(repo);
  const tmp = join(dir, `wake.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(what)}\n`);
  renameSync(tmp, join(dir, 'wake'));
}

/** Calls `onWake` each time the file is rung, until closed. */
export function watchWake(repo: string, onWake: () => void): { close(): void } {
  const watcher = watch(wakeDir(repo), (_kind, name) => {
    if (name === 'wake') onWake();
  });
  // A watcher that fails (the folder removed) only loses the early reads: the timers still read.
  watcher.on('error', () => watcher.close());
  return { close: () => watcher.close() };
}
