/**
 * `tron start` in the test's own process, for the tests that act on the forge while it
 * runs (close an issue, review a pull request): start it, read its latest run's events as
 * they are appended, and wait until they (or the server) show what the test waits for.
 */
import { startCommand } from '../commands/start.ts';
import type { TronEvent } from '../core/events.ts';
import { systemClock } from '../os/clock.ts';
import { allRuns } from './crash.ts';
import type { TestRepo } from './repo.ts';

/** `tron start` on the project's repository, with its environment (and this machine's PATH and HOME); its exit. */
export function startIn(p: { repo: TestRepo; env: Record<string, string> }): Promise<number> {
  return startCommand({
    repo: p.repo.dir,
    clock: systemClock,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...p.env },
    print: () => {},
  });
}

/** The events of the project's latest run so far (none yet: empty). */
export function latestEvents(p: { repo: TestRepo }): TronEvent[] {
  return allRuns(p.repo).at(-1) ?? [];
}

/** Waits (a minute at most, looking every 50 ms) until `done` holds; else fails naming `what`. */
export async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    if (done()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}
