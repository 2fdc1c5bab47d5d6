import { describe, expect, it, onTestFinished } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docsCommand, renderAll, TRON_ROOT } from './docs.ts';
import { loadSpine, SPINE_FILE } from '../spine/load.ts';

describe('tron docs', () => {
  it('finds every committed generated file up to date (tron docs --check)', async () => {
    const lines: string[] = [];
    const exit = await docsCommand({ check: true, print: (l) => lines.push(l) });
    expect(lines.join('\n')).toContain('up to date');
    expect(exit).toBe(0);
  });

  it('names a stale file and writes nothing under --check', async () => {
    const root = mkdtempSync(join(tmpdir(), 'tron-docs-'));
    onTestFinished(() => rmSync(root, { recursive: true, force: true }));
    await docsCommand({ check: false, root, print: () => {} });
    writeFileSync(join(root, 'docs/GLOSSARY.md'), 'edited by hand\n');
    const lines: string[] = [];
    expect(await docsCommand({ check: true, root, print: (l) => lines.push(l) })).toBe(1);
    expect(lines).toEqual(['tron docs: docs/GLOSSARY.md is stale; run `npx tron docs` and commit the result']);
    expect(readFileSync(join(root, 'docs/GLOSSARY.md'), 'utf8')).toBe('edited by hand\n');
  });

  it('changes both WORKFLOW.md and the BPMN diagram when the spine changes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-spine-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'workflow.toml');
    const text = readFileSync(SPINE_FILE, 'utf8')
      .replace('attempts = 3            # CHANGES rounds', 'attempts = 7            # CHANGES rounds')
      .replace('title = "Review"', 'title = "Peer review"');
    writeFileSync(file, text);
    const before = await renderAll(loadSpine());
    const after = await renderAll(loadSpine(file));
    expect(after.get('docs/WORKFLOW.md')).not.toBe(before.get('docs/WORKFLOW.md'));
    expect(after.get('docs/WORKFLOW.md')).toContain('Peer review');
    expect(after.get('workflow/tron.bpmn')).not.toBe(before.get('workflow/tron.bpmn'));
    expect(after.get('workflow/tron.bpmn')).toContain('name="Peer review"');
    expect(before.get('workflow/tron.bpmn')).not.toContain('Peer review');
    expect(TRON_ROOT).toBe(join(import.meta.dirname, '..', '..'));
  });
});
