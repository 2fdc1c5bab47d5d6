/** Scheduling after every input: free slots take ready blocks, the MERGE lock is handed out, a settled run ends. */
import type { BlockState, EngineState } from '../state.ts';
import { ACTIVE_PHASES, releaseHeld, TERMINAL, type Step } from './step.ts';

/** After every input: fill free slots, hand out the MERGE lock, and end the run when settled. */
export function schedule(step: Step): void {
  const s = step.s;
  if (!s.registered) return;
  // Blocks whose dependency was abandoned are parked with that reason.
  for (const id of s.order) {
    const b = s.blocks[id]!;
    if (b.phase !== 'pending') continue;
    const gone = b.info.depends_on.find((d) => s.blocks[d]?.phase === 'abandoned');
    if (gone) step.emit({ type: 'block.parked', block: id, reason: `it depends on ${gone}, which was abandoned` });
  }
  // Turns held for a worker the operator has since answered about go out first.
  releaseHeld(step);
  // While the builder's worker is unavailable, no new block starts: it would only fail the same way.
  const ready = step.s.workers.builder?.held
    ? []
    : step.s.order
        .map((id) => step.s.blocks[id]!)
        .filter((b) => b.phase === 'pending' && b.info.depends_on.every((d) => step.s.blocks[d]?.phase === 'landed'))
        .sort((a, b) => a.info.priority - b.info.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const b of ready) {
    const active = step.s.order.filter((id) => ACTIVE_PHASES.has(step.s.blocks[id]!.phase)).length;
    if (active >= step.s.maxParallel) break;
    step.emit({ type: 'worktree.requested', block: b.id, attempt: b.attempt + 1 });
  }
  if (step.s.mergeLock === undefined && step.s.trunkHalt === undefined && step.s.mergeQueue.length > 0) {
    const next = step.block(step.s.mergeQueue[0]!);
    step.emit({ type: 'merge.locked', block: next.id, sha: next.attested! });
  }
  if (!step.s.watch && settled(step.s)) {
    const ids = (phase: string) => step.s.order.filter((id) => step.s.blocks[id]!.phase === phase);
    const landed = ids('landed');
    step.emit({
      type: 'run.finished',
      reason: 'done',
      exit: landed.length === step.s.order.length ? 0 : 3,
      landed,
      parked: step.s.order.filter((id) => !['landed', 'abandoned'].includes(step.s.blocks[id]!.phase)),
      abandoned: ids('abandoned'),
    });
  }
}

/** Waiting on something the engine started (a turn, git, tests) rather than on a person or a slot. */
export function inFlight(b: BlockState): boolean {
  return !['nothing', 'operator', 'slot', 'lock', 'worker'].includes(b.waiting.on);
}

/** After a stop signal: once every effect in flight has reported back, the run finishes. */
export function stopWhenQuiet(step: Step): void {
  const s = step.s;
  if (s.order.some((id) => inFlight(s.blocks[id]!))) return;
  const ids = (phase: string) => s.order.filter((id) => s.blocks[id]!.phase === phase);
  step.emit({
    type: 'run.finished',
    reason: 'signal',
    exit: s.stopping === 'SIGINT' ? 130 : 143,
    landed: ids('landed'),
    parked: s.order.filter((id) => !['landed', 'abandoned'].includes(s.blocks[id]!.phase)),
    abandoned: ids('abandoned'),
    detail: `stopped by ${s.stopping}`,
  });
}

/** Nothing is running and nothing can start: every block landed, abandoned, parked or stuck behind one. */
export function settled(s: EngineState): boolean {
  if (s.pagesPending.length > 0) return false;
  if (s.order.length === 0) return true;
  return s.order.every((id) => {
    const b = s.blocks[id]!;
    if (TERMINAL.has(b.phase) || b.phase === 'parked') return true;
    if (b.waiting.on === 'lock' && s.trunkHalt !== undefined) return true;
    // A turn held for an unavailable worker waits for the operator, as a parked block does.
    if (b.waiting.on === 'worker') return true;
    if (b.phase === 'pending') return s.workers.builder?.held !== undefined || stuck(s, b, new Set());
    return false;
  });
}

export function stuck(s: EngineState, b: BlockState, seen: Set<string>): boolean {
  if (seen.has(b.id)) return true;
  seen.add(b.id);
  return b.info.depends_on.some((d) => {
    const dep = s.blocks[d];
    if (!dep) return true;
    if (dep.phase === 'abandoned' || dep.phase === 'parked') return true;
    return dep.phase === 'pending' && stuck(s, dep, seen);
  });
}
