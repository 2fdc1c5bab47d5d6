import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../cli/table.ts';
import { usageLine } from '../cli/args.ts';
import { CLI_DOC_BANNER, renderCliDoc } from './cli-doc.ts';

/** The text of one command's section. */
function section(doc: string, name: string): string {
  const start = doc.indexOf(`\n## \`tron ${name}\`\n`);
  expect(start, `a section for tron ${name}`).toBeGreaterThan(0);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
}

const byAudience = (audience: string) => Object.keys(COMMANDS).filter((n) => COMMANDS[n]!.audience === audience);

describe('renderCliDoc', () => {
  const doc = renderCliDoc();

  it('opens with the generator banner and is the same on every call', () => {
    expect(doc.startsWith(`${CLI_DOC_BANNER}\n`)).toBe(true);
    expect(CLI_DOC_BANNER).toContain('engine/render/cli-doc.ts');
    expect(CLI_DOC_BANNER).toContain('do not edit');
    expect(renderCliDoc()).toBe(doc);
  });

  it("has one section per command, the user's commands first, each with its usage line and summary", () => {
    const headings = [...doc.matchAll(/^## `tron ([a-z]+)`$/gm)].map((m) => m[1]);
    expect(headings).toEqual([...byAudience('user'), ...byAudience('contributor')]);
    for (const [name, c] of Object.entries(COMMANDS)) {
      const text = section(doc, name);
      expect(text).toContain(`\n\`\`\`\n${usageLine(name, c)}\n\`\`\`\n`);
      expect(text).toContain(c.summary);
    }
  });

  it('lists every argument and option under the metavariable its usage line names, with its description', () => {
    for (const [name, c] of Object.entries(COMMANDS)) {
      const text = section(doc, name);
      for (const [option, d] of Object.entries(c.options))
        expect(text).toMatch(new RegExp(`^- \`(-${d.short ?? '.'}, )?--${option}[ \`].*: ${literal(d.description)}$`, 'm'));
      for (const a of c.args) expect(text).toMatch(new RegExp(`^- \`${a.name}(\\.\\.\\.)?\`: ${literal(a.description)}$`, 'm'));
    }
    expect(section(doc, 'init')).toContain('- `--worker openai|claude|codex|sim`: the worker preset to configure');
    expect(section(doc, 'start')).toContain('- `--repo DIR`:');
    expect(section(doc, 'start')).toContain('- `--watch`: ');
    expect(section(doc, 'report')).toContain('tron report [RUN] [--repo DIR] [--json]');
    expect(section(doc, 'report')).toContain('- `RUN`: ');
  });

  it('links every command from a summary table, contributor commands in a table of their own', () => {
    for (const name of Object.keys(COMMANDS)) expect(doc).toMatch(new RegExp(`^\\| \\[\`${name}\`\\]\\(#tron-${name}\\) \\| `, 'm'));
    const apart = doc.indexOf('For work on tron itself');
    expect(apart).toBeGreaterThan(0);
    for (const name of byAudience('contributor')) expect(doc.indexOf(`| [\`${name}\`]`)).toBeGreaterThan(apart);
    for (const name of byAudience('user')) expect(doc.indexOf(`| [\`${name}\`]`)).toBeLessThan(apart);
  });
});

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
