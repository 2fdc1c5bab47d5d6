/**
 * Turning TOML syntax errors and zod schema issues into Problems a user can act on.
 * `.tron/config.toml` and the block front matter share these rules, so a mistake reads
 * the same wherever it is made: the file, the line or dotted key, what is wrong, the fix.
 */
import TOML from '@iarna/toml';
import type { z } from 'zod';
import { parseDuration } from '../core/duration.ts';
import type { Problem } from '../core/errors.ts';
import type { InputCode } from '../core/problems.ts';
import { keyPath } from '../spine/parse.ts';
import { suggest } from '../core/suggest.ts';

/**
 * Parses TOML; a syntax error becomes one problem at `file:line:col`. `lineOffset` is
 * the number of file lines before the TOML text starts (front matter), so the line
 * named is the line in the whole file.
 */
export function parseToml(
  text: string,
  file: string,
  code: InputCode,
  lineOffset = 0,
): { data: Record<string, unknown>; problem?: undefined } | { data?: undefined; problem: Problem } {
  try {
    return { data: TOML.parse(text) as Record<string, unknown> };
  } catch (err) {
    const e = err as Error & { line?: number; col?: number; fromTOML?: boolean };
    if (!e.fromTOML || e.line === undefined) {
      return { problem: { code, path: file, message: `${e.message}; fix the TOML syntax` } };
    }
    const what = e.message.split(/ at row \d+/)[0];
    return {
      problem: {
        code,
        path: `${file}:${e.line + 1 + lineOffset}:${(e.col ?? 0) + 1}`,
        message: `${what}; fix the TOML syntax there`,
      },
    };
  }
}

/** The kinds of schema issue that get a code of their own. */
export type IssueKind = 'unknownKey' | 'required' | 'invalid' | 'duration';

/** How a schema's issues are named: stable codes, allowed keys per table, hints for missing keys. */
export interface IssueStyle {
  /**
   * The code of each kind of issue, e.g. `unknownKey: 'TRON_CONFIG_UNKNOWN_KEY'`; a kind
   * left out (one the schema cannot produce) is reported under `invalid`.
   */
  codes: { invalid: InputCode } & Partial<Record<IssueKind, InputCode>>;
  /** The keys the strict table at `parts` accepts (given the raw data, for unions). */
  knownKeysAt(parts: readonly PropertyKey[], data: unknown): string[];
  /** What a missing key is for and how to write it; shown after "missing". */
  missingHint?(parts: readonly PropertyKey[]): string | undefined;
  /**
   * Every key some variant of the table at `parts` accepts (a table whose shape depends
   * on a discriminator, such as `[workers.*]` on `adapter`); default: `knownKeysAt`.
   */
  anyKeysAt?(parts: readonly PropertyKey[]): string[];
  /** A more specific code for issues at `parts`, e.g. TRON_BLOCK_TITLE. */
  codeAt?(parts: readonly PropertyKey[]): InputCode | undefined;
}

/** The value at a dotted path of raw data, or undefined. */
export function valueAt(data: unknown, parts: readonly PropertyKey[]): unknown {
  let here = data;
  for (const part of parts) {
    if (here === null || typeof here !== 'object') return undefined;
    here = (here as Record<PropertyKey, unknown>)[part];
  }
  return here;
}

function describe(value: unknown): string {
  if (value instanceof Date) return 'a date';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'a table';
  return `${typeof value} ${JSON.stringify(value)}`;
}

const EXPECTED: Record<string, string> = {
  string: 'a string ("…")',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'an array ([…])',
  object: 'a table',
};

const EXAMPLE: Record<string, string> = {
  string: '"…"',
  number: '(a number)',
  int: '(a whole number)',
  boolean: 'true (or false)',
  array: '[…]',
};

function missingHint(parts: readonly PropertyKey[], expected: string): string {
  if (expected === 'object') return `add a [${keyPath(parts)}] table`;
  return `add ${String(parts[parts.length - 1])} = ${EXAMPLE[expected] ?? `(${expected})`}`;
}

function tooSmall(issue: z.core.$ZodIssueTooSmall, value: unknown): string {
  const min = Number(issue.minimum);
  if (issue.origin === 'array') return `needs at least ${min} element${min === 1 ? '' : 's'}; add them`;
  if (issue.origin === 'string') return 'must not be empty; write the text or remove the key';
  return `must be at least ${min}, not ${JSON.stringify(value)}; raise it`;
}

