/**
 * The operator's inbox: `tron answer` writes one JSON file per answer into
 * `.tron/inbox/`; the engine reads them (at boot, and at once when one appears while it
 * runs), records each as `operator.answered`, and moves the file into the run directory.
 * A file is consumed exactly once: its name is recorded in the event.
 *
 * Only `tron answer` can answer: it signs each answer with the repository's key
 * (engine/log/keys.ts), which the engine checks. A file in the inbox without a valid
 * signature — one a worker wrote, say, or a copy of an answer already acted on (older than
 * the block's last answer) — is refused with an `inbox.refused` note and moved aside.
 *
 * A file's name becomes a path (it is moved) and a field of events: only a name of the shape
 * `tron answer` writes (engine/core/names.ts ANSWER_FILE) is ever read, moved or recorded.
 * A `.json` file of any other name is left where it is, said once with TRON_INBOX_FILE.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { InputError } from '../core/errors.ts';
import { BLOCK_ID, isAnswerFile, shownName } from '../core/names.ts';
import { coded } from '../core/problems.ts';
import { parseReply } from '../gateway/parse.ts';
import type { Clock } from '../os/clock.ts';
import { sign } from '../log/keys.ts';
import type { EventBody } from '../core/events.ts';
import * as git from '../git/index.ts';

export const INBOX_DIR = join('.tron', 'inbox');

const AnswerFile = z.strictObject({
  /** A block id, or the file is no answer: what a file says becomes an event's field only in its shape. */
  block: z.string().regex(BLOCK_ID, { message: 'not a block id' }),
  word: z.string(),
  payload: z.record(z.string(), z.unknown()),
  line: z.string(),
  written_at: z.number(),
  /** Who answered, when not `tron answer` at the console (`serve:<token name>`); signed with the rest. */
  by: z.string().optional(),
  sig: z.string().optional(),
});
export type Answer = z.infer<typeof AnswerFile> & { file: string };

/** An inbox file the engine does not act on, and why. */
export interface Refused {
  file: string;
  block?: string;
  reason: string;
}

/** The signature of an answer: over every field the engine acts on. */
function answerSignature(
  key: Buffer,
  a: { block: string; word: string; payload: unknown; line: string; written_at: number; by?: string | undefined },
): string {
  const fields = [a.block, a.word, a.payload, a.line, a.written_at];
  return sign(key, 'tron answer', JSON.stringify(a.by === undefined ? fields : [...fields, a.by]));
}

/** Validates an operator answer line against the glossary; a bad one is a coded InputError. */
export function parseAnswer(block: string, line: string): { word: string; payload: Record<string, unknown> } {
  const parsed = parseReply(line, { role: 'operator', phase: 'parked' });
  if (!parsed.ok) {
    throw new InputError([{ code: 'TRON_ANSWER_INVALID', path: `answer for ${block}`, message: parsed.refusal.message }]);
  }
  return { word: parsed.word, payload: (parsed.payload ?? {}) as Record<string, unknown> };
}

/**
 * Writes a signed answer file atomically (temp file, then rename) so the engine never reads
 * half of one. `by` names who answered when it is not the console (`tron serve`).
 */
export function writeAnswer(repo: string, block: string, line: string, clock: Clock, key: Buffer, by?: string): string {
  // The block becomes part of a file name: its callers check it is one of the register's; this checks its shape.
  if (!BLOCK_ID.test(block)) {
    throw new InputError([
      { code: 'TRON_ANSWER_BLOCK', path: shownName(block), message: 'not a block id (lowercase letters, digits and -)' },
    ]);
  }
  const { word, payload } = parseAnswer(block, line);
  const dir = join(repo, INBOX_DIR);
  mkdirSync(dir, { recursive: true });
  const at = clock.now();
  let name = `${at}-${block}.json`;
  for (let n = 2; existsSync(join(dir, name)); n += 1) name = `${at}-${block}-${n}.json`;
  const tmp = join(dir, `.${name}.tmp`);
  const answer = { block, word, payload, line: line.trim(), written_at: at, ...(by === undefined ? {} : { by }) };
  writeFileSync(tmp, `${JSON.stringify({ ...answer, sig: answerSignature(key, answer) })}\n`);
  renameSync(tmp, join(dir, name));
  return name;
}

/** Largest inbox file read: an answer is one line; anything bigger is not one. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * The answers waiting in the inbox, oldest first, each signed by `tron answer` with
 * `key`; every other file of an answer's name is refused (unreadable, not an answer,
 * unsigned, or signed with another key). A `.json` file whose name `tron answer` never
 * writes is `strange`: not read at all. Files named in `skip` were seen already.
 */
