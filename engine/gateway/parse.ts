/**
 * The `>>` reply gateway (a contract: docs/GLOSSARY.md, "The reply gateway"). A worker reply is read
 * only through exactly one line `>>WORD` or `>>WORD {json}`; everything else in the reply
 * is prose the engine ignores. Invariant enforced here: an uninterpretable reply is never
 * guessed at. Anything short of one legal line with a valid payload is a `Refusal`, whose
 * message tells the worker what was wrong and what exactly to send instead (it is quoted
 * back in the restate prompt).
 */
import { GLOSSARY, type PayloadOf, WORDS, type Word } from './glossary.ts';
import type { Role } from '../core/roles.ts';
import { describePayload, wordForms } from './shape.ts';
import { describeNearMiss, isNearMiss, quote, visible } from './near-miss.ts';

export { describePayload, wordForms };

export type RefusalKind =
  | 'no_line'
  | 'several_lines'
  | 'unknown_word'
  | 'illegal_role'
  | 'illegal_phase'
  | 'not_expected'
  | 'payload_missing'
  | 'payload_not_json'
  | 'payload_invalid';

/** What each refusal means; docs/GLOSSARY.md shows this table. */
export const REFUSALS = {
  no_line: 'The reply has no line of the form `>>WORD` or `>>WORD {json}` (a line that nearly fits is quoted back).',
  several_lines: 'The reply has two or more such lines; exactly one is allowed.',
  unknown_word: 'The word is not in the glossary.',
  illegal_role: "The word is in the glossary but not for the sender's role.",
  illegal_phase: "The word is legal for the role but not in the block's current phase.",
  not_expected: 'The word is legal in the phase but this turn asks for others (a challenge asks for CONFIRMED or BLOCKED).',
  payload_missing: 'The word needs a JSON payload and the line has none.',
  payload_not_json: 'The text after the word is not one valid JSON object.',
  payload_invalid: "The JSON object does not fit the word's schema.",
} as const satisfies Record<RefusalKind, string>;

export const REFUSAL_KINDS = Object.keys(REFUSALS) as RefusalKind[];

export interface Refusal {
  kind: RefusalKind;
  /** One or two sentences to the worker: what was wrong, what to send instead. */
  message: string;
  /** 1-based line numbers at fault: the matching lines, or lines that nearly matched. */
  lines?: number[];
}

/** One accepted word with its payload, typed from the glossary: `{ word: 'CHANGES'; payload: { notes: string } } | …`. */
export type Reply = { [W in Word]: { word: W; payload: PayloadOf<W> } }[Word];

export type Parsed = (Reply & { ok: true; line: number }) | { ok: false; refusal: Refusal };

export interface GatewayContext {
  role: Role;
  /** The block's phase, a name in engine/workflow.toml. */
  phase: string;
  /** Narrows the legal words for this one turn (a challenge expects CONFIRMED or BLOCKED). */
  expect?: readonly Word[];
}

/** The contract's line pattern, as the contract states it (shown in docs/GLOSSARY.md). */
export const LINE_CONTRACT = '^>>([A-Z][A-Z_]*)(?:[ \\t]+(\\{.*\\}))?[ \\t]*$';

/**
 * The contract's pattern, applied to one line. Its `.` is "any character but a line
 * break", and a carriage return is one: a lone CR inside a line does not match.
 */
const LINE = /^>>([A-Z][A-Z_]*)(?:[ \t]+(\{[^\r\n]*\}))?[ \t]*$/;

/** The words a role may send in a phase, in glossary order. */
export function legalWords(role: Role, phase: string): Word[] {
  return WORDS.filter((w) => {
    const spec = GLOSSARY[w];
    return (spec.roles as readonly string[]).includes(role) && (spec.phases as readonly string[]).includes(phase);
  });
}

interface Match {
  line: number;
  word: string;
  json: string | undefined;
  text: string;
}

/**
 * Reads a worker reply through the gateway. Pure and total: it never throws, whatever the
 * reply (megabytes, NUL bytes, code fences, `>>` inside prose), and never guesses.
 */
