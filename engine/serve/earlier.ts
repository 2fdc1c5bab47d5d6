/**
 * A block's turns where they happened. A block carried over from an earlier run — parked
 * there, and still parked in the latest — had no turn in the latest run: its turns, and
 * their output under `turns/<block>/`, are in the run that dispatched them. The server
 * finds them here, as `tron logs BLOCK` does: the latest run in which the block had a turn.
 *
 * A run before the latest is over (one engine writes at a time, and a run starts once the
 * one before it has ended), so which blocks had turns in it is read once and kept; the few
 * runs last asked for are kept open, each read once.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isRunId } from '../core/names.ts';
import { RunFollower } from './follow.ts';

/** Earlier runs kept open at once. */
const OPEN = 4;

export class EarlierRuns {
  private readonly hadTurns = new Map<string, ReadonlySet<string>>();
  private readonly open = new Map<string, RunFollower>();

  /** `runs`: the folder of run directories the server follows. */
  constructor(private readonly runs: string) {}

  /** The run directory of the run id `run`, when it is one of the folder's; never a path outside it. */
  dir(run: string): string | undefined {
    if (!isRunId(run)) return undefined;
    const dir = join(this.runs, run);
    return existsSync(join(dir, 'events.jsonl')) ? dir : undefined;
  }

  /** A run that is over, read whole (a follower that does not follow). */
  follower(dir: string): RunFollower {
    let f = this.open.get(dir);
    if (f) this.open.delete(dir);
    else f = new RunFollower(dir, { live: false, window: 1 });
    this.open.set(dir, f);
    for (const old of this.open.keys()) {
      if (this.open.size <= OPEN) break;
      this.open.delete(old);
    }
    return f;
  }

  /** The latest run before `latest` (a run id) in which `block` had a turn. */
  lastWithTurns(block: string, latest: string): RunFollower | undefined {
    if (!existsSync(this.runs)) return undefined;
    const ids = readdirSync(this.runs)
      .filter((id) => id < latest && this.dir(id) !== undefined)
      .sort()
      .reverse();
    for (const id of ids) {
      const dir = join(this.runs, id);
      let blocks = this.hadTurns.get(dir);
      if (!blocks) {
        blocks = new Set(this.follower(dir).dispatched);
        this.hadTurns.set(dir, blocks);
      }
      if (blocks.has(block)) return this.follower(dir);
    }
    return undefined;
  }
}