export function readInbox(
  repo: string,
  key: Buffer,
  skip: ReadonlySet<string> = new Set(),
): { answers: Answer[]; refused: Refused[]; strange: string[] } {
  const dir = join(repo, INBOX_DIR);
  const out = { answers: [] as Answer[], refused: [] as Refused[], strange: [] as string[] };
  if (!existsSync(dir)) return out;
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.json') && !f.startsWith('.'))
    .sort()) {
    if (skip.has(file)) continue;
    if (!isAnswerFile(file)) {
      out.strange.push(file);
      continue;
    }
    let answer: Answer;
    try {
      const full = join(dir, file);
      const info = lstatSync(full);
      if (!info.isFile()) throw new Error('not a regular file');
      if (info.size > MAX_ANSWER_BYTES) throw new Error(`${info.size} bytes, more than an answer holds`);
      answer = { ...AnswerFile.parse(JSON.parse(readFileSync(full, 'utf8'))), file };
    } catch (err) {
      const issue = err instanceof z.ZodError ? err.issues[0] : undefined;
      const why = issue ? `${issue.path.join('.')}: ${issue.message}` : (err as Error).message.split('\n')[0];
      out.refused.push({ file, reason: `not an answer file (${why})` });
      continue;
    }
    if (answer.sig === undefined || answer.sig !== answerSignature(key, answer)) {
      out.refused.push({
        file,
        block: answer.block,
        reason:
          answer.sig === undefined
            ? 'not signed: only `tron answer` can answer'
            : 'its signature is not this repository’s: only `tron answer` can answer',
      });
      continue;
    }
    out.answers.push(answer);
  }
  return out;
}

/** Moves a refused inbox file out of the inbox into the run's `answers/refused/`, where the operator can read it. */
export function refuseAnswer(repo: string, file: string, runDir: string): void {
  if (!isAnswerFile(file)) return;
  const from = join(repo, INBOX_DIR, file);
  if (!existsSync(from)) return;
  mkdirSync(join(runDir, 'answers', 'refused'), { recursive: true });
  renameSync(from, join(runDir, 'answers', 'refused', file));
}

/**
 * Moves a consumed answer out of the inbox into the run directory. `file` comes from an
 * event (recovery reads it from the last run's log): a name `tron answer` does not write
 * is never a path, whatever a line says (`"../../.git"` moved the repository's git away).
 */
export function consumeAnswer(repo: string, file: string, runDir: string): void {
  if (!isAnswerFile(file)) return;
  const from = join(repo, INBOX_DIR, file);
  if (!existsSync(from)) return;
  mkdirSync(join(runDir, 'answers'), { recursive: true });
  renameSync(from, join(runDir, 'answers', file));
}

/**
 * Which answers the engine takes: a file that names a block this run does not have, or
 * is stale (written no later than the last answer the block took: a copy of an old one),
 * is refused with its reason and never becomes an input.
 */
export function sortAnswers(
  read: { answers: Answer[]; refused: Refused[] },
  state: { blocks: ReadonlyMap<string, { answeredAt?: number | undefined }> },
): { accepted: Answer[]; refused: Refused[] } {
  const accepted: Answer[] = [];
  const refused = [...read.refused];
  for (const a of read.answers) {
    const b = state.blocks.get(a.block);
    if (!b) refused.push({ file: a.file, block: a.block, reason: `there is no block "${a.block}" in this run` });
    else if (b.answeredAt !== undefined && a.written_at <= b.answeredAt) {
      refused.push({ file: a.file, block: a.block, reason: `stale: ${a.block} already took an answer written at ${b.answeredAt}` });
    } else accepted.push(a);
  }
  return { accepted, refused };
}

/** An accepted answer as the operator.answered input, with trunk as it is now. */
export function answered(a: Answer, trunkSha: string) {
  return {
    type: 'operator.answered' as const,
    block: a.block,
    word: a.word,
    payload: a.payload,
    file: a.file,
    trunk_sha: trunkSha,
    written_at: a.written_at,
    ...(a.by === undefined ? {} : { by: a.by }),
  };
}

/** The engine's reader of its inbox: each file read once, the refused ones said and moved aside. */
export class InboxReader {
  private readonly seen = new Set<string>();
  constructor(
    private readonly o: {
      repo: string;
      runDir: string;
      key: Buffer;
      trunk: string;
      print: (line: string) => void;
      note: (body: EventBody) => void;
    },
  ) {}

  /** Answers an earlier run consumed: moved now, never answered twice. */
  consumedEarlier(files: readonly string[]): void {
    for (const file of files) {
      this.seen.add(file);
      consumeAnswer(this.o.repo, file, this.o.runDir);
    }
  }

  /** New answer files, as operator.answered inputs (each file once); the others refused with a note, or said (strange names). */
  async read(state: Parameters<typeof sortAnswers>[1]): Promise<EventBody[]> {
    const inbox = readInbox(this.o.repo, this.o.key, this.seen);
    for (const file of inbox.strange) {
      // Never a path nor a field of an event: said once, by its escaped name, and left alone.
      this.seen.add(file);
      this.o.print(
        `tron: ${coded('TRON_INBOX_FILE', `${INBOX_DIR}/${shownName(file)} is not a name \`tron answer\` writes (<ms>-<block>.json); it was not read — remove it, and answer with \`tron answer\``)}`,
      );
    }
    const { accepted, refused } = sortAnswers(inbox, state);
    for (const r of refused) {
      this.seen.add(r.file);
      refuseAnswer(this.o.repo, r.file, this.o.runDir);
      this.o.note({ type: 'inbox.refused', file: r.file, ...(r.block !== undefined ? { block: r.block } : {}), reason: r.reason });
      this.o.print(`tron: ${join(INBOX_DIR, r.file)} refused — ${r.reason}; answer with \`tron answer\``);
    }
    if (accepted.length === 0) return [];
    const trunkSha = await git.currentTrunkSha(this.o.repo, this.o.trunk);
    for (const a of accepted) this.seen.add(a.file);
    return accepted.map((a) => answered(a, trunkSha));
  }
}
