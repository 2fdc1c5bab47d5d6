import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../os/clock.ts';
import { startCommand } from '../commands/start.ts';
import { TRON_ROOT } from '../root.ts';
import { readLog } from '../log/eventlog.ts';
import { carriedOverProject, makeProject } from '../testing/project.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
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
let repo: TestRepo | undefined;
let serving: Serving | undefined;
let shots: string | undefined;
beforeAll(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await serving?.close();
  serving = undefined;
  await repo?.cleanup();
  repo = undefined;
  if (shots) rmSync(shots, { recursive: true, force: true });
  shots = undefined;
});

/**
 * `a` builds for a while (so the board shows it building however fast the rest goes, on a
 * busy machine too), then lands; `b` asks the operator first (BLOCKED, parked), and lands
 * once told to retry.
 */
const SIM = `[[blocks.a.builder]]
write = { "a.txt" = "a\\n" }
commit = "Add a"
sleep = "2s"
reply = ">>DONE"

[[blocks.b.builder]]
reply = '>>BLOCKED {"reason":"which API key should it use?"}'

[[blocks.b.builder]]
write = { "b.txt" = "b\\n" }
commit = "Add b"
reply = ">>DONE"
`;

describe('the dashboard in a real browser', () => {
  it('moves the board as a run progresses, answers a parked block from the page, and the block lands', async () => {
    repo = await makeProject({ blocks: { a: { title: 'Log in' }, b: { title: 'Charge a card' } }, sim: SIM });
    const token = issueToken(repo.dir, 'browser', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 100 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${serving.url}#token=${token}`);
    // The token leaves the address bar at once.
    await page.waitForFunction(() => !location.hash.includes('token'));
    // Every column a card of `a` is drawn in, in order.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { phasesOfA: string[] }).phasesOfA = seen;
      new MutationObserver(() => {
        const phase = document.querySelector('[data-block="a"]')?.closest('[data-phase]')?.getAttribute('data-phase');
        if (phase && seen.at(-1) !== phase) seen.push(phase);
      }).observe(document.getElementById('board')!, { childList: true, subtree: true });
    });

    const stop = new AbortController();
    const run = startCommand({
      repo: repo.dir,
      watch: true,
      stop: stop.signal,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
      print: () => {},
    });
    try {
      await page.waitForSelector('[data-phase="landed"] [data-block="a"]', { timeout: 30_000 });
      await page.waitForSelector('[data-phase="parked"] [data-block="b"] form[data-answer="b"]', { timeout: 30_000 });
      const phasesOfA = await page.evaluate(() => (window as unknown as { phasesOfA: string[] }).phasesOfA);
      expect(phasesOfA.at(-1)).toBe('landed');
      expect(phasesOfA.length).toBeGreaterThan(1);
      expect(await page.textContent('[data-block="b"] .why')).toContain('which API key');

      // The board: one column per phase, each block in its own.
      const columns = await page.$$eval('[data-phase]', (cols) => cols.map((c) => c.getAttribute('data-phase')));
      expect(columns.slice(0, 2)).toEqual(['pending', 'build']);
      expect(new Set(columns).size).toBe(columns.length);
      expect(columns.slice(-3)).toEqual(['landed', 'parked', 'abandoned']);
      expect(columns).toEqual(expect.arrayContaining(['review', 'merge', 'landed', 'parked', 'abandoned']));
      await page.click('[data-block="a"]');
      await page.waitForSelector('#detail table tr');
      await page.waitForFunction(() => (document.getElementById('output')?.textContent ?? '').includes('>>'));
      const outputOfA = await page.textContent('#output');
      await page.waitForSelector('[data-edge-id]', { timeout: 15_000 });
      await page.fill('form[data-answer="b"] textarea', 'use the staging key');
      if (process.env.TRON_SAVE_SCREENSHOTS !== '1') shots = mkdtempSync(join(tmpdir(), 'tron-shot-'));
      const saveTo = shots ?? join(TRON_ROOT, 'docs');
      const shot = join(saveTo, 'serve-dashboard.png');
      await page.screenshot({ path: shot });
      expect(statSync(shot).size).toBeGreaterThan(20_000);

      // Answered from the page: the engine reads it, and b goes round again and lands.
      await page.evaluate(() => {
        const said: string[] = [];
        (window as unknown as { said: string[] }).said = said;
        new MutationObserver(() => {
          const text = document.querySelector('form[data-answer="b"] .said')?.textContent;
          if (text && said.at(-1) !== text) said.push(text);
        }).observe(document.getElementById('board')!, { childList: true, subtree: true, characterData: true });
      });
      await page.selectOption('form[data-answer="b"] select', 'RETRY');
      await page.click('form[data-answer="b"] button');
      await page.waitForSelector('[data-phase="landed"] [data-block="b"]', { timeout: 30_000 });
      // Every event of b's second round redrew a's detail; a's output stayed on it.
      await page.waitForFunction(() => document.querySelector('#detail h3')?.textContent?.startsWith('a — '));
      expect(await page.textContent('#output')).toBe(outputOfA);
      const said = await page.evaluate(() => (window as unknown as { said: string[] }).said);
      expect(said).toEqual([expect.stringMatching(/^sent \(\.tron\/inbox\/\d+-b\.json\); the engine reads it now$/)]);
      const seqs = await page.evaluate(() => (window as unknown as { tron: { seqs: number[]; gaps: number } }).tron);
      expect(seqs.gaps).toBe(0);
      expect(seqs.seqs).toEqual(Array.from({ length: seqs.seqs.length }, (_, i) => i + 1));
    } finally {
      stop.abort();
      await run;
    }
    const events = readLog(join(serving.hub.current!.runDir, 'events.jsonl')).events;
    expect(events.find((e) => e.type === 'operator.answered')).toMatchObject({
      block: 'b',
      word: 'RETRY',
      payload: { guidance: 'use the staging key' },
      by: 'serve:browser',
    });
    expect(errors).toEqual([]);
  });

  it('tells the operator that the next tron start reads an answer sent while no engine runs', async () => {
    const { page } = await parkedPage('stuck');
    await page.click('form[data-answer="stuck"] button');
    await page.waitForFunction(() => /^sent/.test(document.querySelector('form[data-answer="stuck"] .said')?.textContent ?? ''));
    const said = await page.textContent('form[data-answer="stuck"] .said');
    expect(said).toMatch(/^sent \(\.tron\/inbox\/\d+-stuck\.json\); no engine is running: the next `tron start` reads it$/);
    expect(said).not.toContain('reads it now');
  });

  it('wraps a long inbox file name inside its card instead of running past it', async () => {
    // A long block id without a hyphen: the file name has no place a line may break.
    const id = 'paymentprovidermigrationwithrefunds';
    const { page } = await parkedPage(id);
    await page.click(`form[data-answer="${id}"] button`);
    await page.waitForFunction((b) => /^sent/.test(document.querySelector(`form[data-answer="${b}"] .said`)?.textContent ?? ''), id);
    const fits = await page.$eval(`[data-block="${id}"]`, (card) => {
      const said = card.querySelector('.said')!;
      const range = document.createRange();
      range.selectNodeContents(said);
      const text = range.getBoundingClientRect();
      const box = card.getBoundingClientRect();
      return {
        saidScrolls: said.scrollWidth - said.clientWidth,
        cardScrolls: card.scrollWidth - card.clientWidth,
        past: text.right - box.right,
      };
    });
    expect(fits).toEqual({ saidScrolls: 0, cardScrolls: 0, past: expect.any(Number) });
    expect(fits.past).toBeLessThanOrEqual(0);
  });

  it('shows the output of a block carried over from an earlier run, from the run where its turn happened', async () => {
    const carried = await carriedOverProject();
    repo = carried.repo;
    const first = carried.first.runDir.split('/').at(-1)!;
    const token = issueToken(repo.dir, 'browser', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 100 });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${serving.url}#token=${token}`);
    await page.click('[data-phase="parked"] [data-block="stuck"]');
    await page.waitForFunction(() => (document.getElementById('output')?.textContent ?? '').includes('>>BLOCKED'));
    expect(await page.textContent('#detail h3:nth-of-type(2)')).toBe(`Output of builder build turn 1, run ${first}`);
    expect(await page.textContent('#output')).toContain('which provider?');
    expect(errors).toEqual([]);
  });
});

/** A finished run with block `id` parked (no engine running), served, and a page on its dashboard. */
async function parkedPage(id: string): Promise<{ page: Page }> {
  repo = await makeProject({
    blocks: { [id]: { title: 'Move payments' } },
    sim: `[[blocks.${id}.builder]]\nreply = '>>BLOCKED {"reason":"which provider?"}'\n`,
  });
  const exit = await startCommand({
    repo: repo.dir,
    clock: systemClock,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
    print: () => {},
  });
  expect(exit).toBe(3);
  const token = issueToken(repo.dir, 'browser', Date.now());
  serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, pollMs: 100 });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(`${serving.url}#token=${token}`);
  await page.waitForSelector(`[data-phase="parked"] form[data-answer="${id}"]`);
  return { page };
}
