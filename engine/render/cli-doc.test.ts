import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../cli.ts';
import { CLI_DOC_BANNER, renderCliDoc } from './cli-doc.ts';

/** The text of one command's section. */
function section(doc: string, name: string): string {
  const start = doc.indexOf(`\n## \`tron ${name}\`\n`);
  expect(start, `a section for tron ${name}`).toBeGreaterThan(0);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

describe('renderCliDoc', () => {
  const doc = renderCliDoc();

  it('opens with the generator banner and is the same on every call', () => {
    expect(doc.startsWith(`${CLI_DOC_BANNER}\n`)).toBe(true);
    expect(CLI_DOC_BANNER).toContain('engine/render/cli-doc.ts');
    expect(CLI_DOC_BANNER).toContain('do not edit');
    expect(renderCliDoc()).toBe(doc);
  });

  it('has one section per command, in table order, with its usage line and summary', () => {
    const headings = [...doc.matchAll(/^## `tron ([a-z]+)`$/gm)].map((m) => m[1]);
    expect(headings).toEqual(Object.keys(COMMANDS));
    for (const [name, c] of Object.entries(COMMANDS)) {
      const text = section(doc, name);
      expect(text).toContain(`\n\`\`\`\n${c.usage}\n\`\`\`\n`);
      expect(text).toContain(c.summary);
    }
  });

  it('lists every option with the value its usage line names and its description', () => {
    for (const [name, c] of Object.entries(COMMANDS)) {
      const text = section(doc, name);
      for (const [option, d] of Object.entries(c.options))
        expect(text).toMatch(new RegExp(`^- \`--${option}[ \`].*: ${literal(d.description)}$`, 'm'));
    }
    expect(section(doc, 'init')).toContain('- `--worker openai|claude|codex|sim`: the worker preset to configure');
    expect(section(doc, 'start')).toContain('- `--repo DIR`:');
    expect(section(doc, 'start')).toContain('- `--watch`: ');
  });

  it('links every command from the summary table to its section', () => {
    for (const name of Object.keys(COMMANDS)) expect(doc).toMatch(new RegExp(`^\\| \\[\`${name}\`\\]\\(#tron-${name}\\) \\| `, 'm'));
  });
});

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
