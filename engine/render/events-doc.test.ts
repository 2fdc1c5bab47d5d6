import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EVENT_SCHEMAS, type EventType } from '../core/events.ts';
import { EVENTS_DOC_BANNER, renderEventsDoc, schemaRows } from './events-doc.ts';

const TYPES = Object.keys(EVENT_SCHEMAS) as EventType[];

/** The text of one type's section. */
function section(doc: string, type: string): string {
  const start = doc.indexOf(`\n### \`${type}\`\n`);
  expect(start).toBeGreaterThan(0);
  const end = doc.indexOf('\n### ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

describe('renderEventsDoc', () => {
  const doc = renderEventsDoc();

  it('opens with the generator banner and is the same on every call', () => {
    expect(doc.startsWith(`${EVENTS_DOC_BANNER}\n`)).toBe(true);
    expect(EVENTS_DOC_BANNER).toContain('engine/render/events-doc.ts');
    expect(EVENTS_DOC_BANNER).toContain('do not edit');
    expect(renderEventsDoc()).toBe(doc);
  });

  it('explains the envelope, the single writer and the torn tail', () => {
    for (const field of ['v', 'seq', 'ts', 'type']) expect(doc).toMatch(new RegExp(`^\\| \`${field}\` \\| .* \\| yes \\|`, 'm'));
    expect(doc).toMatch(/\| `seq` \| `integer > 0` \| yes \|/);
    expect(doc).toContain('events.lock');
    expect(doc).toContain('events.jsonl.torn');
    expect(doc).toContain('`block`');
  });

  it('has one section per event type, in table order, with its description', () => {
    const headings = [...doc.matchAll(/^### `([^`]+)`$/gm)].map((m) => m[1]);
    expect(headings).toEqual(TYPES);
    for (const t of TYPES) {
      const description = EVENT_SCHEMAS[t].description;
      expect(description, `${t} has a description`).toBeTruthy();
      expect(section(doc, t)).toContain(description!.split(/[<>]/)[0]);
    }
  });

  it('lists every field of every type, marking the optional ones', () => {
    for (const t of TYPES) {
      const text = section(doc, t);
      for (const [key, field] of Object.entries(EVENT_SCHEMAS[t].shape) as [string, z.ZodType][]) {
        const required = field.safeParse(undefined).success ? 'optional' : 'yes';
        expect(text, `${t}.${key}`).toMatch(new RegExp(`^\\| \`${key}\` \\| \`[^\\n]*\` \\| ${required} \\|`, 'm'));
      }
    }
  });

  it('marks block-scoped types in the overview table', () => {
    for (const t of TYPES) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${t}\` |`))!;
      expect(row.startsWith(`| \`${t}\` | ${'block' in EVENT_SCHEMAS[t].shape ? 'yes' : ''} |`)).toBe(true);
    }
  });
});

describe('schemaRows', () => {
  it('spells each kind of field type, nests objects as dotted rows, and carries descriptions and defaults', () => {
    const schema = z.strictObject({
      id: z.string().describe('the id'),
      sha: z.string().regex(/^[0-9a-f]{40}$/),
      n: z.number().int().positive(),
      kind: z.enum(['a', 'b']),
      maybe: z.string().optional(),
      nullable: z.number().nullable(),
      tags: z.array(z.string()),
      either: z.array(z.union([z.string(), z.number()])),
      payload: z.record(z.string(), z.unknown()),
      facts: z.array(z.strictObject({ name: z.string(), ok: z.boolean().describe('held | not') })),
      tests: z.strictObject({ exit: z.number().int().nullable() }).nullable(),
      mode: z.string().default('fast'),
    });
    expect(schemaRows(schema)).toEqual([
      { name: 'id', type: 'string', required: true, description: 'the id' },
      { name: 'sha', type: 'string /^[0-9a-f]{40}$/', required: true, description: '' },
      { name: 'n', type: 'integer > 0', required: true, description: '' },
      { name: 'kind', type: '"a" | "b"', required: true, description: '' },
      { name: 'maybe', type: 'string', required: false, description: '' },
      { name: 'nullable', type: 'number | null', required: true, description: '' },
      { name: 'tags', type: 'string[]', required: true, description: '' },
      { name: 'either', type: '(string | number)[]', required: true, description: '' },
      { name: 'payload', type: 'Record<string, unknown>', required: true, description: '' },
      { name: 'facts', type: 'object[]', required: true, description: '' },
      { name: 'facts[].name', type: 'string', required: true, description: '' },
      { name: 'facts[].ok', type: 'boolean', required: true, description: 'held | not' },
      { name: 'tests', type: 'object | null', required: true, description: '' },
      { name: 'tests.exit', type: 'integer | null', required: true, description: '' },
      { name: 'mode', type: 'string', required: false, description: 'default: "fast"' },
    ]);
  });
});
