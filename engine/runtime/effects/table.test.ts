import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DECISION_TYPES, type EventOf, eventKind, EVENT_SCHEMAS, type EventType, type TronEvent } from '../../core/events.ts';
import { apply, initialState } from '../../core/state.ts';
import { readLog } from '../../log/eventlog.ts';
import { TRON_ROOT } from '../../root.ts';
import { Driver, GREEN, sha } from '../../testing/driver.ts';
import type { Moment } from './context.ts';
import { renderPrompt } from './prompts.ts';
import { EFFECTS, jobOf } from './table.ts';
import { QUEUED } from '../../queue/job-queue.ts';
import type { TurnRequest } from './turn.ts';

/** Every golden run's events, in order. */
function goldenRuns(): Array<{ name: string; events: TronEvent[] }> {
  const dir = join(TRON_ROOT, 'runs');
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('events.jsonl'))
    .sort()
    .map((f) => ({ name: f, events: readLog(join(dir, f)).events }));
}

describe('the effects table', () => {
  it('has a row for exactly the event types described as decisions', () => {
    const described = (Object.keys(EVENT_SCHEMAS) as EventType[]).filter((t) => eventKind(t) === 'decision').sort();
    expect([...DECISION_TYPES].sort()).toEqual(described);
    expect(Object.keys(EFFECTS).sort()).toEqual(described);
  });

  it('lets only worker turns and test runs leave the engine as jobs: nothing that writes trunk, refs, worktrees, pages or the log runs on the queue', () => {
    // Anything on the queue may run on an agent's host (docs/cluster.md): only what reads a
    // worktree and answers with a reply or a test report may go there.
    expect([...QUEUED].sort()).toEqual(['bisect.step', 'block.dispatched', 'candidate.requested', 'facts.requested', 'test.requested']);
    for (const type of ['land.intent', 'worktree.requested', 'wrap.requested', 'escalation.raised', 'lane.stacked', 'gate.passed'] as const)
      expect(QUEUED.has(type), type).toBe(false);
  });

  it("builds every effect's request from the moment of its decision, as JSON that survives a round trip unchanged — for every decision of every golden run", () => {
    const seen = new Set<string>();
    for (const run of goldenRuns()) {
      let state = initialState();
      const history: TronEvent[] = [];
      for (const e of run.events) {
        state = apply(state, e);
        history.push(e);
        const effect = EFFECTS[e.type as (typeof DECISION_TYPES)[number]];
        if (eventKind(e.type) !== 'decision' || !effect) continue;
        const at: Moment = { state, history, blocks: new Map() };
        const request = effect.request ? effect.request(e as never, at) : e;
        expect(JSON.parse(JSON.stringify(request)), `${run.name} seq ${e.seq} (${e.type})`).toEqual(request);
        // The job the engine runs is that JSON: a copy, sharing nothing with the engine's memory.
        const job = jobOf(e, at);
        expect(job.request).toEqual(request);
        expect(job.request).not.toBe(request);
        seen.add(e.type);
      }
    }
    // Every decision with an effect occurs in some golden run, so each kind was checked.
    const withEffect = DECISION_TYPES.filter((t) => EFFECTS[t] !== null);
    expect(withEffect.filter((t) => !seen.has(t))).toEqual([]);
  });

  it('sends a turn the prompt of the moment it was decided, though another block lands before it runs', () => {
    const X = sha(0xf00);
    const d = new Driver();
    d.boot([{ id: 'x' }, { id: 'a' }, { id: 'b' }], { maxParallel: 3 });
    d.approve('x', X);
    d.approve('a', sha(10));
    d.approve('b', sha(11));
    d.landStack({ x: X });
    // Stack 2 on X: a conflicts with trunk — its builder gets a merge turn naming trunk's sha — and b replays cleanly.
    const out = d.feed({
      type: 'rebase.done',
      stack: 2,
      trunk_sha: X,
      results: [
        { block: 'a', outcome: 'conflict', onto: X, patch_before: 'p', files: ['notes.txt'] },
        { block: 'b', outcome: 'fast_forward', onto: X, sha: sha(11), patch_before: 'p', patch_after: 'p' },
      ],
    });
    const merge = out.find((e) => e.type === 'block.dispatched' && e.block === 'a') as EventOf<'block.dispatched'>;
    expect(merge.kind).toBe('merge');
    const decided = jobOf({ ...merge, v: 2, seq: d.seq, ts: 0 }, { state: d.state, history: [], blocks: new Map() });
    // Before a's turn runs, b lands: trunk moves on.
    d.feed({ type: 'candidate.tested', stack: 2, sha: sha(11), blocks: ['b'], ok: true, tests: GREEN });
    d.feed({ type: 'block.landed', block: 'b', sha: sha(11), from: X, top: sha(11) });
    expect(d.state.trunkSha).toBe(sha(11));
    const later = jobOf({ ...merge, v: 2, seq: d.seq, ts: 0 }, { state: d.state, history: [], blocks: new Map() });
    const prompt = (job: { request: unknown }) => {
      const r = job.request as TurnRequest;
      return renderPrompt(r.prompt.name, r.prompt.vars, { role: 'builder', phase: merge.phase, expect: merge.expect as never });
    };
    // The job made when the turn was decided says trunk was at X; one made from the live state would not.
    expect(prompt(decided)).toContain(X);
    expect(prompt(later)).not.toContain(X);
    expect(prompt(later)).toContain(sha(11));
  });
});
