/**
 * `tron status`: every block of the latest run — its phase, attempt, what it waits on, how
 * long it has been in its phase (across runs: recovery carries the time a block entered
 * the phase it resumes in), why it is parked or abandoned, and an operator answer waiting
 * in `.tron/inbox/`. Folded from the events; `--json` gives the same with numbers (ms),
 * titles and shas, in the camelCase every JSON of the CLI uses.
 */
import { join, resolve } from 'node:path';
import type { EngineState } from '../core/state.ts';
import type { Clock } from '../core/clock.ts';
import { formatDuration } from '../core/duration.ts';
import { isHolderAlive, readLock } from '../log/lockfile.ts';
import { latestRun } from '../log/runs.ts';
import { INBOX_DIR, readInbox } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';
import { readLog } from '../log/eventlog.ts';
import { apply, initialState } from '../core/state.ts';
import { blockedBy, blockerWords } from '../core/blocked.ts';
import { requireRepo } from './project-check.ts';
import type { TronEvent } from '../core/events.ts';

export { foldRun, latestRun } from '../log/runs.ts';

/** An operator answer written by `tron answer` and not yet read by an engine. */
export interface PendingAnswer {
  /** The file in `.tron/inbox/`. */
  file: string;
  word: string;
  line: string;
  writtenAt: number;
}

export interface StatusRow {
  block: string;
  title: string;
  phase: string;
  attempt: number;
  /** What the block waits on: slot, turn, facts, lock, operator, dependency, nothing… */
  waiting: string;
  /** The dependency a blocked block waits on — one that is parked, abandoned or blocked in turn: no answer of the operator's moves this block itself. */
  blockedBy?: string;
  /** ms since the epoch when the block entered its phase. */
  enteredAt: number;
  /** ms in its phase, at the time of asking. */
  ageMs: number;
  /** Why it is parked or abandoned; absent once it moves on. */
  reason?: string;
  baseSha?: string;
  attestedSha?: string;
  landedSha?: string;
  answer?: PendingAnswer;
}

/** One row per block, in register order. `answers`: the inbox's waiting answers by block (the oldest is read first). */
export function statusRows(s: EngineState, now: number, answers: ReadonlyMap<string, PendingAnswer> = new Map()): StatusRow[] {
  return s.order.map((id) => {
    const b = s.blocks.get(id)!;
    const answer = answers.get(id);
    const blocker = blockedBy(s, id);
    // A pending block whose dependencies have not all landed waits on them, not on a slot.
    const onDependency = b.phase === 'pending' && b.info.depends_on.some((d) => s.blocks.get(d)?.phase !== 'landed');
    const reason = blocker ? `blocked: ${blockerWords(blocker)}` : b.reason;
    return {
      block: id,
      title: b.info.title,
      phase: b.phase,
      attempt: b.attempt,
      waiting: blocker || onDependency ? 'dependency' : b.waiting.on,
      ...(blocker ? { blockedBy: blocker.dependency } : {}),
      enteredAt: b.since,
      ageMs: Math.max(0, now - b.since),
      ...(reason ? { reason } : {}),
      ...(b.base ? { baseSha: b.base } : {}),
      ...(b.attested ? { attestedSha: b.attested } : {}),
      ...(b.landedSha ? { landedSha: b.landedSha } : {}),
      ...(answer ? { answer } : {}),
    };
  });
}

/** The answers waiting in the inbox that the run has not consumed yet, the first per block. */
function waitingAnswers(repo: string, events: readonly TronEvent[]): Map<string, PendingAnswer> {
  const consumed = new Set<string>();
  for (const e of events) if (e.type === 'operator.answered') consumed.add(e.file);
  const byBlock = new Map<string, PendingAnswer>();
  // Only what `tron answer` signed is an answer; without the key nothing in the inbox is.
  const key = repoKey(repo)?.key;
  if (!key) return byBlock;
  for (const a of readInbox(repo, key, consumed).answers) {
    if (!byBlock.has(a.block)) byBlock.set(a.block, { file: join(INBOX_DIR, a.file), word: a.word, line: a.line, writtenAt: a.written_at });
  }
  return byBlock;
}

export async function statusCommand(opts: { repo: string; json: boolean; clock: Clock; print: (line: string) => void }): Promise<number> {
  const repo = resolve(opts.repo);
  requireRepo(repo);
  const run = latestRun(repo);
  if (!run) {
    opts.print(
      opts.json
        ? JSON.stringify({ repo, run: null, runDir: null, engine: null, blocks: [] }, null, 2)
        : 'tron status: no run yet; start one with `tron start`',
    );
    return 0;
  }
  // A torn last line is left out, as the engine would.
  const events = readLog(join(run, 'events.jsonl')).events;
  const state = events.reduce(apply, initialState());
  const now = opts.clock.now();
  const rows = statusRows(state, now, waitingAnswers(repo, events));
  const holder = readLock(join(repo, '.tron', 'engine.lock'));
  const running = holder !== undefined && isHolderAlive(holder);
  const engine = running ? 'running' : state.finished ? 'finished' : 'interrupted';
  if (opts.json) {
    const json = { repo, run: state.run ?? null, runDir: run, engine, ...(running ? { pid: holder.pid } : {}), now, blocks: rows };
    opts.print(JSON.stringify(json, null, 2));
    return 0;
  }
  const said = running
    ? ` (running: pid ${holder.pid})`
    : state.finished
      ? ' (finished)'
      : ' (interrupted: the next tron start recovers it)';
  opts.print(`run ${state.run ?? '?'}${said} — ${run}`);
  const width = Math.max(5, ...rows.map((r) => r.block.length));
  opts.print(`${'block'.padEnd(width)}  ${'phase'.padEnd(9)}  attempt  ${'waiting'.padEnd(11)}  ${'age'.padEnd(8)}  title`);
  for (const r of rows) {
    const age = formatDuration(Math.floor(r.ageMs / 1000) * 1000);
    // A blocked block shows as blocked, whatever its phase in the fold (pending, or parked when its dependency was abandoned).
    const phase = r.blockedBy ? 'blocked' : r.phase;
    opts.print(
      `${r.block.padEnd(width)}  ${phase.padEnd(9)}  ${String(r.attempt).padEnd(7)}  ${r.waiting.padEnd(11)}  ${age.padEnd(8)}  ${r.title}`,
    );
    const indent = ' '.repeat(width + 2);
    if (r.reason) opts.print(`${indent}why: ${r.reason}`);
    if (r.answer)
      opts.print(
        `${indent}answered: ${r.answer.line} (${r.answer.file}; ${running ? 'the engine reads it now' : 'the next tron start reads it'})`,
      );
  }
  return 0;
}
