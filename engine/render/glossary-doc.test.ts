import { describe, expect, it } from 'vitest';
import { describePayload, LINE_CONTRACT, REFUSAL_KINDS } from '../gateway/parse.ts';
import { GLOSSARY, WORDS } from '../gateway/glossary.ts';
import { GLOSSARY_DOC_BANNER, renderGlossaryDoc } from './glossary-doc.ts';

describe('docs/GLOSSARY.md', () => {
  const doc = renderGlossaryDoc();
  const lines = doc.split('\n');

  it('opens with the generated-file banner naming its generator and the command', () => {
    expect(lines[0]).toBe(GLOSSARY_DOC_BANNER);
    expect(lines[0]).toContain('engine/render/glossary-doc.ts');
    expect(lines[0]).toContain('do not edit');
    expect(lines[0]).toContain('`tron docs`');
  });

  it('states the contract line pattern verbatim', () => {
    expect(LINE_CONTRACT).toBe('^>>([A-Z][A-Z_]*)(?:[ \\t]+(\\{.*\\}))?[ \\t]*$');
    expect(lines).toContain(LINE_CONTRACT);
  });

  it('has one row per word with its roles, phases, payload shape and meaning', () => {
    for (const word of WORDS) {
      const rows = lines.filter((l) => l.startsWith(`| \`${word}\` |`));
      expect(rows, word).toHaveLength(1);
      const spec = GLOSSARY[word];
      const payload = describePayload(word).replace(/^optional /, '');
      expect(rows[0]).toContain(`| ${spec.roles.join(', ')} | ${spec.phases.join(', ')} |`);
      expect(rows[0]).toContain(`\`${payload}\``);
      expect(rows[0]).toContain(spec.meaning);
    }
  });

  it('explains every refusal kind', () => {
    for (const kind of REFUSAL_KINDS)
      expect(
        lines.some((l) => l.startsWith(`| \`${kind}\` |`)),
        kind,
      ).toBe(true);
  });

  it('is deterministic and ends with one newline', () => {
    expect(renderGlossaryDoc()).toBe(doc);
    expect(doc.endsWith('\n') && !doc.endsWith('\n\n')).toBe(true);
  });
});
