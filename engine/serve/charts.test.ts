import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { repoKey } from '../log/keys.ts';
import { ManualClock, systemClock } from '../os/clock.ts';
import { writeAnswer } from '../runtime/inbox.ts';
import { chartedProject, ofType, project, runTron, type RunResult } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { chartsOf, dayOf, foldRuns, mergeCharts, type RunCharts } from './charts.ts';
import { serve } from './server.ts';
import { issueToken } from './tokens.ts';

let repo: TestRepo;
let first: RunResult;
let second: RunResult;
let logs: TronEvent[][];
beforeAll(async () => {
  ({ repo, first, second } = await chartedProject());
  logs = [first.events, second.events];
}, 60_000);
afterAll(async () => {
  await repo?.cleanup();
});

const all = () => [...first.events, ...second.events];
const lastTs = () => second.events.at(-1)!.ts;
/** When each block's phase last became `to` (its block.phase events), across both runs. */
const phaseAt = (block: string, from: string, to: string) =>
  ofType(all(), 'block.phase').find((e) => e.block === block && e.from === from && e.to === to)!.ts;

describe('chartsOf on the logs of two real runs', () => {
  it('counts each landing on its UTC day, with one entry per day of the window, zeros included', () => {
    const charts = chartsOf(foldRuns(logs), { now: lastTs(), days: 7 });
    expect(charts.landedPerDay).toHaveLength(7);
    expect(charts.landedPerDay.at(-1)!.day).toBe(dayOf(lastTs()));
    expect(charts.to).toBe(dayOf(lastTs()));
    const landings = ofType(all(), 'block.landed');
    expect(landings.map((e) => e.block).sort()).toEqual(['flaky', 'good', 'later']);
    for (const d of charts.landedPerDay) expect(d.landed).toBe(landings.filter((e) => dayOf(e.ts) === d.day).length);
    expect(charts.runs).toBe(2);
  });

  it('measures lead time from ready to landed, a dependent block ready only once its dependency landed', () => {
    const charts = chartsOf(foldRuns(logs), { now: lastTs(), days: 7 });
    const registered = (r: RunResult) => ofType(r.events, 'register.loaded')[0]!.ts;
    // good and flaky are ready when the first run's register names them; later (depends on
    // good, landed in the first run) when the second run's names it.
    const leads = [
      phaseAt('good', 'wrap', 'landed') - registered(first),
      phaseAt('flaky', 'wrap', 'landed') - registered(first),
      phaseAt('later', 'wrap', 'landed') -
        Math.max(registered(second), ofType(first.events, 'block.landed').find((e) => e.block === 'good')!.ts),
    ].sort((a, b) => a - b);
    expect(charts.lead.blocks).toBe(3);
    expect(charts.lead.median).toBe(leads[1]);
    expect(charts.lead.p90).toBe(leads[2]);
    // Where it went: every ms of every lead is in one phase, and review is the time between
    // each block's build→review and review→merge.
    const phases = Object.fromEntries(charts.lead.phases.map((p) => [p.key, p.value]));
    expect(charts.lead.phases.map((p) => p.key)).toEqual(expect.arrayContaining(['build', 'review', 'merge', 'wrap']));
    const total = charts.lead.phases.reduce((n, p) => n + p.value, 0) * 3;
    expect(Math.abs(total - leads.reduce((n, x) => n + x, 0))).toBeLessThanOrEqual(3);
    const review = ['good', 'flaky', 'later'].map((b) => phaseAt(b, 'review', 'merge') - phaseAt(b, 'build', 'review'));
    expect(phases.review).toBe(Math.round(review.reduce((n, x) => n + x, 0) / 3));
    const wrap = ['good', 'flaky', 'later'].map((b) => phaseAt(b, 'wrap', 'landed') - phaseAt(b, 'merge', 'wrap'));
    expect(phases.wrap).toBe(Math.round(wrap.reduce((n, x) => n + x, 0) / 3));
  });

  it('prices a landed block by role and by model from what the workers reported, failures included', () => {
    const charts = chartsOf(foldRuns(logs), { now: lastTs(), days: 7 });
    const usage = ofType(all(), 'usage.recorded');
    const spent = (role: string) => usage.filter((e) => e.role === role).reduce((n, e) => n + (e.cost_usd ?? 0), 0);
    // Five builder turns at $0.02 (flaky's wasted one and stuck's among them), three reviews at $0.01; three blocks landed.
    expect(spent('builder')).toBeCloseTo(0.1);
    expect(spent('reviewer')).toBeCloseTo(0.03);
    expect(charts.cost.landed).toBe(3);
    expect(charts.cost.byRole.map((r) => r.key)).toEqual(['builder', 'reviewer']);
    expect(charts.cost.byRole[0]!.value).toBeCloseTo(0.1 / 3);
    expect(charts.cost.byRole[1]!.value).toBeCloseTo(0.01);
    expect(charts.cost.byModel).toHaveLength(1);
    expect(charts.cost.byModel[0]).toMatchObject({ key: 'sim', tokens: 8 * 1200 });
    expect(charts.cost.byModel[0]!.value).toBeCloseTo(0.13 / 3);
    expect(charts.cost.unpricedTokens).toBe(0);
  });

  it('takes a block’s first truth gate for the first-try rate, and counts failing facts and escalations', () => {
    const charts = chartsOf(foldRuns(logs), { now: lastTs(), days: 7 });
    // flaky's builder said DONE with nothing committed: its first gate failed on `commits`.
    expect(ofType(all(), 'gate.failed').map((e) => [e.block, e.facts.filter((f) => !f.ok).map((f) => f.name)])).toEqual([
      ['flaky', ['commits']],
    ]);
    expect(charts.gate).toEqual({ blocks: 3, firstTry: 2, rate: 2 / 3 });
    expect(charts.failures).toEqual([{ key: 'commits', value: 1 }]);
    expect(charts.escalations).toEqual([{ key: 'blocked', value: 1 }]);
  });

  it('gives the same charts from the runs merged first as from the runs one by one, and leaves the folds as they were', () => {
    const [a, b] = foldRuns(logs) as [RunCharts, RunCharts];
    const window = { now: lastTs(), days: 7 };
    const before = JSON.stringify([...a.phases]);
    expect(chartsOf([mergeCharts([a]), b], window)).toEqual(chartsOf([a, b], window));
    expect(chartsOf([mergeCharts([a, b])], window)).toEqual(chartsOf([a, b], window));
    expect(JSON.stringify([...a.phases])).toBe(before);
    // Merged the wrong way round, the second run's landings come first: not the same charts.
    expect(chartsOf([b, a], window).lead).not.toEqual(chartsOf([a, b], window).lead);
  });

  it('counts nothing from runs outside the window, and says so with nulls rather than zeros', () => {
    const charts = chartsOf(foldRuns(logs), { now: lastTs() + 10 * 86_400_000, days: 3 });
    expect(charts.landedPerDay.map((d) => d.landed)).toEqual([0, 0, 0]);
    expect(charts.lead).toEqual({ blocks: 0, median: null, p90: null, phases: [] });
    expect(charts.gate).toEqual({ blocks: 0, firstTry: 0, rate: null });
    expect(charts.cost).toMatchObject({ landed: 0, usd: 0, byRole: [], byModel: [] });
    expect(charts.failures).toEqual([]);
  });
});

