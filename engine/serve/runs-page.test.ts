import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { systemClock } from '../os/clock.ts';
import { TRON_ROOT } from '../root.ts';
import { chartedProject, ofType } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { dayOf } from './charts.ts';
import { serve, type Serving } from './server.ts';
import { issueToken } from './tokens.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox',
  '--headless',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

let browser: Browser;
let repo: TestRepo;
let serving: Serving;
let token: string;
let events: TronEvent[];
beforeAll(async () => {
  const made = await chartedProject();
  repo = made.repo;
  events = [...made.first.events, ...made.second.events];
  token = issueToken(repo.dir, 'browser', Date.now());
  serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await serving?.close();
  await repo?.cleanup();
});

interface Drawn {
  key: string;
  value: number;
  width: number;
  height: number;
}

/** The bars (or segments) of a chart as the browser laid them out. */
const drawn = (page: Page, selector: string): Promise<Drawn[]> =>
  page.$$eval(selector, (rects) =>
    rects.map((r) => {
      const box = r.getBoundingClientRect();
      return { key: r.getAttribute('data-key') ?? '', value: Number(r.getAttribute('data-value')), width: box.width, height: box.height };
    }),
  );

async function open(path: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(err.message));
  // Nothing but this server is asked for anything.
  page.on('request', (req) => {
    if (!req.url().startsWith(serving.url) && !req.url().startsWith('data:')) errors.push(`fetched ${req.url()}`);
  });
  await page.goto(`${serving.url}${path}#token=${token}`);
  await page.waitForFunction(() => (window as unknown as { tronCharts?: unknown }).tronCharts !== undefined);
  return { page, errors };
}

describe('the runs page in a real browser', () => {
  it('draws a bar per day as tall as the blocks landed that day, from the runs on disk', async () => {
    const { page, errors } = await open('runs');
    await page.waitForFunction(() => !location.hash.includes('token'));
    const bars = await drawn(page, '#landed rect.bar');
    expect(bars).toHaveLength(30);
    expect(bars.at(-1)!.key).toBe(dayOf(Date.now()));
    const landings = ofType(events, 'block.landed');
    const perDay = (day: string) => landings.filter((e) => dayOf(e.ts) === day).length;
    expect(bars.map((b) => b.value)).toEqual(bars.map((b) => perDay(b.key)));
    expect(bars.reduce((n, b) => n + b.value, 0)).toBe(3);
    const tallest = Math.max(...bars.map((b) => b.height));
    expect(tallest).toBeGreaterThan(50);
    for (const b of bars) expect(b.height).toBeCloseTo((tallest * b.value) / Math.max(...bars.map((x) => x.value)), 0);
    expect(await page.textContent('#landed-sum')).toBe('3 landed');

    // Fewer days: fewer bars, the same landings.
    await page.selectOption('#days', '7');
    await page.waitForFunction(() => document.querySelectorAll('#landed rect.bar').length === 7);
    expect((await drawn(page, '#landed rect.bar')).reduce((n, b) => n + b.value, 0)).toBe(3);
    expect(page.url()).toContain('?days=7');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('splits the lead time by phase in proportion, rings the first-try gate rate, and ranks cost, failures and escalations', async () => {
    const { page, errors } = await open('runs?days=7');
    const charts = await page.evaluate(
      () => (window as unknown as { tronCharts: { lead: { median: number; phases: { key: string; value: number }[] } } }).tronCharts,
    );
    expect(await page.textContent('#median')).not.toBe('–');
    const segments = await drawn(page, '#lead rect.segment');
    expect(segments.map((s) => s.key)).toEqual(charts.lead.phases.map((p) => p.key));
    expect(segments.map((s) => s.key)).toEqual(expect.arrayContaining(['build', 'review', 'merge', 'wrap']));
    const width = segments.reduce((n, s) => n + s.width, 0);
    const total = segments.reduce((n, s) => n + s.value, 0);
    for (const s of segments) expect(s.width / width).toBeCloseTo(s.value / total, 2);

    // Two of the three blocks passed their first truth gate.
    expect(await page.textContent('#gate-rate')).toBe('67%');
    const arc = await page.$eval('#gate-arc', (c) => {
      const [on] = (c.getAttribute('stroke-dasharray') ?? '').split(' ').map(Number);
      return on! / (2 * Math.PI * Number(c.getAttribute('r')));
    });
    expect(arc).toBeCloseTo(2 / 3, 3);

    // Builders spent $0.10 and reviewers $0.03 for three landed blocks: the builder's bar is 10/3 the reviewer's.
    const roles = await drawn(page, '#by-role rect.bar');
    expect(roles.map((r) => r.key)).toEqual(['builder', 'reviewer']);
    expect(roles[0]!.width / roles[1]!.width).toBeCloseTo(10 / 3, 1);
    expect(await page.textContent('#by-role')).toContain('$0.0333 a block');
    expect((await drawn(page, '#by-model rect.bar')).map((r) => r.key)).toEqual(['sim']);
    expect((await drawn(page, '#failures rect.bar')).map((r) => [r.key, r.value])).toEqual([['commits', 1]]);
    expect((await drawn(page, '#escalations rect.bar')).map((r) => [r.key, r.value])).toEqual([['blocked', 1]]);
    // The latest runs, newest first.
    expect(await page.$$eval('#runs tr', (trs) => trs.length)).toBe(2);

    let shots: string | undefined;
    if (process.env.TRON_SAVE_SCREENSHOTS !== '1') shots = mkdtempSync(join(tmpdir(), 'tron-shot-'));
    const shot = join(shots ?? join(TRON_ROOT, 'docs'), 'serve-runs.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(statSync(shot).size).toBeGreaterThan(20_000);
    if (shots) rmSync(shots, { recursive: true, force: true });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('links the board and the runs page both ways, the token carried along', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(`${serving.url}#token=${token}`);
    await page.waitForFunction(() => !location.hash.includes('token'));
    await page.click('header nav a[href="/runs"]');
    await page.waitForURL(`${serving.url}runs`);
    await page.waitForFunction(() => (window as unknown as { tronCharts?: unknown }).tronCharts !== undefined);
    expect(await page.$$eval('#landed rect.bar', (r) => r.length)).toBe(30);
    expect(await page.textContent('#problem')).toBe('');
    await page.click('header nav a[href="/"]');
    await page.waitForURL(serving.url);
    await page.waitForSelector('.column');
    await page.close();
  });
});
