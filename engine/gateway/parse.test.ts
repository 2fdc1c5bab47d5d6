import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  describePayload,
  legalWords,
  parseReply,
  REFUSAL_KINDS,
  wordForms,
  type GatewayContext,
  type Parsed,
  type RefusalKind,
} from './parse.ts';
import { GLOSSARY, WORDS, type Word } from './glossary.ts';
import { ROLES, type Role } from '../core/roles.ts';

const builder: GatewayContext = { role: 'builder', phase: 'build' };
const challenge: GatewayContext = { role: 'builder', phase: 'build', expect: ['CONFIRMED', 'BLOCKED'] };
const reviewer: GatewayContext = { role: 'reviewer', phase: 'review' };

/** The contract's pattern, written out here independently of the parser (`.` = not CR/LF). */
const ORACLE = /^>>([A-Z][A-Z_]*)(?:[ \t]+(\{[^\r\n]*\}))?[ \t]*$/;

function refusal(parsed: Parsed) {
  if (parsed.ok) throw new Error(`expected a refusal, got >>${parsed.word}`);
  return parsed.refusal;
}

function kindOf(reply: string, ctx: GatewayContext = builder): RefusalKind | Word {
  const parsed = parseReply(reply, ctx);
  return parsed.ok ? parsed.word : parsed.refusal.kind;
}

describe('a reply with exactly one legal line', () => {
  it('is read as that word, with its payload and 1-based line number', () => {
    const parsed = parseReply('Did the work.\nTests pass.\n>>DONE {"summary": "added /login"}\n', builder);
    expect(parsed).toEqual({ ok: true, word: 'DONE', payload: { summary: 'added /login' }, line: 3 });
  });

  it('gives an empty object as the payload when an optional payload is left off', () => {
    expect(parseReply('>>APPROVE', reviewer)).toEqual({ ok: true, word: 'APPROVE', payload: {}, line: 1 });
  });

  it('accepts spaces and tabs between the word and the JSON and after it', () => {
    expect(parseReply('>>CHANGES \t {"notes": "rename x"} \t', reviewer)).toMatchObject({
      ok: true,
      payload: { notes: 'rename x' },
    });
  });

  it('accepts CRLF line endings', () => {
    const reply = 'Evidence below.\r\n>>CONFIRMED {"evidence": {"c1": "test a", "c2": "test b"}}\r\nbye\r\n';
    expect(parseReply(reply, challenge)).toEqual({
      ok: true,
      word: 'CONFIRMED',
      payload: { evidence: { c1: 'test a', c2: 'test b' } },
      line: 2,
    });
  });

  it('counts a line inside a code fence like any other line', () => {
    expect(kindOf('```\n>>DONE\n```')).toBe('DONE');
  });

  it('reads unicode in the payload unchanged', () => {
    const parsed = parseReply('>>DONE {"summary": "✓ 日本語 😀 \\u0000"}', builder);
    expect(parsed).toMatchObject({ ok: true, payload: { summary: '✓ 日本語 😀 \u0000' } });
  });
});

