import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { outcomeOf, renderReport, runStats } from './report.ts';
import { reportCommand } from '../commands/report.ts';
import type { EventBody, TronEvent } from '../core/events.ts';

const S1 = 'a'.repeat(40);
const S2 = 'b'.repeat(40);

/** Stamps bodies with v, seq (1, 2, …) and the given ts. */
function log(...items: Array<[number, EventBody]>): TronEvent[] {
  return items.map(([ts, body], i) => ({ v: 1, seq: i + 1, ts, ...body }) as TronEvent);
}

const turn = (block: string, role: 'builder' | 'reviewer', n: number, kind: 'build' | 'challenge' | 'review') =>
  ({
    type: 'block.dispatched',
    block,
    role,
    session: `${block}.1.${role}`,
    turn: n,
    kind,
    phase: 'build',
    attempt: 1,
    expect: [],
  }) as EventBody;
const reply = (block: string, role: 'builder' | 'reviewer', n: number, text: string) =>
  ({ type: 'reply.received', block, role, session: `${block}.1.${role}`, turn: n, ok: true, reply: text }) as EventBody;
const accepted = (block: string, word: string) =>
  ({ type: 'reply.accepted', block, session: `${block}.1.builder`, turn: 1, word, payload: {} }) as EventBody;
const observed = (block: string) =>
  ({
    type: 'facts.observed',
    block,
    purpose: 'gate',
    base: S1,
    head: S2,
    commits: 1,
    trunk_sha: S1,
    main_status: '',
    clean: true,
    status: '',
    tests: null,
    patch_id: '',
    fast_forward: true,
  }) as EventBody;
/** A usage note as logs before usage.recorded held it: still read, its cost unknown. */
const legacyUsage = (block: string, role: 'builder' | 'reviewer', total: number) =>
  ({
    type: 'worker.usage',
    block,
    role,
    session: `${block}.1.${role}`,
    model: 'm',
    prompt_tokens: total - 100,
    completion_tokens: 100,
    total_tokens: total,
  }) as EventBody;
const usage = (block: string, role: 'builder' | 'reviewer', tokens: [number, number, number], cost?: number) =>
  ({
    type: 'usage.recorded',
    block,
    role,
    session: `${block}.1.${role}`,
    turn: 1,
    model: 'm',
    input_tokens: tokens[0],
    cached_tokens: tokens[1],
    output_tokens: tokens[2],
    ...(cost !== undefined ? { cost_usd: cost, priced_by: 'worker' } : {}),
  }) as EventBody;
const info = (id: string) => ({ id, title: id, depends_on: [], priority: 0, criteria: ['x'], digest: 'd' });

/**
 * Two blocks from t=1000 to t=6000. `a` fails the gate once (no commits), then answers
 * BLOCKED and is parked for the operator. `b` goes straight through, waits 300ms in the
 * merge lane's queue, and lands as a stack of one (stacked at 4500, closed at 5200).
 */
