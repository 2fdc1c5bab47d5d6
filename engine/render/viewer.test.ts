import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BpmnModdle, type ModdleElement } from 'bpmn-moddle';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderBpmn } from './bpmn.ts';
import { renderWorkflowDir } from './viewer.ts';
import { loadSpine } from '../spine/load.ts';
import { viewCommand } from '../commands/view.ts';
import { needProgram, requireAll, skipWithout } from '../testing/needs.ts';

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

/** Chromium as CI installs it (`apt-get install -y chromium`); CHROMIUM_PATH overrides. */
const CHROMIUM = needProgram('Chromium', 'apt-get install -y chromium (or set CHROMIUM_PATH)', {
  names: ['chromium', 'chromium-browser'],
  ...(process.env.CHROMIUM_PATH ? { at: process.env.CHROMIUM_PATH } : {}),
});
/** Without Chromium the page's tests skip here (one line says so), and fail under CI. */
const NO_BROWSER = skipWithout('the workflow page tests in a real browser', CHROMIUM);
const launch = () => {
  requireAll(CHROMIUM);
  return chromium.launch({ executablePath: CHROMIUM.path!, args: ARGS });
};
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
    expect(html.match(/<\/script>/g)!.length).toBe(5);
  });

  it('renders identical files every time', async () => {
    const [a, b] = [await renderWorkflowDir(loadSpine()), await renderWorkflowDir(loadSpine())];
    expect([...a]).toEqual([...b]);
  });
});

describe.skipIf(NO_BROWSER)('the workflow page in a real browser', () => {
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tron-viewer-'));
    for (const [path, text] of await renderWorkflowDir(loadSpine())) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    browser = await launch();
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

/** Where the page's pieces are on the screen, and the smallest size any diagram text is drawn at. */
async function measure(page: Page) {
  return page.evaluate(() => {
    const rect = (sel: string) => document.querySelector(sel)!.getBoundingClientRect();
    const texts = [...document.querySelectorAll<SVGTextElement>('#canvas g.djs-element text')].filter((t) => t.textContent?.trim());
    const drawn = texts.map((t) => {
      // The screen's scale of the text, rotated or not (lane names are vertical).
      const m = t.getScreenCTM();
      const scale = m ? Math.hypot(m.a, m.b) : 0;
      return { text: t.textContent!.trim(), px: Number.parseFloat(getComputedStyle(t).fontSize) * scale };
    });
    const smallest = drawn.reduce((a, b) => (b.px < a.px ? b : a));
    return {
      canvas: rect('#canvas'),
      pool: rect('g.djs-shape[data-element-id="Participant_block"]'),
      details: rect('#details'),
      viewport: { width: window.innerWidth, height: window.innerHeight },
      texts: drawn.length,
      smallest,
    };
  });
}

describe.skipIf(NO_BROWSER)('the workflow page fits the screen', () => {
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tron-viewer-fit-'));
    for (const [path, text] of await renderWorkflowDir(loadSpine())) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    browser = await launch();
  });

  afterAll(async () => {
    await browser?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [width, height] of [
    [1366, 768],
    [1920, 1080],
  ] as const) {
    it(`at ${width}×${height}: the whole diagram across the page's width, every label drawn at 11px or more, the details panel right below`, async () => {
      const page = await browser.newPage({ viewport: { width, height } });
      await page.goto(pathToFileURL(join(dir, 'index.html')).href);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });
      const m = await measure(page);
      await page.screenshot({ path: join(dir, `fit-${width}.png`) });
      // The diagram is all there, inside the canvas, and uses its width.
      expect(m.pool.left).toBeGreaterThanOrEqual(m.canvas.left - 1);
      expect(m.pool.right).toBeLessThanOrEqual(m.canvas.right + 1);
      expect(m.pool.top).toBeGreaterThanOrEqual(m.canvas.top - 1);
      expect(m.pool.bottom).toBeLessThanOrEqual(m.canvas.bottom + 1);
      expect(m.pool.width / m.canvas.width).toBeGreaterThan(0.9);
      // Readable: no text of the diagram (labels, names) is drawn smaller than 11px.
      expect(m.texts).toBeGreaterThan(30);
      expect(m.smallest.px, `"${m.smallest.text}"`).toBeGreaterThanOrEqual(11);
      // No empty half page: the panel starts where the diagram ends and fills the rest.
      expect(m.details.top - m.pool.bottom).toBeLessThan(40);
      expect(m.details.bottom).toBeGreaterThanOrEqual(m.viewport.height - 1);
      expect(m.details.height).toBeGreaterThan(100);
      expect(existsSync(join(dir, `fit-${width}.png`))).toBe(true);
      await page.close();
    });
  }
});