export function parseReply(reply: string, ctx: GatewayContext): Parsed {
  const lines = (typeof reply === 'string' ? reply : String(reply ?? '')).split('\n');
  const matches: Match[] = [];
  const nearMisses: { line: number; text: string }[] = [];
  for (const [i, raw] of lines.entries()) {
    if (!raw.includes('>>')) continue;
    const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const m = text.startsWith('>>') ? LINE.exec(text) : null;
    if (m) matches.push({ line: i + 1, word: m[1]!, json: m[2], text });
    else if (isNearMiss(text)) nearMisses.push({ line: i + 1, text });
  }
  const allowed = ctx.expect ?? legalWords(ctx.role, ctx.phase);
  const refuse = (kind: RefusalKind, message: string, at?: number[]): Parsed => ({
    ok: false,
    refusal: at === undefined ? { kind, message } : { kind, message, lines: at },
  });

  if (matches.length === 0) {
    if (nearMisses.length === 0) return refuse('no_line', `Your reply has no \`>>\` line. ${sendOneOf(allowed)}`);
    const first = nearMisses[0]!;
    const more = nearMisses.length > 1 ? ` (and ${nearMisses.length - 1} more such line${nearMisses.length > 2 ? 's' : ''})` : '';
    return refuse(
      'no_line',
      `Your reply has no valid \`>>\` line: line ${first.line} ${quote(first.text)} does not fit, because ${describeNearMiss(first.text)}${more}. ${sendOneOf(allowed)}`,
      nearMisses.map((n) => n.line),
    );
  }
  if (matches.length > 1) {
    const listed = matches.slice(0, 3).map((m) => `line ${m.line} ${quote(m.text, 40)}`);
    const rest = matches.length > 3 ? `, and ${matches.length - 3} more` : '';
    return refuse(
      'several_lines',
      `Your reply has ${matches.length} \`>>\` lines (${listed.join(', ')}${rest}); it must have exactly one. ${sendOneOf(allowed, 'Send only')}`,
      matches.map((m) => m.line),
    );
  }

  const m = matches[0]!;
  const at = [m.line];
  if (!Object.hasOwn(GLOSSARY, m.word)) {
    return refuse('unknown_word', `\`>>${m.word}\` is not a word tron knows. ${sendOneOf(allowed)}`, at);
  }
  const word = m.word as Word;
  const spec = GLOSSARY[word];
  if (!(spec.roles as readonly string[]).includes(ctx.role)) {
    return refuse(
      'illegal_role',
      `\`>>${word}\` is for the ${spec.roles.join(' or ')}, and you are the ${ctx.role}. ${sendOneOf(allowed)}`,
      at,
    );
  }
  if (!(spec.phases as readonly string[]).includes(ctx.phase)) {
    return refuse(
      'illegal_phase',
      `\`>>${word}\` is not legal while the block is in phase ${ctx.phase} (only in ${spec.phases.join(', ')}). ${sendOneOf(allowed)}`,
      at,
    );
  }
  if (ctx.expect !== undefined && !ctx.expect.includes(word)) {
    return refuse(
      'not_expected',
      `This turn asks for ${ctx.expect.map((w) => `\`>>${w}\``).join(' or ') || 'no word'}, not \`>>${word}\`. ${sendOneOf(allowed)}`,
      at,
    );
  }

  let payload: unknown = {};
  if (m.json === undefined) {
    if (!spec.payloadOptional) {
      return refuse('payload_missing', `\`>>${word}\` needs a JSON object on the same line. ${sendThis(word)}.`, at);
    }
  } else {
    try {
      payload = JSON.parse(m.json);
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      return refuse(
        'payload_not_json',
        `The payload of \`>>${word}\` is not valid JSON (${clip(why, 100)}). ${sendThis(word)}: one JSON object, with nothing after it.`,
        at,
      );
    }
  }
  const checked = spec.payload.safeParse(payload);
  if (!checked.success) {
    const problems = issueTexts(checked.error.issues, []);
    const shown = problems.slice(0, 3).join('; ') + (problems.length > 3 ? `; and ${problems.length - 3} more` : '');
    return refuse('payload_invalid', `The payload of \`>>${word}\` does not fit: ${shown}. ${sendThis(word)}.`, at);
  }
  // The payload passed the word's own schema, so it is that word's PayloadOf.
  return { ok: true, word, payload: checked.data, line: m.line } as Reply & { ok: true; line: number };
}

/** "Send exactly one line of its own, one of: …" listing every legal word with its shape. */
function sendOneOf(words: readonly Word[], verb = 'Send exactly'): string {
  if (words.length === 0) return 'No word is legal for you at this point.';
  const forms = words.map((w) =>
    wordForms(w)
      .map((f) => `\`${f}\``)
      .join(' or '),
  );
  return words.length === 1 ? `${verb} one line of its own: ${forms[0]}.` : `${verb} one line of its own, one of: ${forms.join('; ')}.`;
}

function sendThis(word: Word): string {
  return `Send \`>>${word} ${describePayload(word).replace(/^optional /, '')}\``;
}

interface IssueLike {
  path: readonly PropertyKey[];
  message: string;
  issues?: readonly IssueLike[];
}

/** Zod issues as `path: message`, with the issues nested in a bad record key flattened. */
function issueTexts(issues: readonly IssueLike[], base: readonly PropertyKey[]): string[] {
  return issues.flatMap((issue) => {
    const path = [...base, ...issue.path];
    if (Array.isArray(issue.issues) && issue.issues.length > 0 && issue.issues.every((i) => 'message' in i)) {
      return issueTexts(issue.issues, path);
    }
    const where = path.length === 0 ? 'the object' : path.map((p) => clip(String(p), 40)).join('.');
    return [`${where}: ${issue.message}`];
  });
}

/** Text from the reply shown in a message: control characters visible, clipped. */
function clip(s: string, max: number): string {
  const shown = visible(s);
  return shown.length > max ? `${shown.slice(0, max)}…` : shown;
}