/** `; did you mean "max_parallel"?`, or nothing: the nearest legal name to a mistyped one. */
export function nearest(typed: string, known: readonly string[]): string {
  const names = suggest(
    typed,
    known.filter((k) => !k.startsWith('(')),
  ).slice(0, 3);
  if (names.length === 0) return '';
  const quoted = names.map((n) => `"${n}"`);
  return `; did you mean ${quoted.length === 1 ? quoted[0] : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`}?`;
}

/** The problem of one key the table at `parts` does not accept, with the nearest legal key. */
function unknownKey(parts: readonly PropertyKey[], key: string, known: readonly string[], code: InputCode, file: string): Problem {
  const hint = nearest(key, known);
  const fix = hint ? `${hint} Fix its spelling or remove it` : '; fix its spelling or remove it';
  return {
    code,
    path: `${file}: ${keyPath([...parts, key])}`,
    message: `unknown key "${key}"${fix} (keys allowed here: ${known.join(', ')})`,
  };
}

/**
 * A discriminated table without its discriminator: the keys no variant accepts are named
 * (with the nearest legal key), and "missing" is said only when none of them is a
 * misspelling of the discriminator itself (`adaptor = "sim"` is one problem, not three).
 */
function missingDiscriminator(
  issue: z.core.$ZodIssue,
  discriminator: string,
  choices: string,
  data: unknown,
  file: string,
  style: IssueStyle,
  codeFor: (parts: readonly PropertyKey[], kind: IssueKind) => InputCode,
): Problem[] {
  const parts = issue.path.at(-1) === discriminator ? issue.path.slice(0, -1) : issue.path;
  const table = valueAt(data, parts);
  const keys = table !== null && typeof table === 'object' && !Array.isArray(table) ? Object.keys(table) : [];
  const known = style.anyKeysAt?.(parts) ?? style.knownKeysAt(parts, data);
  const strangers = keys.filter((k) => !known.includes(k));
  const problems = strangers.map((k) => unknownKey(parts, k, known, codeFor([...parts, k], 'unknownKey'), file));
  if (strangers.some((k) => suggest(k, [discriminator]).length > 0)) return problems;
  const at = `${file}: ${keyPath([...parts, discriminator])}`;
  return [
    { code: codeFor([...parts, discriminator], 'required'), path: at, message: `missing; add ${discriminator} = one of ${choices}` },
    ...problems,
  ];
}

/** One zod issue → problems (one per unknown key), named by `style`. */
export function issueProblems(issue: z.core.$ZodIssue, data: unknown, file: string, style: IssueStyle): Problem[] {
  const at = (parts: readonly PropertyKey[]) => `${file}: ${keyPath(parts) || '(top level)'}`;
  const codeFor = (parts: readonly PropertyKey[], kind: IssueKind): InputCode =>
    style.codeAt?.(parts) ?? style.codes[kind] ?? style.codes.invalid;
  const value = valueAt(data, issue.path);
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = style.knownKeysAt(issue.path, data);
      return issue.keys.map((key) => unknownKey(issue.path, key, known, codeFor([...issue.path, key], 'unknownKey'), file));
    }
    case 'invalid_union': {
      const { discriminator, options } = issue as unknown as { discriminator?: string; options?: unknown[] };
      if (discriminator !== undefined && options !== undefined) {
        const choices = options.map((o) => JSON.stringify(o)).join(', ');
        if (value === undefined) return missingDiscriminator(issue, discriminator, choices, data, file, style, codeFor);
        const hint = typeof value === 'string' ? nearest(value, options.map(String)) : '';
        const message = `${describe(value)} is not one of ${choices}${hint ? `${hint} Use one of them` : '; use one of them'}`;
        return [{ code: codeFor(issue.path, 'invalid'), path: at(issue.path), message }];
      }
      return [{ code: codeFor(issue.path, 'invalid'), path: at(issue.path), message: issue.message }];
    }
    case 'invalid_type': {
      const expected = EXPECTED[issue.expected] ?? issue.expected;
      if (value === undefined) {
        const hint = style.missingHint?.(issue.path) ?? missingHint(issue.path, issue.expected);
        return [{ code: codeFor(issue.path, 'required'), path: at(issue.path), message: `missing; ${hint}` }];
      }
      return [
        {
          code: codeFor(issue.path, 'invalid'),
          path: at(issue.path),
          message: `expected ${expected}, found ${describe(value)}; write it as ${expected}`,
        },
      ];
    }
    case 'invalid_value':
      return [
        {
          code: codeFor(issue.path, 'invalid'),
          path: at(issue.path),
          message: `${describe(value)} is not allowed; use one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`,
        },
      ];
    case 'too_small':
      return [{ code: codeFor(issue.path, 'invalid'), path: at(issue.path), message: tooSmall(issue, value) }];
    case 'too_big':
      return [
        {
          code: codeFor(issue.path, 'invalid'),
          path: at(issue.path),
          message: `must be at most ${Number(issue.maximum)}, not ${JSON.stringify(value)}; lower it`,
        },
      ];
    case 'invalid_format':
      return [
        {
          code: codeFor(issue.path, 'invalid'),
          path: at(issue.path),
          message: `${describe(value)} is not a valid ${issue.format}; fix the value`,
        },
      ];
    case 'custom':
      if (typeof value === 'string' && parseDuration(value) === undefined && /duration/.test(issue.message)) {
        return [
          {
            code: codeFor(issue.path, 'duration'),
            path: at(issue.path),
            message: `"${value}" is not a duration; write it like "90s", "20m", "1h" or "1h30m"`,
          },
        ];
      }
      return [{ code: codeFor(issue.path, 'invalid'), path: at(issue.path), message: issue.message }];
    default:
      return [{ code: codeFor(issue.path, 'invalid'), path: at(issue.path), message: issue.message }];
  }
}

/** Every issue of a failed parse, as problems, in the order zod found them. */
export function schemaProblems(error: z.ZodError, data: unknown, file: string, style: IssueStyle): Problem[] {
  return error.issues.flatMap((issue) => issueProblems(issue, data, file, style));
}