describe.skipIf(NO_BROWSER)('tron view', () => {
  let browser: Browser;
  let repo: string;

  beforeAll(async () => {
    // A repository whose only run is a recorded one: two blocks, one landed at once, one re-reviewed after its MERGED changed the patch.
    repo = mkdtempSync(join(tmpdir(), 'tron-view-'));
    const runDir = join(repo, '.tron', 'runs', '20260101-120000-001');
    mkdirSync(runDir, { recursive: true });
    const golden = join(import.meta.dirname, '..', '..', 'runs', 'merge-conflict');
    for (const f of ['events.jsonl', 'workflow.toml']) copyFileSync(join(golden, f), join(runDir, f));
    browser = await launch();
  });

  afterAll(async () => {
    await browser?.close();
    if (repo) rmSync(repo, { recursive: true, force: true });
  });

  it("writes a page into the run directory that draws the run's counts on the flows and phases its blocks took", async () => {
    const lines: string[] = [];
    expect(await viewCommand({ repo, print: (l) => lines.push(l), env: {} })).toBe(0);
    const path = join(repo, '.tron', 'runs', '20260101-120000-001', 'view', 'index.html');
    // The path on a line of its own, then how to open it.
    expect(lines).toEqual([path, `open it in a browser: ${pathToFileURL(path).href}`]);
    expect(existsSync(join(dirname(path), 'vendor', 'bpmn-navigated-viewer.production.min.js'))).toBe(true);

    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(pathToFileURL(path).href);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 10_000 });
    const count = (attr: string, id: string) => page.locator(`.tron-count[${attr}="${id}"]`);
    expect(await count('data-edge-id', 'Flow_start_build').innerText()).toBe('2');
    expect(await count('data-edge-id', 'Flow_merge_landed_wrap').innerText()).toBe('2');
    expect(await count('data-edge-id', 'Flow_merge_patch_changed_review').innerText()).toBe('1');
    expect(await count('data-edge-id', 'Flow_merge_patch_changed_review').getAttribute('title')).toBe('took this flow: second');
    expect(await count('data-node-id', 'Phase_landed').innerText()).toBe('2');
    expect(await count('data-edge-id', 'Flow_review_CHANGES_build').count()).toBe(0);
    // The flows taken are drawn heavier; the others are not.
    expect(await page.locator('g.djs-connection.tron-taken[data-element-id="Flow_merge_patch_changed_review"]').count()).toBe(1);
    expect(await page.locator('g.djs-connection.tron-taken[data-element-id="Flow_review_CHANGES_build"]').count()).toBe(0);
    // The panel sums the run up: where each block ended.
    const panel = await page.locator('#details').innerText();
    expect(panel).toContain('Run ');
    expect(panel).toMatch(/first\s+landed/);
    expect(panel).toMatch(/second\s+landed/);
    const m = await measure(page);
    expect(m.smallest.px).toBeGreaterThanOrEqual(11);
    await page.screenshot({ path: join(dirname(path), 'view.png') });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('says how to open the page: --open where there is a display, and where there is none that it cannot open one', async () => {
    const withDisplay: string[] = [];
    await viewCommand({ repo, print: (l) => withDisplay.push(l), env: { DISPLAY: ':0' } });
    expect(withDisplay[1]).toMatch(/^open it in a browser: file:\/\/.*\/view\/index\.html; tron view --open opens it for you$/);
    const headless: string[] = [];
    expect(await viewCommand({ repo, open: true, print: (l) => headless.push(l), env: {} })).toBe(0);
    expect(headless[1]).toMatch(
      /^tron view: no display here to open a browser on \(DISPLAY and WAYLAND_DISPLAY are unset\); open file:\/\/.*index\.html in a browser/,
    );
  });

  it('refuses a run the repository does not have (exit 2 from the CLI)', async () => {
    await expect(viewCommand({ repo, run: 'no-such-run', print: () => {} })).rejects.toThrow(/neither a run id/);
  });
});
