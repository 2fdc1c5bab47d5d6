import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ESCALATION, type Spine } from '../spine/spine.ts';
import { loadSpine, SPINE_FILE } from '../spine/load.ts';
import { renderWorkflowDoc, WORKFLOW_DOC_BANNER } from './workflow-doc.ts';

const REAL = readFileSync(SPINE_FILE, 'utf8');

/** A temporary copy of the real spine with one replacement, loaded (parsed and linted). */
function variant(from: string | RegExp, to: string): Spine {
  const text = REAL.replace(from, to);
  if (text === REAL) throw new Error(`test edit: ${String(from)} is not in engine/workflow.toml`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tron-spine-doc-'));
  try {
    writeFileSync(path.join(dir, 'workflow.toml'), text);
    return loadSpine(path.join(dir, 'workflow.toml'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('renderWorkflowDoc', () => {
  const doc = renderWorkflowDoc(loadSpine());

  it('opens with the generated banner and is the same on every render', () => {
    expect(doc.split('\n')[0]).toBe(WORKFLOW_DOC_BANNER);
    expect(WORKFLOW_DOC_BANNER).toContain('do not edit');
    expect(renderWorkflowDoc(loadSpine())).toBe(doc);
  });

  it('lists every phase, transition and escalation row of the tables', () => {
    const spine = loadSpine();
    for (const p of spine.phases) expect(doc).toContain(`| **${p.name}**`);
    for (const p of spine.phases) for (const t of p.transitions) expect(doc).toContain(`| ${p.name} → ${t.to} | \`${t.on}\``);
    for (const [trouble, row] of Object.entries(ESCALATION)) {
      expect(doc).toContain(`| \`${trouble}\` |`);
      expect(doc).toContain(`| ${row.handlers.join(' → ')} |`);
    }
    for (const section of ['## Budgets', '## Liveness — talk before you page', '## Trunk touched', '[timeouts] turn', '[liveness]'])
      expect(doc).toContain(section);
  });

  it('shows a changed attempt budget', () => {
    const changed = renderWorkflowDoc(variant(/attempts = 3( +# gate failures)/, 'attempts = 7$1'));
    expect(changed).not.toBe(doc);
    expect(changed).toMatch(/^\| \*\*build\*\* \(start\) \| truth \| .* \| 7 \| 1h \|$/m);
    expect(doc).toMatch(/^\| \*\*build\*\* \(start\) \| truth \| .* \| 3 \| 1h \|$/m);
  });

  it('shows an extra transition, and who sends its word', () => {
    const changed = renderWorkflowDoc(
      variant(
        '{ on = "CHANGES", to = "build",',
        '{ on = "WORKING", to = "review", when = "still reading" },\n  { on = "CHANGES", to = "build",',
      ),
    );
    expect(changed).toContain('| review → review | `WORKING` (reviewer) | still reading |');
    expect(doc).not.toContain('still reading');
  });

  it('shows changed liveness numbers and architect budget', () => {
    const changed = renderWorkflowDoc(variant('probe_wait = "30s"', 'probe_wait = "45s"'));
    expect(changed).toContain('| `probe_wait` | 45s |');
    expect(renderWorkflowDoc(variant('architect = 2', 'architect = 1'))).toContain('at most 1 consultation per block');
  });

  it('keeps angle brackets in descriptions from reading as HTML', () => {
    expect(doc).toContain('orphan/&lt;id>-&lt;n>');
    expect(doc).not.toContain('<id>');
  });
});
