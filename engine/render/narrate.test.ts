import { describe, expect, it } from 'vitest';
import { Narrator, answerCommand, stampLines } from './narrate.ts';
import type { EventBody, TronEvent } from '../core/events.ts';

const SHA = (c: string) => c.repeat(40);

/** Stamps bodies as the log writer would (seq from 1, one second apart). */
function events(bodies: EventBody[]): TronEvent[] {
  return bodies.map((b, i) => ({ v: 1, seq: i + 1, ts: Date.UTC(2026, 0, 1, 12, 0, i), ...b }) as TronEvent);
}

function tell(bodies: EventBody[], repo = '/home/me/my app'): string {
  const n = new Narrator({ repo, runDir: '/runs/r1' });
  return events(bodies)
    .flatMap((e) => n.lines(e))
    .join('\n');
}

const TAIL = [
  'AssertionError [ERR_ASSERTION]: the widget must spin',
  '    at Object.<anonymous> (/w/tests/widget.test.js:1:24)',
  '    at Module._compile (node:internal/modules/cjs/loader:1521:14)',
  '',
  'Node.js v20',
].join('\n');

const observed = (head: string): EventBody => ({
  type: 'facts.observed',
  block: 'w',
  purpose: 'gate',
  base: SHA('a'),
  head,
  commits: 1,
  trunk_sha: SHA('a'),
  main_status: '',
  clean: true,
  status: '',
  tests: { exit: 1, timed_out: false, log: `tests/w-gate-${head.slice(0, 12)}.log`, tail: TAIL },
  patch_id: 'p',
  fast_forward: true,
});
const evidence = (head: string) => `the test command exited 1 at ${head.slice(0, 12)}; last lines:\n${TAIL}`;
const red = (head: string): EventBody => ({
  type: 'gate.failed',
  block: 'w',
  sha: head,
  purpose: 'gate',
  facts: [
    { name: 'commits', ok: true, evidence: '1 new commit(s)' },
    { name: 'tests', ok: false, evidence: evidence(head) },
  ],
});