describe('every refusal kind', () => {
  it('no_line: a reply without any >> line says so and lists the legal words with their shapes', () => {
    const r = refusal(parseReply('All done, the tests pass.', builder));
    expect(r.kind).toBe('no_line');
    expect(r.lines).toBeUndefined();
    expect(r.message).toContain('no `>>` line');
    expect(r.message).toContain('`>>BLOCKED {"reason": str}`');
    expect(r.message).toContain('`>>DONE` or `>>DONE {"summary": str}`');
  });

  it('several_lines: two matching lines are refused, naming both line numbers', () => {
    const r = refusal(parseReply('>>DONE\nmore prose\n>>BLOCKED {"reason": "x"}', builder));
    expect(r).toMatchObject({ kind: 'several_lines', lines: [1, 3] });
    expect(r.message).toMatch(/2 `>>` lines \(line 1 `>>DONE`, line 3 `>>BLOCKED/);
  });

  it('several_lines: the same line twice is still two lines', () => {
    expect(refusal(parseReply('>>DONE\n>>DONE', builder))).toMatchObject({ kind: 'several_lines', lines: [1, 2] });
  });

  it('unknown_word: a word outside the glossary is refused, never mapped to a near one', () => {
    const r = refusal(parseReply('>>FINISHED', builder));
    expect(r).toMatchObject({ kind: 'unknown_word', lines: [1] });
    expect(r.message).toContain('`>>FINISHED` is not a word tron knows');
  });

  it('illegal_role: a builder cannot approve', () => {
    const r = refusal(parseReply('>>APPROVE', builder));
    expect(r.kind).toBe('illegal_role');
    expect(r.message).toContain('is for the reviewer, and you are the builder');
  });

  it('illegal_phase: MERGED is not legal during build', () => {
    const r = refusal(parseReply('>>MERGED', builder));
    expect(r.kind).toBe('illegal_phase');
    expect(r.message).toContain('phase build (only in merge)');
  });

  it('not_expected: a challenge turn asks for CONFIRMED or BLOCKED, and lists only those', () => {
    const r = refusal(parseReply('>>DONE', challenge));
    expect(r.kind).toBe('not_expected');
    expect(r.message).toContain('asks for `>>CONFIRMED` or `>>BLOCKED`, not `>>DONE`');
    expect(r.message).not.toContain('>>WORKING');
  });

  it('payload_missing: a word whose payload is required has none', () => {
    const r = refusal(parseReply('>>CHANGES', reviewer));
    expect(r.kind).toBe('payload_missing');
    expect(r.message).toContain('Send `>>CHANGES {"notes": str}`.');
  });

  it('payload_not_json: trailing garbage after the object matches the line but is not JSON', () => {
    expect(refusal(parseReply('>>DONE {"a":1}}', builder)).kind).toBe('payload_not_json');
    expect(refusal(parseReply('>>DONE {summary: x}', builder)).kind).toBe('payload_not_json');
    expect(refusal(parseReply('>>DONE {} {}', builder)).kind).toBe('payload_not_json');
  });

  it('payload_invalid: the JSON breaks the schema, and the message names the field', () => {
    const wrongType = refusal(parseReply('>>DONE {"summary": ["a"]}', builder));
    expect(wrongType.kind).toBe('payload_invalid');
    expect(wrongType.message).toContain('summary:');
    expect(refusal(parseReply('>>BLOCKED {"reason": ""}', builder)).kind).toBe('payload_invalid');
    expect(refusal(parseReply('>>DONE {"summary": "x", "extra": 1}', builder)).kind).toBe('payload_invalid');
    const badKey = refusal(parseReply('>>CONFIRMED {"evidence": {"one": "x"}}', challenge));
    expect(badKey.message).toContain('evidence.one: keys are c1, c2, … by criterion number');
    expect(badKey.message).toContain('Send `>>CONFIRMED {"evidence": {"c1": str, "c2": str, …}}`');
  });

  it('covers every kind the type declares', () => {
    const seen = new Set<string>();
    const replies: [string, GatewayContext][] = [
      ['', builder],
      ['>>DONE\n>>DONE', builder],
      ['>>NOPE', builder],
      ['>>APPROVE', builder],
      ['>>MERGED', builder],
      ['>>DONE', challenge],
      ['>>BLOCKED', builder],
      ['>>DONE {]}', builder],
      ['>>DONE {"summary": 1}', builder],
    ];
    for (const [reply, ctx] of replies) seen.add(kindOf(reply, ctx));
    expect([...seen].sort()).toEqual([...REFUSAL_KINDS].sort());
  });
});

describe('lines that nearly fit', () => {
  const cases: [string, string][] = [
    ['>>done', 'capital letters (`>>DONE`)'],
    ['  >>DONE', '`>>` must start the line'],
    ['`>>DONE`', '`>>` must start the line'],
    ['> >>DONE', '`>>` must start the line'],
    ['>> DONE', 'no space between `>>` and the word'],
    ['>>DONE {"summary": "x"} thanks', 'nothing may follow the JSON object'],
    ['>>DONE{"summary": "x"}', 'space between the word and its JSON object'],
    ['>>DONE ["x"]', 'not an array or a string'],
    ['>>DONE "x"', 'not an array or a string'],
    ['>>DONE {"summary":', 'open and close on that same line'],
    ['>>DONE: finished', 'followed by a space and a JSON object, or by nothing'],
    ['>>DONE finished', 'only one JSON object'],
    ['>>DONE\r\r', 'carriage return'],
  ];
  it.each(cases)('%j is refused as no_line, quoted, with the reason', (line, reason) => {
    const r = refusal(parseReply(`Work done.\n${line}\n`, builder));
    expect(r.kind).toBe('no_line');
    expect(r.lines).toEqual([2]);
    expect(r.message).toContain('line 2');
    expect(r.message).toContain(reason);
  });

  it('are truncated when quoted, and control characters are shown, not sent', () => {
    const r = refusal(parseReply(`>>DONE \u0000${'x'.repeat(500)}`, builder));
    expect(r.message).toContain('\\x00');
    expect(r.message).not.toContain('\u0000');
    expect(r.message).not.toContain('x'.repeat(100));
  });

  it('does not count >> inside prose as an attempt', () => {
    const r = refusal(parseReply('I will send >>DONE when finished, or >>BLOCKED.', builder));
    expect(r.kind).toBe('no_line');
    expect(r.lines).toBeUndefined();
  });

  it('does not treat a lone CR as a line break', () => {
    expect(kindOf('notes\r>>DONE')).toBe('no_line');
    expect(kindOf('>>DONE\r{"summary": "x"}')).toBe('no_line');
  });
});

describe('hostile replies', () => {
  it('reads a 1 MB reply with the line at the end', () => {
    const prose = 'lorem ipsum >> dolor {"a": 1}\n'.repeat(35_000);
    expect(prose.length).toBeGreaterThan(1_000_000);
    expect(parseReply(`${prose}>>DONE {"summary": "big"}`, builder)).toMatchObject({ ok: true, line: 35_001 });
  });

  it('reads a 1 MB payload on one line', () => {
    const summary = 'é'.repeat(1_000_000);
    const parsed = parseReply(`>>DONE {"summary": "${summary}"}`, builder);
    expect(parsed.ok && (parsed.payload as { summary: string }).summary.length).toBe(1_000_000);
  });

  it('refuses megabyte lines built to make a regex backtrack, with a short message', () => {
    const lines = [
      `>>DONE ${' '.repeat(1_000_000)}x`,
      `>>DONE {${'} '.repeat(500_000)}x`,
      `>>DONE {${' '.repeat(500_000)}}${' '.repeat(500_000)}x`,
      `>>${'A'.repeat(1_000_000)}a`,
      `${' '.repeat(1_000_000)}>>DONE`,
      `>>DONE\t${'\t '.repeat(500_000)}{x`,
    ];
    for (const line of lines) {
      const r = refusal(parseReply(line, builder));
      expect(r.kind).toBe('no_line');
      expect(r.message.length).toBeLessThan(1_000);
    }
  });

  it('does not let a __proto__ key through or pollute objects', () => {
    expect(kindOf('>>DONE {"__proto__": {"polluted": true}}')).toBe('payload_invalid');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('never throws on a non-string reply from untyped callers', () => {
    expect(kindOf(undefined as unknown as string)).toBe('no_line');
    expect(kindOf(42 as unknown as string)).toBe('no_line');
  });
});

describe('properties', () => {
  const phases = ['build', 'review', 'merge', 'wrap', 'parked', 'landed', 'nowhere'];
  const ctxArb: fc.Arbitrary<GatewayContext> = fc.record(
    {
      role: fc.constantFrom(...ROLES),
      phase: fc.constantFrom(...phases),
      expect: fc.subarray([...WORDS]),
    },
    { requiredKeys: ['role', 'phase'] },
  );
  /** Lines drawn from an alphabet that often nearly forms, and sometimes forms, a gateway line. */
  const lineArb = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc
      .string({
        unit: fc.constantFrom('A', 'D', 'O', 'N', 'E', '_', 'a', '{', '}', '"', ':', ' ', '\t', '\r', '1', '[', '\u0000', '😀'),
        maxLength: 30,
      })
      .map((s) => `>>${s}`),
    fc.constantFrom('>>DONE', '>>DONE {"summary":"x"}', '  >>DONE', '>>done', '```', '>>CHANGES {"notes":"n"}'),
  );
  const replyArb = fc.tuple(fc.array(lineArb, { maxLength: 12 }), fc.constantFrom('\n', '\r\n')).map(([ls, eol]) => ls.join(eol));

  it('never throws, and every answer is either a legal word or a refusal with a message', () => {
    fc.assert(
      fc.property(fc.oneof(replyArb, fc.string({ unit: 'binary' })), ctxArb, (reply, ctx) => {
        const parsed = parseReply(reply, ctx);
        if (parsed.ok) {
          const allowed = ctx.expect ?? legalWords(ctx.role, ctx.phase);
          expect(allowed).toContain(parsed.word);
          expect(legalWords(ctx.role, ctx.phase)).toContain(parsed.word);
        } else {
          expect(REFUSAL_KINDS).toContain(parsed.refusal.kind);
          expect(parsed.refusal.message.length).toBeGreaterThan(0);
          expect(parsed.refusal.message).not.toContain('\u0000');
        }
      }),
      { numRuns: 1500 },
    );
  });

  it('a reply whose lines all fail the contract is no_line', () => {
    fc.assert(
      fc.property(replyArb, ctxArb, (reply, ctx) => {
        fc.pre(reply.split('\n').every((l) => !ORACLE.test(l.replace(/\r$/, ''))));
        expect(kindOf(reply, ctx)).toBe('no_line');
      }),
      { numRuns: 1500 },
    );
  });

  /** Every (role, phase, word) that the glossary makes legal. */
  const legal = WORDS.flatMap((word) =>
    GLOSSARY[word].roles.flatMap((role) => GLOSSARY[word].phases.map((phase) => ({ word, role: role as Role, phase }))),
  );
  const nonEmpty = fc.string({ minLength: 1, maxLength: 20, unit: 'binary' });
  const validPayload: Record<Word, fc.Arbitrary<object>> = {
    DONE: fc.record({ summary: nonEmpty }, { requiredKeys: [] }),
    CONFIRMED: fc
      .array(nonEmpty, { minLength: 1, maxLength: 4 })
      .map((ev) => ({ evidence: Object.fromEntries(ev.map((e, i) => [`c${i + 1}`, e])) })),
    BLOCKED: fc.record({ reason: nonEmpty }),
    WORKING: fc.record({ progress: nonEmpty }, { requiredKeys: [] }),
    MERGED: fc.record({ summary: nonEmpty }, { requiredKeys: [] }),
    APPROVE: fc.record({ notes: nonEmpty }, { requiredKeys: [] }),
    CHANGES: fc.record({ notes: nonEmpty }),
    RETRY: fc.record({ guidance: nonEmpty }),
    ABANDON: fc.record({ reason: nonEmpty }),
    PAGE: fc.record({ reason: nonEmpty }),
  };
  const validLineArb = fc.constantFrom(...legal).chain(({ word, role, phase }) =>
    fc
      .record({
        payload: GLOSSARY[word].payloadOptional ? fc.option(validPayload[word], { nil: undefined }) : validPayload[word],
        gap: fc.constantFrom(' ', '\t', '  \t'),
        tail: fc.constantFrom('', ' ', '\t '),
      })
      .map(({ payload, gap, tail }) => ({
        word,
        ctx: { role, phase } as GatewayContext,
        line: payload === undefined ? `>>${word}${tail}` : `>>${word}${gap}${JSON.stringify(payload)}${tail}`,
        payload: payload ?? {},
      })),
  );

  it('any reply with exactly one valid line for the context parses to that word and payload', () => {
    fc.assert(
      fc.property(validLineArb, fc.array(lineArb, { maxLength: 10 }), fc.nat(), fc.constantFrom('\n', '\r\n'), (valid, prose, at, eol) => {
        const others = prose.filter((l) => !l.includes('\n') && !ORACLE.test(l.replace(/\r$/, '')));
        const index = at % (others.length + 1);
        const lines = [...others.slice(0, index), valid.line, ...others.slice(index)];
        const parsed = parseReply(lines.join(eol), valid.ctx);
        expect(parsed).toEqual({ ok: true, word: valid.word, payload: valid.payload, line: index + 1 });
      }),
      { numRuns: 1500 },
    );
  });
});

describe('describePayload and wordForms', () => {
  it("derive the contract's shapes from the schemas", () => {
    expect(describePayload('DONE')).toBe('optional {"summary": str}');
    expect(describePayload('CONFIRMED')).toBe('{"evidence": {"c1": str, "c2": str, …}}');
    expect(describePayload('BLOCKED')).toBe('{"reason": str}');
    expect(describePayload('RETRY')).toBe('{"guidance": str}');
    expect(wordForms('WORKING')).toEqual(['>>WORKING', '>>WORKING {"progress": str}']);
    expect(wordForms('CHANGES')).toEqual(['>>CHANGES {"notes": str}']);
  });

  it('name every field of every word', () => {
    for (const word of WORDS) {
      const keys = Object.keys((GLOSSARY[word].payload as unknown as { shape: object }).shape);
      for (const key of keys) expect(describePayload(word)).toContain(`"${key}"`);
    }
  });
});

describe('legalWords', () => {
  it('lists what the glossary allows a role in a phase, in glossary order', () => {
    expect(legalWords('builder', 'build')).toEqual(['DONE', 'CONFIRMED', 'BLOCKED', 'WORKING']);
    expect(legalWords('reviewer', 'review')).toEqual(['WORKING', 'APPROVE', 'CHANGES']);
    expect(legalWords('builder', 'merge')).toEqual(['BLOCKED', 'WORKING', 'MERGED']);
    expect(legalWords('architect', 'review')).toEqual(['RETRY', 'ABANDON', 'PAGE']);
    expect(legalWords('operator', 'parked')).toEqual(['RETRY', 'ABANDON']);
    expect(legalWords('builder', 'landed')).toEqual([]);
  });

  it('a refusal when no word is legal says so instead of listing nothing', () => {
    expect(refusal(parseReply('hi', { role: 'builder', phase: 'landed' })).message).toContain('No word is legal');
  });
});
