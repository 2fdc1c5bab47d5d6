import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getMetricsFromIterator, type PromData, type PromHistogramData, type PromMetrics } from 'prom2javascript';
import { afterEach, describe, expect, it } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { systemClock } from '../os/clock.ts';
import { blockFile, landingSim, makeProject, ofType, runTron, twoRunsProject } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { serve, type Serving } from './server.ts';
import { issueToken } from './tokens.ts';

let repo: TestRepo | undefined;
let serving: Serving | undefined;
afterEach(async () => {
  await serving?.close();
  serving = undefined;
  await repo?.cleanup();
  repo = undefined;
});

/** GET /metrics, parsed by a Prometheus text-format parser (prom2javascript: it refuses a malformed line or histogram). */
async function scrape(token: string): Promise<{ type: string | null; metrics: PromMetrics }> {
  const res = await fetch(`${serving!.url}metrics`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const text = await res.text();
  return { type: res.headers.get('content-type'), metrics: await getMetricsFromIterator(text.split('\n')[Symbol.iterator]()) };
}

const samples = (m: PromMetrics, name: string) => (m[name]?.data ?? []) as PromData[];
const value = (m: PromMetrics, name: string, labels: Record<string, string> = {}) =>
  samples(m, name).find((d) => Object.entries(labels).every(([k, v]) => d.labels[k] === v))?.value;
const histograms = (m: PromMetrics, name: string) => (m[name]?.data ?? []) as PromHistogramData[];

/** Events of both runs of one type, counted by a key. */
function countBy<T extends TronEvent['type']>(events: TronEvent[], type: T, key: (e: Extract<TronEvent, { type: T }>) => string) {
  const out: Record<string, number> = {};
  for (const e of ofType(events, type)) out[key(e)] = (out[key(e)] ?? 0) + 1;
  return out;
}

describe('GET /metrics', () => {
  it('serves the runs in the Prometheus text format, its landed counter the sum of what GET /api/v1/runs lists', async () => {
    const runs = await twoRunsProject();
    repo = runs.repo;
    const token = issueToken(repo.dir, 'test', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    const { type, metrics } = await scrape(token);
    expect(type).toMatch(/^text\/plain; version=0\.0\.4/);

    // Conventions: tron_ first; counters end in _total; histograms are durations in seconds.
    for (const [name, family] of Object.entries(metrics)) {
      expect(name).toMatch(/^tron_[a-z_]+$/);
      expect(family.help, name).not.toBe('');
      if (family.type === 'counter') expect(name).toMatch(/_total$/);
      if (family.type === 'histogram') expect(name).toMatch(/_seconds$/);
    }

    const listed = (await (await fetch(`${serving.url}api/v1/runs`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
      runs: { landed: number; abandoned: number }[];
    };
    const landed = listed.runs.reduce((n, r) => n + r.landed, 0);
    expect(landed).toBe(2);
    expect(value(metrics, 'tron_blocks_landed_total')).toBe(landed);
    expect(value(metrics, 'tron_blocks_abandoned_total')).toBe(listed.runs.reduce((n, r) => n + r.abandoned, 0));

    const events = [...runs.first.events, ...runs.second.events];
    expect(value(metrics, 'tron_blocks_parked_total')).toBe(ofType(events, 'block.parked').length);
    expect(value(metrics, 'tron_runs_finished_total', { exit: '3' })).toBe(2);
    // Turns by role and outcome: the word the gateway read.
    const accepted = countBy(events, 'reply.accepted', (e) => e.word.toLowerCase());
    expect(accepted.blocked).toBe(1);
    expect(value(metrics, 'tron_turns_total', { role: 'builder', outcome: 'blocked' })).toBe(1);
    expect(value(metrics, 'tron_turns_total', { role: 'builder', outcome: 'done' })).toBe(accepted.done);
    expect(value(metrics, 'tron_turns_total', { role: 'reviewer', outcome: 'approve' })).toBe(accepted.approve);
    const turns = samples(metrics, 'tron_turns_total').reduce((n, d) => n + d.value, 0);
    expect(turns).toBe(ofType(events, 'reply.accepted').length + ofType(events, 'reply.refused').length);
    // Escalations by trouble and handler, as the logs have them.
    const raised = countBy(events, 'escalation.raised', (e) => `${e.trouble}/${e.handler}`);
    expect(Object.keys(raised).length).toBeGreaterThan(0);
    expect(
      Object.fromEntries(samples(metrics, 'tron_escalations_total').map((d) => [`${d.labels.trouble}/${d.labels.handler}`, d.value])),
    ).toEqual(raised);

    // One turn duration per reply, one lead time per landing, the gate's test runs.
    const replies = countBy(events, 'reply.received', (e) => e.role);
    expect(Object.fromEntries(histograms(metrics, 'tron_turn_duration_seconds').map((h) => [h.labels.role, h.count]))).toEqual(replies);
    expect(histograms(metrics, 'tron_block_lead_time_seconds')[0]!.count).toBe(2);
    const gateTests = ofType(events, 'facts.observed').filter((e) => e.purpose === 'gate' && e.tests?.ms !== undefined).length;
    expect(gateTests).toBeGreaterThan(0);
    expect(
      histograms(metrics, 'tron_test_run_duration_seconds').find((h) => h.labels.where === 'gate' && h.labels.step === 'test')?.count,
    ).toBe(gateTests);

    // Gauges of the latest run: good (landed in the first) and later landed, stuck abandoned; no engine at work.
    expect(value(metrics, 'tron_blocks', { phase: 'landed' })).toBe(2);
    expect(value(metrics, 'tron_blocks', { phase: 'abandoned' })).toBe(1);
    expect(value(metrics, 'tron_blocks', { phase: 'parked' })).toBe(0);
    expect(value(metrics, 'tron_blocks', { phase: 'review' })).toBe(0);
    expect(value(metrics, 'tron_engine_up')).toBe(0);
    // No database here: no lease to tell of.
    expect(metrics.tron_lease_generation).toBeUndefined();

    // Without the token: 401, and no metrics.
    const anonymous = await fetch(`${serving.url}metrics`);
    expect(anonymous.status).toBe(401);
    expect((await anonymous.json()).error.code).toBe('TRON_SERVE_UNAUTHORIZED');
  });

  it('counts each event once while runs come and go under one tron serve', async () => {
    repo = await makeProject({ blocks: { a: {} }, sim: landingSim(['a', 'b']) });
    const token = issueToken(repo.dir, 'test', Date.now());
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
    expect(value((await scrape(token)).metrics, 'tron_blocks_landed_total')).toBe(0);
    const first = await runTron(repo);
    expect(first.exit).toBe(0);
    const once = (await scrape(token)).metrics;
    expect(value(once, 'tron_blocks_landed_total')).toBe(1);
    // The same again: nothing is counted twice.
    expect(value((await scrape(token)).metrics, 'tron_blocks_landed_total')).toBe(1);
    writeFileSync(join(repo.dir, '.tron', 'blocks', 'b.md'), blockFile('b', {}));
    const second = await runTron(repo);
    expect(second.exit).toBe(0);
    const twice = (await scrape(token)).metrics;
    expect(value(twice, 'tron_blocks_landed_total')).toBe(2);
    expect(value(twice, 'tron_runs_finished_total', { exit: '0' })).toBe(2);
    const replies = ofType([...first.events, ...second.events], 'reply.received').length;
    expect(histograms(twice, 'tron_turn_duration_seconds').reduce((n, h) => n + h.count, 0)).toBe(replies);
  });

  it('tells the lease’s generation only while there is one', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const token = issueToken(repo.dir, 'test', Date.now());
    let generation: number | undefined = 7;
    serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock, leaseGeneration: () => generation });
    expect(value((await scrape(token)).metrics, 'tron_lease_generation')).toBe(7);
    generation = undefined;
    expect((await scrape(token)).metrics.tron_lease_generation).toBeUndefined();
  });
});
