/**
 * A repository's history for tests and benchmarks: many earlier runs on disk, each a copy
 * of a real run's events stamped again under a run id of its own — signed with the
 * repository's key as the engine signs (the chain starts from the run id), so a reader
 * takes them as the engine's. Written straight to the files, without the log's flushes:
 * a thousand runs take a second, not a minute.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventBody, TronEvent } from '../core/events.ts';
import { chainStartOf, stampLine } from '../log/eventlog.ts';
import { repoKey } from '../log/keys.ts';

/** The id of the `i`th past run: they sort before any run tron makes today, oldest first. */
export const pastRunId = (i: number): string => `20200101-000000-${String(i).padStart(4, '0')}`;

/** Writes one run `run` under `.tron/runs/` of `repo` with `events` (a real run's), moved to start at `startTs`. */
export function writeRunCopy(repo: string, events: readonly TronEvent[], run: string, startTs: number): void {
  const key = repoKey(repo, { create: true }).key;
  const signing = { key, chain: chainStartOf(key, run) };
  const shift = startTs - (events[0]?.ts ?? 0);
  const lines = events.map((e) => {
    const { v: _v, seq, ts, ...body } = e;
    const fields = (body.type === 'run.started' ? { ...body, run } : body) as EventBody;
    return stampLine(fields, seq, ts + shift, signing).line;
  });
  const dir = join(repo, '.tron', 'runs', run);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'events.jsonl'), `${lines.join('\n')}\n`);
}

/**
 * Writes `count` runs, each a copy of `events`, run `i` an hour after run `i - 1`, all
 * before any run tron makes today. Returns their ids, oldest first.
 */
export function writePastRuns(repo: string, events: readonly TronEvent[], count: number): string[] {
  const ids = Array.from({ length: count }, (_, i) => pastRunId(i + 1));
  for (const [i, run] of ids.entries()) writeRunCopy(repo, events, run, Date.UTC(2020, 0, 1) + (i + 1) * 3_600_000);
  return ids;
}
