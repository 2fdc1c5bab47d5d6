/**
 * The lane's part of the fold (engine/core/state.ts spreads it into its table): how each
 * event of the merge lane moves the queue, the stack and its step, and the blocks it holds.
 * As every reducer, each assigns the fresh copy's fields and changes nothing they point to.
 */
import type { EventType } from '../events.ts';
import type { EngineState } from '../engine-state.ts';
import { followTrunk, NOTHING, nothing, patch, type Reducer } from '../reduce.ts';
import type { ForgeWait, Stack, StackStep } from './stack.ts';

/** The stack `id`, if it is the one in flight, now at `step`. */
function stackAt(s: EngineState, id: number, step: (now: Stack) => StackStep | undefined): void {
  const stack = s.lane.stack;
  if (stack?.id !== id) return;
  const next = step(stack);
  if (next) s.lane = { ...s.lane, stack: { ...stack, step: next } };
}

/** The effect of stack `id` at step `at` (the forge's, or the landing's) out (`running`) or back; at any other step, nothing. */
function running(s: EngineState, id: number, at: 'forge' | 'landing', on: boolean): void {
  stackAt(s, id, (now) => (now.step.at === at ? { ...now.step, running: on } : undefined));
}

/** The reducers of the lane's events. */
export const LANE_REDUCERS = {
  'merge.queued': (s, e) => {
    const b = s.blocks.get(e.block);
    if (!b) return;
    // Approved at the sha its stack holds: it joins the stack, which may now land.
    const stack = s.lane.stack;
    if (stack?.awaiting?.some((a) => a.block === e.block && a.sha === b.attested)) {
      s.lane = { ...s.lane, stack: { ...stack, awaiting: stack.awaiting.filter((a) => a.block !== e.block) } };
      patch(s, e.block, () => ({ waiting: { on: 'stack' } }));
      return;
    }
    patch(s, e.block, () => ({ waiting: { on: 'lane' } }));
    if (!s.lane.queue.includes(e.block)) s.lane = { ...s.lane, queue: [...s.lane.queue, e.block] };
  },
  'lane.stacked': (s, e) => {
    const ids = e.blocks.map((b) => b.block);
    const awaiting = e.awaiting && e.blocks.filter((b) => e.awaiting!.includes(b.block)).map((b) => ({ block: b.block, sha: b.sha }));
    s.lane = {
      ...s.lane,
      stacks: e.stack,
      queue: s.lane.queue.filter((id) => !ids.includes(id)),
      stack: {
        id: e.stack,
        trunk: e.trunk_sha,
        asked: ids,
        ...(awaiting && { awaiting }),
        entries: [],
        green: 0,
        step: { at: 'rebasing' },
      },
    };
    // A block awaiting its verdict goes on with its turn; it waits on the stack once approved.
    for (const id of ids) if (!e.awaiting?.includes(id)) patch(s, id, () => ({ waiting: { on: 'stack' } }));
  },
  'rebase.done': (s, e) => {
    const stack = s.lane.stack;
    if (stack?.id !== e.stack || stack.step.at !== 'rebasing') return;
    const entries = e.results.flatMap((r) =>
      r.sha && (r.outcome === 'fast_forward' || r.outcome === 'clean') ? [{ block: r.block, sha: r.sha }] : [],
    );
    s.lane = { ...s.lane, stack: { ...stack, entries, step: { at: 'judging' } } };
    for (const r of e.results) {
      patch(s, r.block, () => ({
        rebased: {
          ...(r.sha ? { sha: r.sha } : {}),
          ...(r.patch_after ? { patch: r.patch_after } : {}),
          ...(r.files ? { files: r.files } : {}),
        },
      }));
    }
  },
  'candidate.requested': (s, e) => stackAt(s, e.stack, () => ({ at: 'testing', sha: e.sha })),
  'bisect.step': (s, e) => stackAt(s, e.stack, () => ({ at: 'testing', sha: e.sha })),
  'candidate.tested': (s, e) => {
    const stack = s.lane.stack;
    // Only the run the stack awaits counts.
    if (stack?.id !== e.stack || stack.step.at !== 'testing' || stack.step.sha !== e.sha) return;
    const n = e.blocks.length;
    const red = !e.ok && (stack.red === undefined || n < stack.red.n) ? { n, run: e } : stack.red;
    s.lane = {
      ...s.lane,
      stack: {
        ...stack,
        step: { at: 'judging' },
        green: e.ok ? Math.max(stack.green, n) : stack.green,
        ...(red ? { red } : {}),
      },
    };
  },
  'land.intent': (s, e) =>
    stackAt(s, e.stack, (now) => ({
      at: 'landing',
      blocks: e.blocks.map((b) => b.block),
      landed: now.step.at === 'landing' ? now.step.landed : [],
      tested: e.tested,
      ...(e.queued && { queuedTop: e.sha }),
      running: true,
    })),
  'block.landed': (s, e) => {
    if (s.trunkSha !== e.top) {
      s.trunkSha = e.top;
      s.trunkHistory = s.trunkHistory.push(e.top);
    }
    patch(s, e.block, () => ({ landedSha: e.sha, waiting: NOTHING }));
    const stack = s.lane.stack;
    const step = stack?.step;
    if (!stack || step?.at !== 'landing' || !step.blocks.includes(e.block) || step.landed.includes(e.block)) return;
    const landed = [...step.landed, e.block];
    s.lane = { ...s.lane, stack: { ...stack, step: { ...step, landed, running: landed.length < step.blocks.length } } };
  },
  'land.refused': (s, e) => running(s, e.stack, 'landing', false),
  'remote.fetched': (s, e) => {
    followTrunk(s, e.sha);
    const stack = s.lane.stack;
    if (stack?.id === e.stack) s.lane = { ...s.lane, stack: { ...stack, trunk: e.sha } };
  },
  'remote.pushed': nothing,
  'remote.moved': (s, e) => {
    followTrunk(s, e.sha);
    running(s, e.stack, 'landing', false);
  },
  'remote.failed': (s, e) => {
    if (e.op === 'push') running(s, e.stack, 'landing', false);
  },
  'remote.retry': (s, e) => running(s, e.stack, 'landing', true),
  'remote.waited': (s, e) => running(s, e.stack, 'landing', false),
  'remote.recovered': nothing,
  'remote.followed': nothing,
  'work.restored': nothing,
  'pr.requested': (s, e) =>
    stackAt(s, e.stack, (now) => {
      const kept = now.step.at === 'forge' && now.step.pr.sha === e.sha ? now.step.pr : undefined;
      const pr: ForgeWait = {
        sha: e.sha,
        blocks: e.blocks,
        tested: e.tested,
        failures: kept?.failures ?? 0,
        missing: kept?.missing ?? 0,
        ...((e.queue !== undefined || kept?.queued) && { queued: true }),
      };
      return { at: 'forge', pr, running: true };
    }),
  'pr.observed': (s, e) =>
    stackAt(s, e.stack, ({ step }) => {
      if (step.at !== 'forge') return undefined;
      const missing = e.checks.some((c) => c.state === 'missing') ? step.pr.missing + 1 : 0;
      return { ...step, running: false, pr: { ...step.pr, failures: 0, missing } };
    }),
  'pr.failed': (s, e) =>
    stackAt(s, e.stack, ({ step }) => {
      if (step.at !== 'forge') return undefined;
      const failures = e.kind === 'transient' ? step.pr.failures + 1 : step.pr.failures;
      return { ...step, running: false, pr: { ...step.pr, failures } };
    }),
  'pr.wait': (s, e) => running(s, e.stack, 'forge', true),
  'pr.waited': (s, e) => running(s, e.stack, 'forge', false),
  'remote.branch.pushed': nothing,
  'lane.closed': (s, e) => {
    if (s.lane.stack?.id !== e.stack) return;
    s.lane = { ...s.lane, stack: undefined, queue: [...e.returned, ...s.lane.queue.filter((id) => !e.returned.includes(id))] };
    for (const id of e.returned) patch(s, id, () => ({ waiting: { on: 'lane' } }));
  },
  'test.requested': (s) => {
    s.lane = { ...s.lane, verifying: s.lane.verifying + 1 };
  },
  'trunk.tested': (s, e) => {
    s.lane = { ...s.lane, verifying: Math.max(0, s.lane.verifying - 1), trunkRed: s.lane.trunkRed || !e.ok };
  },
} satisfies Partial<{ [T in EventType]: Reducer<T> }>;
