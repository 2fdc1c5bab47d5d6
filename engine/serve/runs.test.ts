import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../os/clock.ts';
import { runStats } from '../render/report.ts';
import { ofType, twoRunsProject } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { pastRunId, writePastRuns, writeRunCopy } from '../testing/past-runs.ts';
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

const idOf = (runDir: string) => runDir.split('/').at(-1)!;

async function served(): Promise<{ get: (path: string) => Promise<Response>; runs: Awaited<ReturnType<typeof twoRunsProject>> }> {
  const runs = await twoRunsProject();
  repo = runs.repo;
  const token = issueToken(repo.dir, 'test', Date.now());
  serving = await serve({ repo: repo.dir, host: '127.0.0.1', port: 0, clock: systemClock });
  const get = (path: string) => fetch(`${serving!.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { get, runs };
}

describe('GET /api/v1/runs', () => {
  it('lists both runs of a repository newest first, each with what it landed, parked and gave up as tron report counts them', async () => {
    const { get, runs } = await served();
    const { first, second } = runs;
    expect(first.exit).toBe(3);
    const res = await get('api/v1/runs');
    expect(res.status).toBe(200);
    const page = await res.json();
    expect(page.next).toBeNull();
    expect(page.runs.map((r: { run: string }) => r.run)).toEqual([idOf(second.runDir), idOf(first.runDir)]);
    // The first landed good and left stuck parked; the second landed later and gave stuck up — good, landed before, is not counted again.
    expect(page.runs[1]).toMatchObject({ landed: 1, parked: 1, abandoned: 0, blocks: 2, exit: 3 });
    expect(page.runs[0]).toMatchObject({ landed: 1, parked: 0, abandoned: 1, blocks: 3, exit: 3 });
    for (const [row, run] of [
      [page.runs[0], second],
      [page.runs[1], first],
    ] as const) {
      const report = runStats(run.events);
      expect({ landed: row.landed, parked: row.parked, abandoned: row.abandoned, blocked: row.blocked }).toEqual({
        landed: report.landed,
        parked: report.parked,
        abandoned: report.abandoned,
        blocked: report.blocked,
      });
      expect(row.started).toBe(ofType(run.events, 'run.started')[0]!.ts);
      expect(row.finished).toBe(ofType(run.events, 'run.finished')[0]!.ts);
      expect(row.wall).toBe(report.wallMs);
      expect(row.events).toBe(run.events.length);
      expect(row.spend).toEqual({ tokens: 0, usd: 0, unpricedTokens: 0 });
    }
    // Without the token: 401, and nothing listed.
    const anonymous = await fetch(`${serving!.url}api/v1/runs`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toEqual({ error: expect.objectContaining({ code: 'TRON_SERVE_UNAUTHORIZED' }) });
  });

  it('pages with limit and before, and refuses a malformed one by code, never with a stack trace', async () => {
    const { get, runs } = await served();
    const one = await (await get('api/v1/runs?limit=1')).json();
    expect(one.runs.map((r: { run: string }) => r.run)).toEqual([idOf(runs.second.runDir)]);
    expect(one.next).toBe(idOf(runs.second.runDir));
    const two = await (await get(`api/v1/runs?limit=1&before=${one.next}`)).json();
    expect(two).toMatchObject({ runs: [{ run: idOf(runs.first.runDir) }], next: null });
    for (const [query, path] of [
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['limit=ten', 'limit'],
      ['limit=1.5', 'limit'],
      ['before=..%2F..', 'before'],
    ]) {
      const bad = await get(`api/v1/runs?${query}`);
      expect(bad.status, query).toBe(400);
      const body = await bad.json();
      expect(body.error, query).toMatchObject({ code: 'TRON_SERVE_QUERY', path });
      expect(JSON.stringify(body), query).not.toMatch(/\bat .*\.ts:\d+/);
    }
  });

  it('pages through hundreds of runs newest first, each once, and a new run does not move a cursor', async () => {
    const { get, runs } = await served();
    const past = writePastRuns(repo!.dir, runs.first.events, 230);
    const expected = [idOf(runs.second.runDir), idOf(runs.first.runDir), ...[...past].reverse()];
    const seen: string[] = [];
    let before: string | null = null;
    let pages = 0;
    do {
      const page: { runs: { run: string; landed: number }[]; next: string | null } = await (
        await get(`api/v1/runs?limit=100${before ? `&before=${before}` : ''}`)
      ).json();
      seen.push(...page.runs.map((r) => r.run));
      // A copy of the first run: the same counts under its own id.
      expect(page.runs.filter((r) => r.run.startsWith('2020')).every((r) => r.landed === 1)).toBe(true);
      before = page.next;
      pages += 1;
      // A run that starts meanwhile is the newest: the pages after the first are the same.
      if (pages === 1) writeRunCopy(repo!.dir, runs.first.events, '20991231-000000-0001', Date.now());
    } while (before !== null);
    expect(pages).toBe(3);
    expect(seen).toEqual(expected);
    expect(pastRunId(1) < idOf(runs.first.runDir)).toBe(true);
  });

  it('lists a run whose log cannot be read with why, and still answers the page and the metrics', async () => {
    const { get, runs } = await served();
    const broken = join(repo!.dir, '.tron', 'runs', pastRunId(1));
    mkdirSync(broken, { recursive: true });
    // Unsigned, and a bad line before the last: corruption, which a reader refuses rather than skips.
    writeFileSync(join(broken, 'events.jsonl'), 'not an event\nnor this\n');
    const page = await (await get('api/v1/runs')).json();
    expect(page.runs.map((r: { run: string }) => r.run)).toEqual([idOf(runs.second.runDir), idOf(runs.first.runDir), pastRunId(1)]);
    expect(page.runs[2]).toMatchObject({ landed: 0, events: 0, exit: null, unreadable: expect.stringMatching(/^[^/]*events\.jsonl:1\b/) });
    const metrics = await get('metrics');
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^tron_blocks_landed_total 2$/m);
  });
});

describe('GET /api/v1/blocks/{id}/history', () => {
  it('shows one block in each run that did something with it: its phase at the end, attempts, turns, spend and landed sha', async () => {
    const { get, runs } = await served();
    const stuck = await (await get('api/v1/blocks/stuck/history')).json();
    expect(stuck).toMatchObject({ block: 'stuck', next: null });
    expect(stuck.runs).toEqual([
      expect.objectContaining({ run: idOf(runs.second.runDir), phase: 'abandoned', turns: 0 }),
      expect.objectContaining({ run: idOf(runs.first.runDir), phase: 'parked', attempts: 1, turns: 1, usd: 0 }),
    ]);
    // good landed in the first run; the second only resumed it as landed.
    const good = await (await get('api/v1/blocks/good/history')).json();
    const landed = ofType(runs.first.events, 'block.landed').find((e) => e.block === 'good')!;
    // Its build, the challenge of its facts, its review.
    const turns = ofType(runs.first.events, 'block.dispatched').filter((e) => e.block === 'good').length;
    expect(turns).toBe(3);
    expect(good.runs).toEqual([
      { run: idOf(runs.first.runDir), phase: 'landed', attempts: 1, turns, usd: 0, spend: expect.any(Object), landedSha: landed.sha },
    ]);
    const later = await (await get('api/v1/blocks/later/history?limit=1')).json();
    expect(later.runs).toEqual([expect.objectContaining({ run: idOf(runs.second.runDir), phase: 'landed' })]);

    const missing = await get('api/v1/blocks/nope/history');
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: 'TRON_SERVE_BLOCK', path: 'nope' });
    const bad = await get('api/v1/blocks/stuck/history?limit=-1');
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('TRON_SERVE_QUERY');
  });
});
