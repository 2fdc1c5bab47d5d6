/**
 * TOML text → `Spine`: @iarna/toml, then a strict zod schema (so a misspelt key is a
 * problem, never silently ignored), then normalisation (durations in ms, defaults
 * filled, phases in file order). Every problem is collected and returned at once.
 */
import TOML from '@iarna/toml';
import { z } from 'zod';
import { parseDuration } from '../core/duration.ts';
import type { Problem } from '../core/errors.ts';
import { ROLES, type Role } from '../core/roles.ts';
import type { GateKind, Liveness, Phase, Spine } from './spine.ts';

const GATES = ['truth', 'review', 'merge', 'wrap'] as const satisfies readonly GateKind[];
const PHASE_NAME = /^[a-z][a-z0-9_]*$/;

/** A duration string ("90s", "20m", "1h30m"); a bad one is a TRON_SPINE_DURATION problem. */
const Duration = z.string().refine((text) => parseDuration(text) !== undefined);
const ms = (text: string): number => parseDuration(text) ?? 0;

const TransitionTable = z.strictObject({ on: z.string().min(1), to: z.string().min(1), when: z.string().min(1) });
const WordsTable = z.strictObject(
  Object.fromEntries(ROLES.map((r) => [r, z.array(z.string()).optional()])) as Record<Role, z.ZodOptional<z.ZodArray<z.ZodString>>>,
);
const PhaseTable = z.strictObject({
  title: z.string().min(1),
  description: z.string().min(1),
  gate: z.enum(GATES).optional(),
  terminal: z.boolean().optional(),
  attempts: z.number().optional(),
  time: Duration.optional(),
  words: WordsTable.optional(),
  transitions: z.array(TransitionTable).optional(),
});
/** The `[liveness]` table; `.tron/config.toml` may override it with the same keys. */
export const LivenessTable = z.strictObject({
  probe_wait: Duration,
  extension: Duration,
  max_extensions: z.number(),
  reissues: z.number(),
});
const BudgetsTable = z.strictObject({ architect: z.number() });
const SpineTable = z.strictObject({
  version: z.literal(1),
  start: z.string().min(1),
  budgets: BudgetsTable,
  liveness: LivenessTable,
  phases: z.record(z.string().regex(PHASE_NAME), PhaseTable),
});

/** `phases.review.transitions[1].to`: the dotted key a user finds in the TOML file. */
export function keyPath(parts: readonly PropertyKey[]): string {
  let out = '';
  for (const part of parts) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const key = String(part);
      const shown = /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
      out += out === '' ? shown : `.${shown}`;
    }
  }
  return out;
}

/** The keys a strict table at `parts` accepts, for "did you mean" in unknown-key problems. */
function knownKeysAt(parts: readonly PropertyKey[]): string[] {
  const [first, , third, fourth] = parts;
  if (parts.length === 0) return Object.keys(SpineTable.shape);
  if (first === 'budgets') return Object.keys(BudgetsTable.shape);
  if (first === 'liveness') return Object.keys(LivenessTable.shape);
  if (first === 'phases' && parts.length === 2) return Object.keys(PhaseTable.shape);
  if (first === 'phases' && third === 'words') return [...ROLES];
  if (first === 'phases' && third === 'transitions' && fourth !== undefined) return Object.keys(TransitionTable.shape);
  return [];
}

function valueAt(data: unknown, parts: readonly PropertyKey[]): unknown {
  let here = data;
  for (const part of parts) {
    if (here === null || typeof here !== 'object') return undefined;
    here = (here as Record<PropertyKey, unknown>)[part];
  }
  return here;
}

const article = (noun: string): string => (/^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`);

function describe(value: unknown): string {
  if (value instanceof Date) return 'a date';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'a table';
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** One zod issue → problems a user can act on (one per unknown key). */
function issueProblems(issue: z.core.$ZodIssue, data: unknown, file: string): Problem[] {
  const at = (parts: readonly PropertyKey[]) => `${file}: ${keyPath(parts) || '(top level)'}`;
  const code = 'TRON_SPINE_SCHEMA';
  switch (issue.code) {
    case 'unrecognized_keys': {
      const known = knownKeysAt(issue.path).join(', ');
      return issue.keys.map((key) => ({
        code,
        path: at([...issue.path, key]),
        message: `unknown key "${key}"; fix its spelling or remove it (keys allowed here: ${known})`,
      }));
    }
    case 'invalid_type': {
      const value = valueAt(data, issue.path);
      const message =
        value === undefined
          ? `missing; add it (${article(issue.expected)})`
          : `expected ${article(issue.expected)}, found ${describe(value)}; write ${article(issue.expected)} here`;
      return [{ code, path: at(issue.path), message }];
    }
    case 'custom':
      return [
        {
          code: 'TRON_SPINE_DURATION',
          path: at(issue.path),
          message: `${JSON.stringify(valueAt(data, issue.path))} is not a duration; write it like "90s", "20m", "1h" or "1h30m"`,
        },
      ];
    case 'invalid_value':
      return [{ code, path: at(issue.path), message: `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}` }];
    case 'invalid_key':
      return [
        { code, path: at(issue.path), message: 'phase names are lower-case words (a-z, 0-9, _), starting with a letter; rename the table' },
      ];
    case 'too_small':
      return [{ code, path: at(issue.path), message: 'must not be empty; write the text or remove the key' }];
    default:
      return [{ code, path: at(issue.path), message: issue.message }];
  }
}

/**
 * Parse spine TOML into a `Spine`, collecting every problem instead of stopping at the
 * first. The spine is returned only when there are none. It is not linted here.
 */
export function parseSpine(text: string, file: string): { spine?: Spine; problems: Problem[] } {
  let data: unknown;
  try {
    data = TOML.parse(text);
  } catch (err) {
    const e = err as Error & { line?: number; col?: number };
    const where = e.line === undefined ? file : `${file}:${e.line + 1}:${(e.col ?? 0) + 1}`;
    const what = e.message.split(/ at row \d+/)[0];
    return { problems: [{ code: 'TRON_SPINE_TOML', path: where, message: `${what}; fix the TOML syntax there` }] };
  }
  const parsed = SpineTable.safeParse(data);
  if (!parsed.success) return { problems: parsed.error.issues.flatMap((i) => issueProblems(i, data, file)) };

  const raw = parsed.data;
  const phases = Object.entries(raw.phases).map(
    ([name, p]): Phase => ({
      name,
      title: p.title,
      description: p.description,
      ...(p.gate !== undefined && { gate: p.gate }),
      terminal: p.terminal ?? false,
      ...(p.attempts !== undefined && { attempts: p.attempts }),
      ...(p.time !== undefined && { timeMs: ms(p.time) }),
      words: Object.fromEntries(Object.entries(p.words ?? {}).filter(([, list]) => list !== undefined)),
      transitions: (p.transitions ?? []).map((t) => ({ on: t.on, to: t.to, when: t.when })),
    }),
  );
  const spine: Spine = {
    version: raw.version,
    start: raw.start,
    budgets: { architect: raw.budgets.architect },
    liveness: toLiveness(raw.liveness),
    phases,
  };
  return { spine, problems: [] };
}

/** A `[liveness]` table (already validated against LivenessTable) in ms. */
export function toLiveness(table: z.infer<typeof LivenessTable>): Liveness {
  return {
    probeWaitMs: ms(table.probe_wait),
    extensionMs: ms(table.extension),
    maxExtensions: table.max_extensions,
    reissues: table.reissues,
  };
}