describe('a lead time across two runs', () => {
  it('runs from the first run’s register to the second run’s landing, the time between the runs counted as parked', async () => {
    const sim = `[[blocks.ask.builder]]
kind = "build"
reply = '>>BLOCKED {"reason":"which region?"}'

[[blocks.ask.builder]]
kind = "build"
write = { "ask.txt" = "ask\\n" }
commit = "ask"
reply = ">>DONE"
`;
    const repo = await project({ blocks: { ask: {} }, sim });
    const one = await runTron(repo);
    writeAnswer(repo.dir, 'ask', '>>RETRY {"guidance":"eu-west-1"}', systemClock, repoKey(repo.dir, { create: true }).key);
    const two = await runTron(repo);
    expect(ofType(one.events, 'block.parked').map((e) => e.block)).toEqual(['ask']);
    expect(ofType(two.events, 'block.landed').map((e) => e.block)).toEqual(['ask']);
    const charts = chartsOf(foldRuns([one.events, two.events]), { now: two.events.at(-1)!.ts, days: 1 });
    const landedAt = ofType(two.events, 'block.phase').find((e) => e.to === 'landed')!.ts;
    expect(charts.lead.median).toBe(landedAt - ofType(one.events, 'register.loaded')[0]!.ts);
    const parked = charts.lead.phases.find((p) => p.key === 'parked')!.value;
    expect(parked).toBeGreaterThanOrEqual(ofType(two.events, 'run.started')[0]!.ts - ofType(one.events, 'block.parked')[0]!.ts);
    // The first gate came in the second run, and held.
    expect(charts.gate).toEqual({ blocks: 1, firstTry: 1, rate: 1 });
    expect(charts.escalations).toEqual([{ key: 'blocked', value: 1 }]);
  }, 60_000);
});

describe('GET /api/v1/charts', () => {
  it('answers chartsOf of the runs on disk, refuses a malformed days by code, and 401 without the token', async () => {
    const clock = new ManualClock(lastTs() + 60_000);
    const token = issueToken(repo.dir, 'charts', Date.now());
    const serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock });
    try {
      const get = (path: string) => fetch(`${serving.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      const res = await get('api/v1/charts?days=7');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(JSON.parse(JSON.stringify(chartsOf(foldRuns(logs), { now: clock.now(), days: 7 }))));
      expect((await (await get('api/v1/charts')).json()).landedPerDay).toHaveLength(30);
      for (const days of ['0', '367', 'week', '1.5', '-3']) {
        const bad = await get(`api/v1/charts?days=${days}`);
        expect(bad.status).toBe(400);
        expect(await bad.json()).toEqual({ error: expect.objectContaining({ code: 'TRON_SERVE_QUERY', path: 'days' }) });
      }
      const anonymous = await fetch(`${serving.url}api/v1/charts`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.json()).toEqual({ error: expect.objectContaining({ code: 'TRON_SERVE_UNAUTHORIZED' }) });
      // An earlier run is read once: its log gone, the charts still count what it landed.
      rmSync(join(first.runDir, 'events.jsonl'));
      clock.advance(86_400_000);
      const later = await (await get('api/v1/charts?days=7')).json();
      expect(later.cost.landed).toBe(3);
    } finally {
      await serving.close();
    }
  });
});
