/**
 * The generated workflow/ folder: the BPMN file, the interactive page and the bpmn-js
 * viewer it needs, vendored so the page works offline from file://. `tron docs` writes
 * the map this returns and `tron docs --check` compares it; every file is a pure
 * function of the spine and the installed bpmn-js, so the comparison is exact.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { buildGraph, type Graph } from './bpmn-graph.ts';
import type { Details } from './bpmn-details.ts';
import { renderBpmn } from './bpmn.ts';
import { renderIndexHtml, VIEWER_BANNER } from './viewer-page.ts';
import type { Spine } from '../spine/spine.ts';
import type { TronEvent } from '../core/events.ts';
import { runOverlay, type RunOverlay } from './viewer-run.ts';

const require = createRequire(import.meta.url);

/** Vendored from node_modules/bpmn-js/dist: the NavigatedViewer (pan, zoom) and its CSS. */
const VENDOR = {
  'vendor/bpmn-navigated-viewer.production.min.js': 'bpmn-js/dist/bpmn-navigated-viewer.production.min.js',
  'vendor/diagram-js.css': 'bpmn-js/dist/assets/diagram-js.css',
  'vendor/bpmn-js.css': 'bpmn-js/dist/assets/bpmn-js.css',
} as const;

function vendored(modulePath: string, version: string): string {
  const text = readFileSync(require.resolve(modulePath), 'utf8');
  return `/* Vendored from node_modules/${modulePath} (bpmn-js ${version}). ${VIEWER_BANNER} */\n${text}`;
}

/** Files of workflow/, keyed by path relative to it, in a fixed order. */
export function renderWorkflowDir(spine: Spine): Promise<Map<string, string>> {
  return renderViewer(spine);
}

/**
 * The page for one run (`tron view`): the spine that drove it, with its events' counts
 * per flow and node laid over the diagram; the same files as workflow/.
 */
export function renderRunView(spine: Spine, events: readonly TronEvent[]): Promise<Map<string, string>> {
  return renderViewer(spine, (graph) => runOverlay(events, graph, spine.start));
}

async function renderViewer(spine: Spine, overlay?: (graph: Graph) => RunOverlay): Promise<Map<string, string>> {
  const xml = await renderBpmn(spine);
  const graph = buildGraph(spine);
  const details: Record<string, Details> = {};
  for (const item of [...graph.nodes, ...graph.edges]) details[item.id] = item.details;
  // Read, not require()d: Biome follows a require() of a package's JSON out of the project and fails on a linked node_modules.
  const { version } = JSON.parse(readFileSync(require.resolve('bpmn-js/package.json'), 'utf8')) as { version: string };
  const vendor = { script: 'vendor/bpmn-navigated-viewer.production.min.js', styles: ['vendor/diagram-js.css', 'vendor/bpmn-js.css'] };
  const files = new Map<string, string>([
    ['tron.bpmn', xml],
    ['index.html', renderIndexHtml(xml, details, vendor, overlay?.(graph))],
  ]);
  for (const [path, modulePath] of Object.entries(VENDOR)) files.set(path, vendored(modulePath, version));
  files.set('vendor/LICENSE-bpmn-js.txt', readFileSync(require.resolve('bpmn-js/LICENSE'), 'utf8'));
  return files;
}
