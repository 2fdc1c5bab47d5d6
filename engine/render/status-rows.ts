/**
 * The rows of `tron status` (and of `tron serve`'s `/api/v1/state`): every block of a run
 * folded from its events — phase, attempt, what it waits on, its age in the phase — and
 * the operator answers waiting in `.tron/inbox/` that the run has not read yet.
 */
import { join } from 'node:path';
import type { EngineState } from '../core/state.ts';
import { blockedBy, blockerWords } from '../core/blocked.ts';
import type { TronEvent } from '../core/events.ts';
import { INBOX_DIR, readInbox } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';

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
  /** [forge]: the issue the block was taken in from, and its pull request (PR mode). */
  issue?: { number: number; ref: string; url?: string };
  pull?: { number: number; url: string; state: string };
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
export function waitingAnswers(repo: string, events: readonly TronEvent[]): Map<string, PendingAnswer> {
  const consumed = new Set<string>();
  for (const e of events) if (e.type === 'operator.answered') consumed.add(e.file);
  return pendingAnswers(repo, consumed);
}

/** The same, given the answer files the run consumed. */
export function pendingAnswers(repo: string, consumed: ReadonlySet<string>): Map<string, PendingAnswer> {
  const byBlock = new Map<string, PendingAnswer>();
  // Only what `tron answer` signed is an answer; without the key nothing in the inbox is.
  const key = repoKey(repo)?.key;
  if (!key) return byBlock;
  for (const a of readInbox(repo, key, consumed).answers) {
    if (!byBlock.has(a.block)) byBlock.set(a.block, { file: join(INBOX_DIR, a.file), word: a.word, line: a.line, writtenAt: a.written_at });
  }
  return byBlock;
}
