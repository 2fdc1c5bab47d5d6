import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BpmnModdle, type ModdleElement } from 'bpmn-moddle';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderBpmn } from './bpmn.ts';
import { renderWorkflowDir } from './viewer.ts';
import { loadSpine } from '../spine/load.ts';

/** Where CI installs Chromium (`apt-get install -y chromium`); CHROMIUM_PATH overrides. */
/** Label heights the layout planned, from the DI of the BPMN file. */
async function plannedLabelHeights(): Promise<Map<string, number>> {
  const { rootElement } = await new BpmnModdle().fromXML(await renderBpmn(loadSpine()));
  const plane = (rootElement.diagrams as ModdleElement[])[0]!.plane as ModdleElement;
  const out = new Map<string, number>();
  for (const di of plane.planeElement as ModdleElement[]) {
    const label = di.label as ModdleElement | undefined;
    if (label) out.set((di.bpmnElement as ModdleElement).id!, (label.bounds as { height: number }).height);
  }
  return out;
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

describe('renderWorkflowDir', () => {
  it('returns the BPMN file, the page and the vendored NavigatedViewer with its CSS', async () => {
    const spine = loadSpine();
    const files = await renderWorkflowDir(spine);
    expect([...files.keys()]).toEqual([
      'tron.bpmn',
      'index.html',
      'vendor/bpmn-navigated-viewer.production.min.js',
      'vendor/diagram-js.css',
      'vendor/bpmn-js.css',
      'vendor/LICENSE-bpmn-js.txt',
    ]);
    expect(files.get('tron.bpmn')).toBe(await renderBpmn(spine));
    expect(files.get('vendor/bpmn-navigated-viewer.production.min.js')).toContain('bpmn-navigated-viewer');
    expect(files.get('vendor/diagram-js.css')).toContain('.djs-container');
  });

  it('opens every generated text file with a banner naming its generator and saying do not edit', async () => {
    const files = await renderWorkflowDir(loadSpine());
    for (const [path, text] of files) {
      if (path.endsWith('LICENSE-bpmn-js.txt')) continue;
      const head = text.slice(0, 400);
      expect(head, path).toMatch(/engine\/render\/(viewer|bpmn)\.ts/);
      expect(head, path).toMatch(/Do not edit/);
    }
  });

  it('builds a page that needs no network: the diagram inline, the viewer by a relative script src', async () => {
    const html = (await renderWorkflowDir(loadSpine())).get('index.html')!;
    expect(html).toContain('<script src="vendor/bpmn-navigated-viewer.production.min.js"></script>');
    expect(html).toMatch(/<script type="application\/json" id="diagram">"\\u003c\?xml/);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(html).not.toMatch(/fetch\(/);
    expect(html.match(/<\/script>/g)!.length).toBe(4);
  });

  it('renders identical files every time', async () => {
    const [a, b] = [await renderWorkflowDir(loadSpine()), await renderWorkflowDir(loadSpine())];
    expect([...a]).toEqual([...b]);
  });
});

describe('the workflow page in a real browser', () => {
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`no Chromium at ${CHROMIUM}: run \`apt-get install -y chromium\` or set CHROMIUM_PATH`);
    }
    dir = mkdtempSync(join(tmpdir(), 'tron-viewer-'));
    for (const [path, text] of await renderWorkflowDir(loadSpine())) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('draws every phase from file:// without network, and a click on Build shows its words and budgets', async () => {
    const spine = loadSpine();
    const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
    const errors: string[] = [];
    const requests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('request', (r) => {
      if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url());
    });

    await page.goto(pathToFileURL(join(dir, 'index.html')).href);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });

    for (const phase of spine.phases) {
      const shape = page.locator(`g.djs-shape[data-element-id="Phase_${phase.name}"]`);
      await expect.poll(() => shape.count(), { timeout: 2_000 }).toBe(1);
      const box = await shape.boundingBox();
      expect(box?.width, phase.name).toBeGreaterThan(0);
    }
    for (const handler of ['restate', 'architect', 'operator']) {
      expect(await page.locator(`g.djs-shape[data-element-id="Handler_${handler}"]`).count(), handler).toBe(1);
    }

    // Every label fits the box the layout planned for it in the DI: no unplanned wrapping.
    const planned = await plannedLabelHeights();
    const rendered = await page.evaluate(() =>
      [...document.querySelectorAll('g.djs-shape[data-element-id$="_label"]')].map((g) => {
        const id = g.getAttribute('data-element-id')!.replace(/_label$/, '');
        return [id, g.querySelector('text')?.getBBox().height ?? 0] as [string, number];
      }),
    );
    expect(rendered.length).toBe(planned.size);
    const tooBig = rendered.filter(([id, h]) => h > planned.get(id)! + 2).map(([id, h]) => `${id}: ${h} > ${planned.get(id)}`);
    expect(tooBig).toEqual([]);

    await page.click('g.djs-shape[data-element-id="Phase_build"]');
    const details = page.locator('#details');
    await expect.poll(() => details.getAttribute('data-element-id'), { timeout: 2_000 }).toBe('Phase_build');
    const text = await details.innerText();
    expect(text).toContain('Build');
    expect(text).toMatch(/builder\s+DONE CONFIRMED BLOCKED WORKING/);
    expect(text).toMatch(/Attempts\s+3/);
    expect(text).toMatch(/Time budget\s+1h/);
    expect(text).toMatch(/CONFIRMED → review/);

    await page.click('g.djs-shape[data-element-id="Gateway_trouble"]');
    await expect.poll(() => details.getAttribute('data-element-id'), { timeout: 2_000 }).toBe('Gateway_trouble');
    expect(await details.innerText()).toMatch(/uninterpretable\s+restate → architect → operator/);

    await page.screenshot({ path: join(dir, 'workflow.png') });
    expect(existsSync(join(dir, 'workflow.png'))).toBe(true);
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
    await page.close();
  });
});
