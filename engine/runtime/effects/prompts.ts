/**
 * Everything the engine says to an LLM is a file under prompts/, filled here. Keeping the
 * words in files lets them be read and reviewed as text; filling them strictly keeps a
 * typo from ever reaching a worker as a literal `{brief}`.
 *
 * Template syntax:
 * - `{name}` is a placeholder: a lower-case letter, then lower-case letters, digits or
 *   underscores. Nothing else in braces is special, so JSON such as `{"notes": "…"}`
 *   needs no escaping.
 * - `{#name}` … `{/name}` is a section: its text is kept only when the variable `name`
 *   is not blank. A tag alone on its line takes its line break with it.
 * - `{persona}` and `{gateway}` are filled here, from `persona.md` (which has `{role}`)
 *   and `gateway.md` (which has `{words}`: the words legal for the turn, with payload
 *   shapes and meanings, rendered from the glossary, never written by hand).
 * - A placeholder a file may not use, one the caller did not supply, or a variable the
 *   caller supplied that the prompt has no place for is an error, `TRON_PROMPT_PLACEHOLDER`.
 *   Values are inserted once and never scanned again, so a brief may contain braces.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GLOSSARY, type Word } from '../../gateway/glossary.ts';
import { legalWords, wordForms } from '../../gateway/parse.ts';
import type { Role } from '../../core/roles.ts';
import type { FaultCode } from '../../core/problems.ts';
import { tronPath } from '../../root.ts';

export const PROMPTS = ['build', 'challenge', 'review', 'merge', 'probe', 'restate', 'architect'] as const;
export type PromptName = (typeof PROMPTS)[number];

/** The variables the engine passes to each prompt; each file uses every one of its own. */
export const PROMPT_VARS = {
  build: ['block', 'title', 'brief', 'criteria', 'trunk', 'guidance', 'feedback'],
  challenge: ['block', 'criteria', 'facts'],
  review: ['block', 'title', 'brief', 'criteria', 'sha', 'diffstat'],
  merge: ['block', 'trunk', 'trunk_sha', 'conflicts'],
  probe: ['block', 'elapsed'],
  restate: ['reason'],
  architect: ['block', 'title', 'criteria', 'trouble', 'detail', 'attempts', 'history'],
} as const satisfies Record<PromptName, readonly string[]>;

/** Shared parts, filled by renderPrompt itself, with the placeholders each may use. */
export const PARTS = { persona: ['role'], gateway: ['words'] } as const;
export type PartName = keyof typeof PARTS;

export interface PromptContext {
  role: Role;
  phase: string;
  /** The words this turn asks for; else every word legal for the role in the phase. */
  expect?: readonly Word[];
}

/** prompts/ in the tron checkout or package. */
export const PROMPTS_DIR = `${tronPath('prompts')}/`;

/** A prompt file that cannot be filled: a stable code, the file, and what to fix. */
export class PromptError extends Error {
  readonly code: Extract<FaultCode, `TRON_PROMPT_${string}`>;
  readonly path: string;
  constructor(code: PromptError['code'], path: string, message: string) {
    super(`${code}: ${path}: ${message}`);
    this.name = 'PromptError';
    this.code = code;
    this.path = path;
  }
}

/**
 * The full text of one prompt: the file `<dir>/<name>.md` with its variables, the
 * persona for `ctx.role`, and the gateway part listing exactly the words legal for ctx.
 */
export function renderPrompt(name: PromptName, vars: Record<string, string>, ctx: PromptContext, dir: string = PROMPTS_DIR): string {
  const file = displayPath(dir, `${name}.md`);
  const declared: readonly string[] = PROMPT_VARS[name];
  for (const key of Object.keys(vars)) {
    if (!declared.includes(key)) {
      throw new PromptError(
        'TRON_PROMPT_PLACEHOLDER',
        file,
        `the engine passed {${key}}, which this prompt has no place for; its variables are ${list(declared)}`,
      );
    }
  }
  const template = readTemplate(dir, `${name}.md`);
  if (!/\{gateway\}/.test(template)) {
    throw new PromptError('TRON_PROMPT_PLACEHOLDER', file, 'the prompt lacks {gateway}; every prompt must show the worker its legal words');
  }
  const parts: Record<PartName, () => string> = {
    persona: () => fill(readTemplate(dir, 'persona.md'), displayPath(dir, 'persona.md'), PARTS.persona, { role: ctx.role }).trimEnd(),
    gateway: () =>
      fill(readTemplate(dir, 'gateway.md'), displayPath(dir, 'gateway.md'), PARTS.gateway, {
        words: renderWordList(ctx.expect ?? legalWords(ctx.role, ctx.phase)),
      }).trimEnd(),
  };
  const values: Record<string, string | (() => string)> = { ...vars, ...parts };
  return `${fill(template, file, [...declared, 'persona', 'gateway'], values).trimEnd()}\n`;
}

/** The word list inside the gateway part: one bullet per word, its lines and its meaning. */
export function renderWordList(words: readonly Word[]): string {
  if (words.length === 0) return '- (none: no word is legal for you now)';
  return words
    .map(
      (w) =>
        `- ${wordForms(w)
          .map((f) => `\`${f}\``)
          .join(' or ')} — ${GLOSSARY[w].meaning}`,
    )
    .join('\n');
}

/** The placeholders and section names a template uses, in order of first use. */
export function placeholdersOf(template: string): string[] {
  const names = [...template.matchAll(/\{[#/]?([a-z][a-z0-9_]*)\}/g)].map((m) => m[1]!);
  return [...new Set(names)];
}

const SECTION = /\{#([a-z][a-z0-9_]*)\}\n?([\s\S]*?)\{\/\1\}\n?/g;
const PLACEHOLDER = /\{([a-z][a-z0-9_]*)\}/g;

function fill(template: string, file: string, allowed: readonly string[], values: Record<string, string | (() => string)>): string {
  const valueFor = (name: string): string => {
    if (!allowed.includes(name)) {
      throw new PromptError('TRON_PROMPT_PLACEHOLDER', file, `unknown placeholder {${name}}; this file may use ${list(allowed)}`);
    }
    const v = values[name];
    if (v === undefined) {
      throw new PromptError('TRON_PROMPT_PLACEHOLDER', file, `placeholder {${name}} was not supplied by the engine`);
    }
    return typeof v === 'function' ? v() : v;
  };
  const sectioned = template.replace(SECTION, (_all, name: string, body: string) => (valueFor(name).trim() === '' ? '' : body));
  const stray = /\{([#/])([a-z][a-z0-9_]*)\}/.exec(sectioned);
  if (stray) {
    const tag = `{${stray[1]}${stray[2]}}`;
    throw new PromptError('TRON_PROMPT_PLACEHOLDER', file, `section tag ${tag} has no ${stray[1] === '#' ? 'closing' : 'opening'} tag`);
  }
  // One pass over the template only: inserted values are never scanned for placeholders.
  return sectioned.replace(PLACEHOLDER, (_all, name: string) => valueFor(name));
}

function readTemplate(dir: string, fileName: string): string {
  try {
    return readFileSync(join(dir, fileName), 'utf8').replace(/\r\n/g, '\n');
  } catch {
    throw new PromptError(
      'TRON_PROMPT_MISSING',
      displayPath(dir, fileName),
      'the prompt file cannot be read; restore it from the tron checkout',
    );
  }
}

function displayPath(dir: string, fileName: string): string {
  return dir === PROMPTS_DIR ? `prompts/${fileName}` : join(dir, fileName);
}

function list(names: readonly string[]): string {
  return names.map((n) => `{${n}}`).join(', ');
}
