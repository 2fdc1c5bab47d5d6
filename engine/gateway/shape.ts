/**
 * How each word's payload is shown to a worker and in docs/GLOSSARY.md, derived from the
 * zod schema in the glossary (through its JSON Schema), so the shape a prompt asks for
 * can never drift from the shape the gateway checks.
 */
import { z } from 'zod';
import { GLOSSARY, type Word } from './glossary.ts';

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: JsonSchema | boolean;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  examples?: unknown[];
}

const SCALARS: Record<string, string> = {
  string: 'str',
  integer: 'int',
  number: 'num',
  boolean: 'bool',
  null: 'null',
};

/**
 * The payload shape of a word, e.g. `{"reason": str}`, `optional {"summary": str}` or
 * `{"evidence": {"c1": str, "c2": str, …}}`. `str` stands for a JSON string; a key
 * followed by `?` may be left out.
 */
export function describePayload(word: Word): string {
  const spec = GLOSSARY[word];
  const schema = toJsonSchema(spec.payload);
  if (schema === undefined) return spec.payloadOptional ? 'optional {…}' : '{…}';
  const allOptional = (schema.required ?? []).length === 0;
  const text = shape(schema, spec.payloadOptional && allOptional);
  return spec.payloadOptional ? `optional ${text}` : text;
}

/**
 * The lines a worker may write for a word: `>>DONE` and `>>DONE {"summary": str}` when the
 * payload is optional, only `>>CHANGES {"notes": str}` when it is required.
 */
export function wordForms(word: Word): string[] {
  const spec = GLOSSARY[word];
  const payload = spec.payloadOptional ? describePayload(word).replace(/^optional /, '') : describePayload(word);
  return spec.payloadOptional ? [`>>${word}`, `>>${word} ${payload}`] : [`>>${word} ${payload}`];
}

function toJsonSchema(schema: z.ZodType): JsonSchema | undefined {
  try {
    return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  } catch {
    return undefined;
  }
}

function shape(s: JsonSchema, hideOptionalMarks = false): string {
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) return alternatives.map((a) => shape(a)).join(' | ');
  const type = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
  if (type.length !== 1) return type.length === 0 ? 'any' : type.map((t) => SCALARS[t] ?? t).join(' | ');
  const t = type[0]!;
  if (t === 'object') return objectShape(s, hideOptionalMarks);
  if (t === 'array') return `[${s.items ? shape(s.items) : 'any'}, …]`;
  return SCALARS[t] ?? 'any';
}

function objectShape(s: JsonSchema, hideOptionalMarks: boolean): string {
  const required = new Set(s.required ?? []);
  const parts = Object.entries(s.properties ?? {}).map(
    ([key, value]) => `${JSON.stringify(key)}${required.has(key) || hideOptionalMarks ? '' : '?'}: ${shape(value)}`,
  );
  if (typeof s.additionalProperties === 'object') {
    const value = shape(s.additionalProperties);
    const examples = (s.propertyNames?.examples ?? []).filter((e): e is string => typeof e === 'string');
    if (examples.length > 0) parts.push(...examples.map((k) => `${JSON.stringify(k)}: ${value}`), '…');
    else parts.push(`str: ${value}`, '…');
  }
  return `{${parts.join(', ')}}`;
}