const EVENTS = log(
  [
    1000,
    {
      type: 'run.started',
      run: 'r',
      version: '0',
      trunk: 'main',
      trunk_sha: S1,
      main_status: '',
      max_parallel: 2,
      architect: false,
      liveness: { probe_wait_ms: 1, extension_ms: 1, max_extensions: 1, reissues: 1 },
      watch: false,
      pid: 1,
    } as EventBody,
  ],
  [1000, { type: 'register.loaded', blocks: [info('a'), info('b')] }],
  [1000, { type: 'worktree.requested', block: 'a', attempt: 1, base: S1 }],
  [1000, { type: 'worktree.requested', block: 'b', attempt: 1, base: S1 }],
  [1100, turn('a', 'builder', 1, 'build')],
  [1100, turn('b', 'builder', 1, 'build')],
  [2100, reply('a', 'builder', 1, '>>DONE')],
  [2100, accepted('a', 'DONE')],
  [2100, { type: 'facts.requested', block: 'a', purpose: 'gate', base: S1, trunk_sha: S1 }],
  [2600, reply('b', 'builder', 1, '>>DONE')],
  [2600, usage('b', 'builder', [400, 100, 50], 0.0021)],
  [2600, accepted('b', 'DONE')],
  [2600, { type: 'facts.requested', block: 'b', purpose: 'gate', base: S1, trunk_sha: S1 }],
  [3100, observed('a')],
  [
    3100,
    {
      type: 'gate.failed',
      block: 'a',
      sha: S2,
      purpose: 'gate',
      facts: [
        { name: 'commits', ok: false, evidence: 'none' },
        { name: 'clean', ok: true, evidence: 'clean' },
      ],
    },
  ],
  [3100, { type: 'block.phase', block: 'a', from: 'build', to: 'build', on: 'gate.failed' }],
  [3100, turn('a', 'builder', 2, 'build')],
  [3600, observed('b')],
  [3600, turn('b', 'builder', 2, 'challenge')],
  [3700, reply('b', 'builder', 2, '>>CONFIRMED')],
  [3700, accepted('b', 'CONFIRMED')],
  [3700, { type: 'gate.passed', block: 'b', sha: S2, facts: [] }],
  [3700, { type: 'block.phase', block: 'b', from: 'build', to: 'review', on: 'CONFIRMED' }],
  [3700, turn('b', 'reviewer', 1, 'review')],
  [4200, reply('b', 'reviewer', 1, '>>APPROVE')],
  [4200, usage('b', 'reviewer', [200, 50, 50], 0.0013)],
  [4200, usage('b', 'reviewer', [20, 0, 5])],
  [4200, accepted('b', 'APPROVE')],
  [4200, { type: 'block.phase', block: 'b', from: 'review', to: 'merge', on: 'APPROVE' }],
  [4200, { type: 'merge.queued', block: 'b' }],
  [4500, { type: 'lane.stacked', stack: 1, trunk_sha: S1, blocks: [{ block: 'b', sha: S2 }] }],
  [
    4600,
    {
      type: 'rebase.done',
      stack: 1,
      trunk_sha: S1,
      results: [{ block: 'b', outcome: 'fast_forward', onto: S1, sha: S2, patch_before: '', patch_after: '' }],
    },
  ],
  [4600, { type: 'candidate.requested', stack: 1, sha: S2, blocks: ['b'] }],
  [
    5100,
    { type: 'candidate.tested', stack: 1, sha: S2, blocks: ['b'], ok: true, tests: { exit: 0, timed_out: false, log: 'l', tail: '' } },
  ],
  [5100, { type: 'land.intent', stack: 1, sha: S2, from: S1, blocks: [{ block: 'b', sha: S2 }], tested: 'lane' }],
  [5200, { type: 'block.landed', block: 'b', sha: S2, from: S1, top: S2 }],
  [5200, { type: 'block.phase', block: 'b', from: 'merge', to: 'wrap', on: 'landed' }],
  [5200, { type: 'wrap.requested', block: 'b', summary: 'b' }],
  [5200, { type: 'lane.closed', stack: 1, landed: ['b'], returned: [], detail: 'landed b' }],
  [5300, { type: 'block.wrapped', block: 'b', summary: 'b' }],
  [5300, { type: 'block.phase', block: 'b', from: 'wrap', to: 'landed', on: 'wrapped' }],
  [5600, reply('a', 'builder', 2, '>>BLOCKED {"reason":"r"}')],
  [5600, legacyUsage('a', 'builder', 1000)],
  [5600, accepted('a', 'BLOCKED')],
  [5600, { type: 'escalation.raised', block: 'a', trouble: 'blocked', handler: 'operator', detail: 'r' }],
  [5600, { type: 'block.parked', block: 'a', reason: 'blocked: r' }],
  [5700, { type: 'page.sent', block: 'a', page: 'a#45', reason: 'r' }],
  [6000, { type: 'run.finished', reason: 'done', exit: 3, landed: ['b'], parked: ['a'], abandoned: [] }],
);

