/** `tron status`: the phase, attempt and age of every block, folded from the latest run's events. */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { readLog } from '../runtime/eventlog.ts';
import { apply, initialState, type EngineState } from '../core/state.ts';
import type { Clock } from '../core/clock.ts';
import { formatDuration } from '../core/duration.ts';
import { isHolderAlive, readLock } from '../runtime/lockfile.ts';

/** The newest run directory of a repository, or undefined before the first run. */
export function latestRun(repo: string): string | undefined {
  const runs = join(resolve(repo), '.tron', 'runs');
  if (!existsSync(runs)) return undefined;
  const ids = readdirSync(runs)
    .filter((name) => existsSync(join(runs, name, 'events.jsonl')))
    .sort();
  return ids.length > 0 ? join(runs, ids.at(-1)!) : undefined;
}

/** Folds a run's log into the engine state (a torn tail is left out, as the engine would). */
export function foldRun(runDir: string): EngineState {
  return readLog(join(runDir, 'events.jsonl')).events.reduce(apply, initialState());
}

export interface StatusRow {
  block: string;
  phase: string;
  attempt: number;
  waiting: string;
  age: string;
  reason?: string;
}

export function statusRows(s: EngineState, now: number): StatusRow[] {
  return s.order.map((id) => {
    const b = s.blocks.get(id)!;
    return {
      block: id,
      phase: b.phase,
      attempt: b.attempt,
      waiting: b.waiting.on,
      age: formatDuration(Math.max(0, Math.floor((now - b.since) / 1000) * 1000)),
      ...(b.reason ? { reason: b.reason } : {}),
    };
  });
}

export async function statusCommand(opts: { repo: string; json: boolean; clock: Clock; print: (line: string) => void }): Promise<number> {
  const run = latestRun(opts.repo);
  if (!run) {
    opts.print(opts.json ? JSON.stringify({ run: null, blocks: [] }) : 'tron status: no run yet; start one with `npx tron start`');
    return 0;
  }
  const state = foldRun(run);
  const rows = statusRows(state, opts.clock.now());
  if (opts.json) {
    opts.print(JSON.stringify({ run, finished: state.finished, blocks: rows }, null, 2));
    return 0;
  }
  const holder = readLock(join(resolve(opts.repo), '.tron', 'engine.lock'));
  const live = holder && isHolderAlive(holder) ? ` (running: pid ${holder.pid})` : ' (interrupted: the next tron start recovers it)';
  opts.print(`run ${state.run ?? '?'}${state.finished ? ' (finished)' : live} — ${run}`);
  const width = Math.max(5, ...rows.map((r) => r.block.length));
  opts.print(`${'block'.padEnd(width)}  ${'phase'.padEnd(9)}  attempt  ${'waiting'.padEnd(11)}  age`);
  for (const r of rows) {
    opts.print(
      `${r.block.padEnd(width)}  ${r.phase.padEnd(9)}  ${String(r.attempt).padEnd(7)}  ${r.waiting.padEnd(11)}  ${r.age}${r.reason ? `  — ${r.reason}` : ''}`,
    );
  }
  return 0;
}
