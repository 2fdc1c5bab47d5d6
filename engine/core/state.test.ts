import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { goldenRunDirs, RUNS_DIR } from '../../evaluation/golden.ts';
import { approaching } from './block-index.ts';
import { readLog } from '../log/eventlog.ts';
import { parseSpine } from '../spine/parse.ts';
import { decide } from './decide/decide.ts';
import { dependentsOf } from './decide/escalate.ts';
import { settled, stuck } from './decide/schedule.ts';
import { eventKind, type TronEvent } from './events.ts';
import { ACTIVE_PHASES, apply, type BlockState, type EngineState, inFlight, initialState, TERMINAL, TrunkHistory } from './state.ts';

const runs = goldenRunDirs().map((dir) => ({ name: dir.slice(RUNS_DIR.length), dir, events: readLog(join(dir, 'events.jsonl')).events }));

/** Freezes `x` and everything it reaches; what is frozen already (shared with an earlier state) is not walked again. */
function deepFreeze(x: unknown): void {
  if (typeof x !== 'object' || x === null || Object.isFrozen(x)) return;
  Object.freeze(x);
  for (const v of Object.values(x)) deepFreeze(v);
}

/** The index as the scans it replaces computed it, from every block in register order. */
function scanned(s: EngineState) {
  const all = s.order.map((id) => s.blocks.get(id)!);
  const phase = (id: string) => s.blocks.get(id)?.phase;
  const open = (b: BlockState) => !TERMINAL.has(b.phase) && b.phase !== 'parked' && b.phase !== 'pending';
  return {
    active: all.filter((b) => ACTIVE_PHASES.has(b.phase)).length,
    inFlight: all.filter(inFlight).length,
    busy: all.filter((b) => open(b) && b.waiting.on !== 'lane' && b.waiting.on !== 'worker').length,
    queued: all.filter((b) => open(b) && b.waiting.on === 'lane').length,
    approaching: all.filter(approaching).length,
    onTheirWay: all.filter(approaching).map((b) => b.id),
    ready: all
      .filter((b) => b.phase === 'pending' && b.info.depends_on.every((d) => phase(d) === 'landed'))
      .sort((a, b) => a.info.priority - b.info.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((b) => b.id),
    orphaned: all.filter((b) => b.phase === 'pending' && b.info.depends_on.some((d) => phase(d) === 'abandoned')).map((b) => b.id),
  };
}

function indexed(s: EngineState) {
  const { active, inFlight, busy, queued, approaching } = s.index;
  return {
    active,
    inFlight,
    busy,
    queued,
    approaching,
    onTheirWay: [...s.index.onTheirWay.values()],
    ready: [...s.index.ready.values()],
    orphaned: [...s.index.orphaned.values()],
  };
}

/** `settled` as it was before the index: the walk over every block, with no shortcut. */
function settledByWalk(s: EngineState): boolean {
  if (s.pagesPending.length > 0 || s.lane.verifying > 0 || s.lane.stack !== undefined) return false;
  return s.order.every((id) => {
    const b = s.blocks.get(id)!;
    if (TERMINAL.has(b.phase) || b.phase === 'parked') return true;
    if (b.waiting.on === 'lane' && s.trunkHalt !== undefined) return true;
    if (b.waiting.on === 'worker') return true;
    if (b.phase === 'pending') return s.workers.builder?.held !== undefined || scanned(s).active >= s.maxParallel || stuck(s, b, new Set());
    return false;
  });
}

/** `dependentsOf` as it was: grow the set over the register until it stops growing. */
function dependentsByFixpoint(s: EngineState, id: string): string[] {
  const found = new Set<string>();
  for (let grew = true; grew; ) {
    grew = false;
    for (const other of s.order) {
      const deps = s.blocks.get(other)!.info.depends_on;
      if (!found.has(other) && (deps.includes(id) || deps.some((d) => found.has(d)))) {
        found.add(other);
        grew = true;
      }
    }
  }
  return s.order.filter((o) => found.has(o));
}

function expectIndexAgrees(s: EngineState): void {
  expect(indexed(s)).toEqual(scanned(s));
  expect([...s.blocks.keys()].sort()).toEqual([...s.order].sort());
  expect(settled(s)).toBe(settledByWalk(s));
  for (const id of s.order) expect(dependentsOf(s, id)).toEqual(dependentsByFixpoint(s, id));
}

describe('the fold', () => {
  it('has recorded runs to check itself against', () => {
    expect(runs.length).toBeGreaterThan(10);
  });

  for (const run of runs) {
    it(`leaves every earlier state as it was, folding and deciding ${run.name}`, () => {
      const { spine } = parseSpine(readFileSync(join(run.dir, 'workflow.toml'), 'utf8'), 'workflow.toml');
      const ctx = { spine: spine!, testCommand: 'true' };
      let s = initialState();
      for (const e of run.events) {
        // Any write to a frozen state throws (ES modules are strict), in the fold or in decide.
        deepFreeze(s);
        if (eventKind(e.type) === 'input' && !s.finished) decide(s, e, ctx);
        s = apply(s, e);
      }
      expect(s.finished).toBe(run.events.some((e) => e.type === 'run.finished'));
    });
  }

  it('keeps its index equal to a scan of every block, whatever events come in whatever order', () => {
    const events = runs.flatMap((r) => r.events);
    fc.assert(
      fc.property(fc.shuffledSubarray(events, { minLength: 1, maxLength: 80 }), (picked: TronEvent[]) => {
        // Registering every block first makes most events land on a known block.
        let s = events.filter((e) => e.type === 'register.loaded').reduce(apply, initialState());
        for (const e of picked) {
          s = apply(s, e);
          expectIndexAgrees(s);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('keeps its index equal to a scan at every event of every recorded run', () => {
    for (const run of runs) {
      let s = initialState();
      for (const e of run.events) {
        s = apply(s, e);
        expectIndexAgrees(s);
      }
    }
  });
});

describe('the trunk history', () => {
  it('answers includes and since as the list of shas it stands for', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { maxLength: 30 }), (pushed: string[]) => {
        const history = pushed.reduce((h, sha) => h.push(sha), TrunkHistory.empty());
        for (const x of ['a', 'b', 'c', 'd', 'e', undefined]) {
          const from = x === undefined ? -1 : pushed.lastIndexOf(x);
          const allowed = from >= 0 ? pushed.slice(from) : [];
          for (const y of ['a', 'b', 'c', 'd', 'e']) {
            expect(history.since(x).includes(y)).toBe(allowed.includes(y));
            expect(history.includes(y)).toBe(pushed.includes(y));
          }
        }
      }),
    );
  });
});