describe('run statistics', () => {
  const s = runStats(EVENTS);

  it('counts the run: landed, parked, abandoned, throughput per hour of wall time', () => {
    expect(s).toMatchObject({ run: 'r', exit: 3, events: 48, wallMs: 5000, landed: 1, parked: 1, abandoned: 0 });
    // 1 block in 5 s of wall time: 3600 s / 5 s = 720 an hour.
    expect(s.throughputPerHour).toBe(720);
  });

  it('splits wall time between workers, test runs and the engine alone, counting overlaps once', () => {
    // Turns: a 1100–2100, b 1100–2600, a 3100–5600, b 3600–3700, b 3700–4200.
    //   union 1100–2600 (1500) + 3100–5600 (2500) = 4000; summed 1000+1500+2500+100+500 = 5600.
    // Tests: a 2100–3100, b 2600–3600 (gate facts), b 4600–5100 (the lane): union 1500 + 500 = 2000; summed 2500.
    // Either going: 1100–5600 = 4500 of the 5000 of wall time; the engine alone: 500.
    expect(s.time).toEqual({ workersMs: 4000, testsMs: 2000, engineMs: 500, workersSumMs: 5600, testsSumMs: 2500 });
  });

  it('measures the wait in the lane from merge.queued to lane.stacked, and the lane busy from lane.stacked to lane.closed', () => {
    expect(s.mergeWaitMs).toBe(300);
    expect(s.lane).toEqual({ busyMs: 700, stacks: 1 });
  });

  it('sums tokens by role over the run', () => {
    expect(s.tokens).toEqual({ builder: 1550, reviewer: 325 });
  });

  it('sums tokens and cost per block, per role and per run, counting usage without a cost as unpriced', () => {
    const b = s.blocks.find((x) => x.id === 'b')!;
    expect(b.spend).toEqual({
      inputTokens: 620,
      cachedTokens: 150,
      outputTokens: 105,
      tokens: 875,
      costUsd: 0.0021 + 0.0013,
      unpricedTokens: 25,
    });
    expect(b.spendByRole.reviewer).toMatchObject({ tokens: 325, costUsd: 0.0013, unpricedTokens: 25 });
    // An old worker.usage note: prompt tokens as input, completion as output, no cost.
    const a = s.blocks.find((x) => x.id === 'a')!;
    expect(a.spend).toEqual({ inputTokens: 900, cachedTokens: 0, outputTokens: 100, tokens: 1000, costUsd: 0, unpricedTokens: 1000 });
    expect(s.spend).toMatchObject({ tokens: 1875, costUsd: 0.0021 + 0.0013, unpricedTokens: 1025 });
    expect(Object.keys(s.spendByRole)).toEqual(['builder', 'reviewer']);
  });

  it("gives each block a cost equal to the sum of its usage events' cost", () => {
    for (const block of s.blocks) {
      let sum = 0;
      for (const e of EVENTS) if (e.type === 'usage.recorded' && e.block === block.id) sum += e.cost_usd ?? 0;
      expect(block.spend.costUsd).toBe(sum);
    }
  });

  it('gives every block its time in each phase, attempts, gate failures by fact, review rounds, escalations and tokens', () => {
    const a = s.blocks.find((b) => b.id === 'a')!;
    const b = s.blocks.find((x) => x.id === 'b')!;
    // a: build 1000–5600 (through its gate failure), parked 5600–6000.
    expect(a).toEqual({
      id: 'a',
      phase: 'parked',
      attempts: 1,
      phaseMs: { pending: 0, build: 4600, parked: 400 },
      gateFailures: { commits: 1 },
      reviewRounds: 0,
      changesRequested: 0,
      escalations: [{ seq: 45, trouble: 'blocked', handler: 'operator', outcome: 'unanswered' }],
      tokens: { builder: 1000 },
      spend: { inputTokens: 900, cachedTokens: 0, outputTokens: 100, tokens: 1000, costUsd: 0, unpricedTokens: 1000 },
      spendByRole: { builder: { inputTokens: 900, cachedTokens: 0, outputTokens: 100, tokens: 1000, costUsd: 0, unpricedTokens: 1000 } },
      mergeWaitMs: 0,
      workerMs: 3500,
      testMs: 1000,
    });
    // b: build 1000–3700, review –4200, merge –5200, wrap –5300, landed –6000.
    expect(b).toEqual({
      id: 'b',
      phase: 'landed',
      attempts: 1,
      phaseMs: { pending: 0, build: 2700, review: 500, merge: 1000, wrap: 100, landed: 700 },
      gateFailures: {},
      reviewRounds: 1,
      changesRequested: 0,
      escalations: [],
      tokens: { builder: 550, reviewer: 325 },
      spend: b.spend,
      spendByRole: b.spendByRole,
      mergeWaitMs: 300,
      workerMs: 2100,
      testMs: 1500,
    });
  });

  it('renders the same figures as report.md', () => {
    const md = renderReport(EVENTS);
    expect(md).toContain('1 landed, 1 parked, 0 abandoned; 48 events; wall time 5.0s; exit 3.');
    expect(md).toContain('throughput: 720.0 blocks landed per hour');
    expect(md).toContain('engine alone: 0.5s (10.0% of wall time');
    expect(md).toContain('workers: 4.0s busy (80.0%); 5.6s summed');
    expect(md).toContain('test runs: 2.0s busy (40.0%); 2.5s summed');
    expect(md).toContain('merge lane: 1 stack(s), busy 0.7s (14.0% of wall time); blocks waited 0.3s in its queue');
    expect(md).toContain('| a | parked | 1 | pending 0.0s, build 4.6s, parked 0.4s | commits 1 | 0 | 0 | blocked→operator |');
    expect(md).toContain('- seq 45, a: blocked → operator — unanswered');
    expect(md).toContain('- spend: $0.0034 (1,875 tokens, 1,025 unpriced); input 1,520, cached 150, output 205');
    expect(md).toContain('- spend by role: builder $0.0021 (1,550 tokens, 1,000 unpriced), reviewer $0.0013 (325 tokens, 25 unpriced)');
    expect(md).toMatch(/^\| b \| landed \|.* \| builder 550, reviewer 325 \| \$0\.0034 \(875 tokens, 25 unpriced\) \|$/m);
  });
});

