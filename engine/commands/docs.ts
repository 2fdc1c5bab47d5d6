/**
 * `tron docs [--check]`: every generated file, rendered from its one source. With
 * --check nothing is written; any file whose content differs is named and the exit
 * status is 1, so a stale doc or diagram fails the test suite.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { renderCliDoc } from '../render/cli-doc.ts';
import { renderGlossaryDoc } from '../render/glossary-doc.ts';
import { renderEventsDoc } from '../render/events-doc.ts';
import { renderErrorsDoc } from '../render/errors-doc.ts';
import { renderWorkflowDoc } from '../render/workflow-doc.ts';
import { renderWorkflowDir } from '../render/viewer.ts';
import { renderOpenApi } from '../serve/openapi.ts';
import type { Spine } from '../spine/spine.ts';
import { loadSpine } from '../spine/load.ts';
import { TRON_ROOT } from '../root.ts';

/** The tron checkout: generated files live in its docs/ and workflow/. */
export { TRON_ROOT };

/** Every generated file, keyed by its path relative to the tron checkout. */
export async function renderAll(spine: Spine = loadSpine()): Promise<Map<string, string>> {
  const files = new Map<string, string>([
    ['docs/GLOSSARY.md', renderGlossaryDoc()],
    ['docs/EVENTS.md', renderEventsDoc()],
    ['docs/ERRORS.md', renderErrorsDoc()],
    ['docs/WORKFLOW.md', renderWorkflowDoc(spine)],
    ['docs/CLI.md', renderCliDoc()],
    ['docs/openapi.json', renderOpenApi()],
  ]);
  for (const [path, text] of await renderWorkflowDir(spine)) files.set(join('workflow', path), text);
  return files;
}

export async function docsCommand(opts: { check: boolean; root?: string; spine?: Spine; print: (line: string) => void }): Promise<number> {
  const root = opts.root ?? TRON_ROOT;
  const files = await renderAll(opts.spine);
  const stale: string[] = [];
  for (const [path, text] of files) {
    const file = join(root, path);
    const current = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
    if (current === text) continue;
    stale.push(path);
    if (!opts.check) {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
    }
  }
  if (opts.check) {
    if (stale.length === 0) {
      opts.print(`tron docs: all ${files.size} generated files are up to date`);
      return 0;
    }
    for (const path of stale) opts.print(`tron docs: ${path} is stale; run \`npx tron docs\` and commit the result`);
    return 1;
  }
  opts.print(
    stale.length === 0 ? `tron docs: all ${files.size} generated files were already up to date` : `tron docs: wrote ${stale.join(', ')}`,
  );
  return 0;
}
