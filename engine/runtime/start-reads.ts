/**
 * What a start reads of the previous run before it decides to run at all: its events,
 * where an interrupted landing may have left the checkout, whether anything is left to do
 * (and, when nothing is, what to say), whether its tests were the same suite, and which of
 * recovery's findings the operator hears of at once. Used by commands/start.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Blocker } from '../core/blocked.ts';
import type { BodyOf, EventBody, TronEvent } from '../core/events.ts';
import { readLog } from '../log/eventlog.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import type { Recovery } from './recovery.ts';

/**
 * Whether a start would only record that nothing can move: the previous run finished,
 * every block of the register resumes landed, abandoned or parked with its page sent,
 * recovery found nothing to clear, and no answer waits in the inbox. Then no run
 * directory is written (runs would pile up, one per start, each saying the same), and
 * the exit status is the one that run would have finished with.
 */
/** What a start with nothing to do found (nothingToDo). */
export type Idle = NonNullable<ReturnType<typeof nothingToDo>>;

export function nothingToDo(
  previous: string | undefined,
  events: readonly TronEvent[],
  recovery: Recovery,
  register: readonly Block[],
  answersWaiting: number,
):
  | {
      exit: number;
      summary: string;
      parked: BodyOf<'block.recovered'>[];
      blocked: { block: string; blocker: Blocker }[];
      abandoned: BodyOf<'block.recovered'>[];
    }
  | undefined {
  if (!previous || answersWaiting > 0) return undefined;
  if (!events.some((e) => e.type === 'run.finished')) return undefined;
  const resumed: BodyOf<'block.recovered'>[] = [];
  for (const e of recovery.events) {
    if (e.type === 'recovery.started') continue;
    if (e.type !== 'block.recovered') return undefined;
    resumed.push(e);
  }
  const registered = register.length;
  if (resumed.length !== registered) return undefined;
  const settled = (r: BodyOf<'block.recovered'>) => r.phase === 'landed' || r.phase === 'abandoned' || (r.phase === 'parked' && !r.page);
  if (!resumed.every(settled)) return undefined;
  const count = (phase: string) => resumed.filter((r) => r.phase === phase).length;
  const landed = count('landed');
  // A parked block with a dependency that did not land was parked because of it (it never ran): blocked.
  const phaseOf = new Map(resumed.map((r) => [r.block, r.phase]));
  const blocked = resumed.flatMap((r) => {
    if (r.phase !== 'parked') return [];
    const dependency = register.find((b) => b.id === r.block)?.dependsOn.find((d) => phaseOf.get(d) !== 'landed');
    if (dependency === undefined) return [];
    const is: Blocker['is'] = phaseOf.get(dependency) === 'abandoned' ? 'abandoned' : 'parked';
    return [{ block: r.block, blocker: { dependency, is } }];
  });
  const parked = resumed.filter((r) => r.phase === 'parked' && !blocked.some((b) => b.block === r.block));
  return {
    exit: landed === registered ? 0 : 3,
    summary: `${landed} landed, ${parked.length} parked, ${blocked.length > 0 ? `${blocked.length} blocked, ` : ''}${count('abandoned')} abandoned`,
    parked,
    blocked,
    abandoned: resumed.filter((r) => r.phase === 'abandoned'),
  };
}

/** Whether the previous run tested with the same setup and test command (its manifest's config). */
export function sameSuite(previous: string | undefined, config: Config): boolean {
  if (!previous) return false;
  try {
    const was = JSON.parse(readFileSync(join(previous, 'manifest.json'), 'utf8')).config as { test?: unknown; setup?: unknown };
    return was.test === config.test && (was.setup ?? undefined) === (config.setup ?? undefined);
  } catch {
    return false;
  }
}

/** Whether some block will run: one no run settled (landed, abandoned, parked), or an answer waiting for a parked one. */
export function hasWork(recovery: Recovery, register: readonly Block[], answersWaiting: number): boolean {
  if (answersWaiting > 0) return true;
  const settled = new Set(
    recovery.events.flatMap((e) =>
      e.type === 'block.recovered' && (e.phase === 'landed' || e.phase === 'abandoned' || e.phase === 'parked') ? [e.block] : [],
    ),
  );
  return register.some((b) => !settled.has(b.id));
}

/** What recovery found that the operator should hear of at once: forged records and spared processes. */
export function bootNotice(e: EventBody): string | undefined {
  switch (e.type) {
    case 'log.foreign':
      return `tron: the log of run ${e.run} holds lines tron did not write; they were set aside, not acted on — ${e.detail}`;
    case 'landed.untrusted':
      return `tron: refs/tron/landed/${e.block} was not believed (${e.reason}); kept as ${e.kept}, and ${e.block} is built`;
    case 'worker.spared':
      return `tron: process ${e.pid}, recorded as a worker of ${e.block}, was left alone: ${e.reason}`;
    default:
      return undefined;
  }
}

/** The previous run's events, or none when there is no readable log. */
export function previousEvents(runDir: string | undefined): TronEvent[] {
  if (!runDir || !existsSync(join(runDir, 'events.jsonl'))) return [];
  try {
    return readLog(join(runDir, 'events.jsonl')).events;
  } catch {
    return [];
  }
}

/** Trunk shas the previous run landed from (and started at): where an interrupted landing may have left the checkout. */
export function landedFrom(events: readonly TronEvent[]): string[] {
  const shas: string[] = [];
  for (const e of events) {
    if (e.type === 'land.intent') shas.push(e.from);
    if (e.type === 'run.started') shas.push(e.trunk_sha);
  }
  return [...new Set(shas)].reverse();
}