describe('Narrator', () => {
  it("says a red gate's failing test output and the path of its whole log, without Node's own stack frames", () => {
    const text = tell([observed(SHA('b')), red(SHA('b'))]);
    expect(text).toContain('w: gate failed — tests');
    expect(text).toContain('AssertionError [ERR_ASSERTION]: the widget must spin');
    expect(text).toContain('at Object.<anonymous> (/w/tests/widget.test.js:1:24)');
    expect(text).not.toContain('node:internal');
    expect(text).toContain(`log: /runs/r1/tests/w-gate-${SHA('b').slice(0, 12)}.log`);
  });

  it('shows the same failing output once: a repeat and the page quoting it say "as above"', () => {
    const text = tell([
      observed(SHA('b')),
      red(SHA('b')),
      observed(SHA('b')),
      red(SHA('b')),
      {
        type: 'escalation.raised',
        block: 'w',
        trouble: 'gate_budget',
        detail: `the gate failed 3 times:\n- tests: ${evidence(SHA('b'))}`,
        handler: 'operator',
      },
      { type: 'block.parked', block: 'w', reason: `gate_budget: the gate failed 3 times:\n- tests: ${evidence(SHA('b'))}` },
      { type: 'page.sent', block: 'w', page: 'w#5', reason: `the gate failed 3 times:\n- tests: ${evidence(SHA('b'))}` },
      { type: 'run.finished', reason: 'done', exit: 3, landed: [], parked: ['w'], abandoned: [] },
    ]);
    expect(text.match(/the widget must spin/g)).toHaveLength(1);
    expect(text).toContain('(the same output as above)');
    expect(text).toMatch(/PAGE w \(gate_budget\): the gate failed 3 times:\n {4}- tests: .*\n {4}\(the output shown above\)/);
    expect(text.match(/^PAGE/gm)).toHaveLength(1);
    expect(text).toContain('w: parked, for the operator');
    // The run's end names the parked block and the command again, not its reason.
    expect(text).toMatch(/tron: w is parked\n {2}answer: tron answer/);
  });

  it('after a stop, tells a block still under way from a parked one: only the parked one is offered an answer', () => {
    const text = tell([
      { type: 'block.parked', block: 'stuck', reason: 'the builder said BLOCKED' },
      { type: 'block.parked', block: 'freed', reason: 'the builder said BLOCKED' },
      { type: 'block.phase', block: 'freed', from: 'parked', to: 'build', on: 'RETRY' },
      { type: 'run.stopping', signal: 'SIGTERM' },
      {
        type: 'run.finished',
        reason: 'signal',
        exit: 143,
        landed: [],
        parked: ['stuck', 'freed', 'busy'],
        abandoned: [],
        detail: 'stopped by SIGTERM',
      },
    ]);
    expect(text).toContain('tron: freed, busy are unfinished — the next `tron start` goes on with them');
    expect(text).toMatch(/tron: stuck is parked: the builder said BLOCKED\n {2}answer: tron answer/);
    expect(text).not.toMatch(/(freed|busy) is parked/);
    expect(text).toContain('0 landed, 2 unfinished, 1 parked, 0 abandoned (stopped by SIGTERM)');
  });

  it('counts every open block of a run that ended by itself as parked', () => {
    const text = tell([{ type: 'run.finished', reason: 'done', exit: 3, landed: [], parked: ['w'], abandoned: [] }]);
    expect(text).toMatch(/tron: w is parked\n {2}answer: tron answer/);
    expect(text).not.toContain('unfinished');
  });

  it("carries a review's CHANGES notes on the transition back to build", () => {
    const text = tell([
      { type: 'reply.accepted', block: 'w', session: 'w.1.reviewer', turn: 1, word: 'CHANGES', payload: { notes: 'name the export' } },
      { type: 'block.phase', block: 'w', from: 'review', to: 'build', on: 'CHANGES' },
    ]);
    expect(text).toBe('w: review → build (CHANGES): name the export');
  });

  it('says a test run an agent reported and tron did not believe, and that tron runs it itself', () => {
    const text = tell([
      { type: 'tests.queued', block: 'w', session: 'tests:gate', sha: SHA('b'), ref: `refs/tron/test/${SHA('b')}` },
      {
        type: 'tests.refused',
        block: 'w',
        session: 'tests:gate',
        sha: SHA('b'),
        agent: 'agent h pid 1',
        reason: 'agent h pid 1 reported a run of fff',
      },
    ]);
    expect(text).toBe(
      'w: a test run on an agent at bbbbbbbbbbbb was not believed — agent h pid 1 reported a run of fff; tron runs it itself',
    );
  });

  it('quotes a repository path with a space in the answer command, so it can be pasted', () => {
    expect(answerCommand('/home/me/my app', 'w')).toBe(
      `tron answer --repo '/home/me/my app' w '>>RETRY {"guidance":"…"}'  (or '>>ABANDON {"reason":"…"}')`,
    );
    expect(answerCommand('/srv/app', 'w')).toMatch(/^tron answer --repo \/srv\/app w /);
  });

  it('stamps every line of a multi-line entry with the time', () => {
    const at = new Date(2026, 0, 1, 9, 5, 7).getTime();
    expect(stampLines(at, 'a\n  b')).toBe('09:05:07 a\n09:05:07   b');
  });
});

describe('the landing of a stack', () => {
  it('says once that the blocks of one stack landed together, from trunk to the top', () => {
    const text = tell([
      {
        type: 'land.intent',
        stack: 2,
        sha: SHA('c'),
        from: SHA('a'),
        tested: 'lane',
        blocks: [
          { block: 'b1', sha: SHA('b') },
          { block: 'b2', sha: SHA('c') },
        ],
      },
      { type: 'block.landed', block: 'b1', sha: SHA('b'), from: SHA('a'), top: SHA('c') },
      { type: 'block.landed', block: 'b2', sha: SHA('c'), from: SHA('a'), top: SHA('c') },
    ]);
    expect(text).toBe(`lane: stack 2 landed — trunk ${SHA('a').slice(0, 12)} → ${SHA('c').slice(0, 12)} (b1, b2)`);
  });

  it('says a lone block landed by its own name', () => {
    const text = tell([
      { type: 'land.intent', stack: 1, sha: SHA('b'), from: SHA('a'), tested: 'gate', blocks: [{ block: 'b1', sha: SHA('b') }] },
      { type: 'block.landed', block: 'b1', sha: SHA('b'), from: SHA('a'), top: SHA('b') },
    ]);
    expect(text).toBe(`b1: landed — trunk ${SHA('a').slice(0, 12)} → ${SHA('b').slice(0, 12)}`);
  });
});
