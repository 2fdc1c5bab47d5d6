/**
 * Scheduling after every input: free slots take ready blocks, the merge lane takes its
 * next stack, a settled run ends. It reads the fold's index (`EngineState.index`), never a scan
 * of the register, so its cost does not grow with the run.
 */
import { type BlockState, type EngineState, stackRunning } from '../state.ts';
import { finishRun, releaseHeld, TERMINAL, type Step } from './step.ts';
import { settleStack, stackNext } from '../lane/lane.ts';

/** After every input: fill free slots, give a free merge lane its next stack, and end the run when settled. */
export function schedule(step: Step): void {
  const s = step.s;
  if (!s.registered) return;
  // Blocks whose dependency was abandoned are parked with that reason.
  for (const id of s.index.orphaned.values()) {
    const b = s.blocks.get(id)!;
    const gone = b.info.depends_on.find((d) => s.blocks.get(d)?.phase === 'abandoned');
    step.emit({ type: 'block.parked', block: id, reason: `it depends on ${gone}, which was abandoned` });
  }
  // Turns held for a worker the operator has since answered about go out first.
  releaseHeld(step);
  // Free slots take ready blocks (dependencies landed), by priority then id — none while
  // the builder's worker is unavailable: it would only fail the same way.
  while (step.s.index.active < step.s.maxParallel && !step.s.workers.builder?.held) {
    const next = step.s.index.ready.first();
    if (!next) break;
    const b = step.block(next[1]);
    step.emit({ type: 'worktree.requested', block: b.id, attempt: b.attempt + 1, base: step.s.trunkSha! });
  }
  settleStack(step);
  stackNext(step);
  if (!step.s.watch && settled(step.s)) {
    const landedAll = step.s.order.every((id) => step.s.blocks.get(id)!.phase === 'landed');
    // A red check of trunk ([merge] verify_trunk) is never a clean run, whatever landed.
    finishRun(step, 'done', landedAll && !step.s.lane.trunkRed ? 0 : 3);
  }
}

/** After a stop signal: once every effect in flight has reported back, the run finishes. */
export function stopWhenQuiet(step: Step): void {
  const s = step.s;
  if (s.index.inFlight > 0 || (s.lane.stack && stackRunning(s.lane.stack)) || s.lane.verifying > 0) return;
  if (s.stopping === 'budget') {
    const spent = `$${s.spend.usd.toFixed(4)} (${s.spend.tokens.toLocaleString('en-US')} tokens)`;
    finishRun(step, 'budget', 3, `the run budget run_usd = ${s.budgets.runUsd} is spent: ${spent}`);
    return;
  }
  finishRun(step, 'signal', s.stopping === 'SIGINT' ? 130 : 143, `stopped by ${s.stopping}`);
}

/** Nothing is running and nothing can start: every block landed, abandoned, parked or stuck behind one. */
export function settled(s: EngineState): boolean {
  if (s.pagesPending.length > 0 || s.lane.verifying > 0 || s.lane.stack !== undefined) return false;
  // The index rules out a run with work going on; the walk below then runs only when the
  // run is about to end (or waits on the operator), not after every input.
  if (s.index.busy > 0 || (s.index.queued > 0 && s.trunkHalt === undefined)) return false;
  if (s.order.length === 0) return true;
  return s.order.every((id) => {
    const b = s.blocks.get(id)!;
    if (TERMINAL.has(b.phase) || b.phase === 'parked') return true;
    if (b.waiting.on === 'lane' && s.trunkHalt !== undefined) return true;
    // A turn held for an unavailable worker waits for the operator, as a parked block does.
    if (b.waiting.on === 'worker') return true;
    // A pending block waits for a slot it cannot get: nothing is busy here, so the blocks
    // in the slots hold turns for an unavailable worker, which only the operator releases.
    if (b.phase === 'pending') return s.workers.builder?.held !== undefined || s.index.active >= s.maxParallel || stuck(s, b, new Set());
    return false;
  });
}

export function stuck(s: EngineState, b: BlockState, seen: Set<string>): boolean {
  if (seen.has(b.id)) return true;
  seen.add(b.id);
  return b.info.depends_on.some((d) => {
    const dep = s.blocks.get(d);
    if (!dep) return true;
    if (dep.phase === 'abandoned' || dep.phase === 'parked') return true;
    // A dependency that itself waits on the operator (queued in a lane trunk halted, or
    // holding a turn for an unavailable worker) lands no sooner than that answer.
    if ((dep.waiting.on === 'lane' && s.trunkHalt !== undefined) || dep.waiting.on === 'worker') return true;
    return dep.phase === 'pending' && stuck(s, dep, seen);
  });
}
