/**
 * The operator's inbox: `tron answer` writes one JSON file per answer into
 * `.tron/inbox/`; the engine reads them (at boot, and at once when one appears while it
 * runs), records each as `operator.answered`, and moves the file into the run directory.
 * A file is consumed exactly once: its name is recorded in the event.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { InputError } from '../core/errors.ts';
import { parseReply } from '../gateway/parse.ts';
import type { Clock } from '../core/clock.ts';

export const INBOX_DIR = join('.tron', 'inbox');

const AnswerFile = z.strictObject({
  block: z.string(),
  word: z.string(),
  payload: z.record(z.string(), z.unknown()),
  line: z.string(),
  written_at: z.number(),
});
export type Answer = z.infer<typeof AnswerFile> & { file: string };

/** Validates an operator answer line against the glossary; a bad one is a coded InputError. */
export function parseAnswer(block: string, line: string): { word: string; payload: Record<string, unknown> } {
  const parsed = parseReply(line, { role: 'operator', phase: 'parked' });
  if (!parsed.ok) {
    throw new InputError([{ code: 'TRON_ANSWER_INVALID', path: `answer for ${block}`, message: parsed.refusal.message }]);
  }
  return { word: parsed.word, payload: (parsed.payload ?? {}) as Record<string, unknown> };
}

/** Writes an answer file atomically (temp file, then rename) so the engine never reads half of one. */
export function writeAnswer(repo: string, block: string, line: string, clock: Clock): string {
  const { word, payload } = parseAnswer(block, line);
  const dir = join(repo, INBOX_DIR);
  mkdirSync(dir, { recursive: true });
  const at = clock.now();
  let name = `${at}-${block}.json`;
  for (let n = 2; existsSync(join(dir, name)); n += 1) name = `${at}-${block}-${n}.json`;
  const tmp = join(dir, `.${name}.tmp`);
  writeFileSync(tmp, `${JSON.stringify({ block, word, payload, line: line.trim(), written_at: at })}\n`);
  renameSync(tmp, join(dir, name));
  return name;
}

/** The answers waiting in the inbox, oldest first; unreadable files are reported and left alone. */
export function readInbox(repo: string, skip: ReadonlySet<string> = new Set(), warn: (line: string) => void = () => {}): Answer[] {
  const dir = join(repo, INBOX_DIR);
  if (!existsSync(dir)) return [];
  const answers: Answer[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.json') && !f.startsWith('.'))
    .sort()) {
    if (skip.has(file)) continue;
    try {
      answers.push({ ...AnswerFile.parse(JSON.parse(readFileSync(join(dir, file), 'utf8'))), file });
    } catch (err) {
      warn(`tron: ${join(INBOX_DIR, file)} is not an answer file (${(err as Error).message.split('\n')[0]}); answer with \`tron answer\``);
    }
  }
  return answers;
}

/** Moves a consumed answer out of the inbox into the run directory. */
export function consumeAnswer(repo: string, file: string, runDir: string): void {
  const from = join(repo, INBOX_DIR, file);
  if (!existsSync(from)) return;
  mkdirSync(join(runDir, 'answers'), { recursive: true });
  renameSync(from, join(runDir, 'answers', file));
}