describe('escalation outcomes', () => {
  const esc = (handler: string, trouble = 'uninterpretable') =>
    ({ type: 'escalation.raised', block: 'x', trouble, handler, detail: 'd' }) as EventBody;
  const refused = { type: 'reply.refused', block: 'x', session: 's', turn: 2, kind: 'no_line', message: 'm' } as EventBody;
  const word = (w: string) => ({ type: 'reply.accepted', block: 'x', session: 's', turn: 2, word: w, payload: {} }) as EventBody;

  it('names what each handler came back with', () => {
    expect(outcomeOf(log([1, esc('restate')], [2, word('DONE')]), 0)).toBe('DONE');
    expect(outcomeOf(log([1, esc('restate')], [2, refused], [2, esc('architect')]), 0)).toBe('refused: no_line');
    expect(outcomeOf(log([1, esc('architect')], [2, word('RETRY')]), 0)).toBe('RETRY');
    const answer = { type: 'operator.answered', block: 'x', word: 'ABANDON', payload: {}, file: 'f', trunk_sha: S1 } as EventBody;
    expect(outcomeOf(log([1, esc('operator')], [2, answer]), 0)).toBe('answered ABANDON');
    const extended = { type: 'worker.extended', block: 'x', session: 's', turn: 1, extension_ms: 1, count: 1 } as EventBody;
    expect(outcomeOf(log([1, esc('probe', 'overrun')], [2, extended]), 0)).toBe('life: extended');
    expect(outcomeOf(log([1, esc('probe', 'overrun')], [2, esc('reissue', 'overrun')]), 0)).toBe('passed to reissue');
  });
});

describe('the report of one run', () => {
  const recovered = (block: string, phase: string) =>
    ({
      type: 'block.recovered',
      block,
      phase,
      attempt: 1,
      turns: {},
      architect_calls: 0,
      rounds: { build: 0, review: 0, merge: 0 },
      page: false,
      detail: 'earlier',
    }) as EventBody;

  it('counts what this run did: blocks an earlier run landed are said apart, and give it no throughput', () => {
    const events = log(
      [0, { type: 'recovery.started', previous: 'r0', torn: false }],
      [1, recovered('a', 'landed')],
      [2, recovered('b', 'landed')],
      [3, recovered('c', 'abandoned')],
      [3_600_000, { type: 'run.finished', reason: 'done', exit: 0, landed: ['a', 'b'], parked: [], abandoned: ['c'] }],
    );
    const s = runStats(events);
    expect(s).toMatchObject({
      landed: 0,
      abandoned: 0,
      parked: 0,
      unfinished: 0,
      throughputPerHour: 0,
      carried: { landed: 2, abandoned: 1 },
    });
    expect(renderReport(events)).toContain('0 landed, 0 parked, 0 abandoned;');
    expect(renderReport(events)).toContain('Carried over from earlier runs, not counted above: 2 landed, 1 abandoned.');
  });

  it('says a block still under way when a signal stopped the run is unfinished, not parked', () => {
    const events = log(
      [0, { type: 'worktree.requested', block: 'a', attempt: 1, base: S1 }],
      [1, turn('a', 'builder', 1, 'build')],
      [2, { type: 'run.finished', reason: 'signal', exit: 130, landed: [], parked: ['a'], abandoned: [] }],
    );
    expect(runStats(events)).toMatchObject({ unfinished: 1, parked: 0 });
    expect(renderReport(events)).toContain('0 landed, 1 unfinished, 0 parked, 0 abandoned;');
  });
});

describe('tron report', () => {
  it('prints report.md for a recorded run, or its statistics as JSON', async () => {
    const runDir = join(import.meta.dirname, '..', '..', 'runs', 'happy-deps');
    const text: string[] = [];
    expect(await reportCommand({ repo: runDir, run: runDir, json: false, print: (l) => text.push(l) })).toBe(0);
    expect(text.join('\n')).toContain('3 landed, 0 parked, 0 abandoned');
    const json: string[] = [];
    await reportCommand({ repo: runDir, run: runDir, json: true, print: (l) => json.push(l) });
    const stats = JSON.parse(json.join('\n'));
    expect(stats.blocks.map((b: { id: string }) => b.id).sort()).toEqual(['base', 'side', 'top']);
    expect(stats.landed).toBe(3);
  });
});
