/**
 * Liveness — talk before you page (see engine/core/decide/liveness.ts for what is
 * decided). An overrun turn is probed: a conversational worker is asked, in-session,
 * whether it is still working, and signs of life are taken over the probe wait —
 * process CPU and output, worktree changes, model or sim progress. An extension re-arms
 * the turn's timer.
 */
import type { EventBody, EventOf } from '../../core/events.ts';
import { formatDuration } from '../../core/duration.ts';
import type { WorkerRole } from '../../core/roles.ts';
import * as git from '../../git/index.ts';
import { sleep } from '../../os/clock.ts';
import { type LifeSnapshot, signsOfLife, takeSnapshot, worktreePrint } from '../../workers/liveness-signs.ts';
import { type EffectContext, effect, errorLine, type ProbeRequest } from './context.ts';
import { renderPrompt } from './prompts.ts';

export type { ProbeRequest } from './context.ts';

export const probe = effect({
  request: (e: EventOf<'worker.overran'>, at): ProbeRequest => {
    const b = at.state.blocks.get(e.block)!;
    return {
      decision: e,
      role: b.waiting.on === 'turn' ? (b.waiting.turn.role as WorkerRole) : 'builder',
      phase: b.phase,
      probeWaitMs: at.state.liveness.probeWaitMs,
    };
  },
  // A turn on a `tron agent` is probed there, the same way (engine/queue/agent-turns.ts).
  run: (c, r) => (c.agentTurns?.owns(r.decision.session, r.decision.turn) ? c.agentTurns.probe(r) : probeTurn(c, r)),
  // The worker's process and folder are its own: signs that cannot be read are no signs of life.
  onFailure: (r, error): EventBody => {
    const e = r.decision;
    const sign = `signs of life could not be read: ${errorLine(error)}`;
    return { type: 'worker.probed', block: e.block, session: e.session, turn: e.turn, alive: false, signs: [sign] };
  },
});

/** How long an exited worker's turn may take to end: the adapter's kill grace for what it left, and its reading. */
const SETTLE_MS = 3000;

/** Signs of life over the probe wait: process CPU and output, worktree changes, model or sim progress. */
async function probeTurn(c: EffectContext, r: ProbeRequest): Promise<EventBody> {
  const e = r.decision;
  const role = r.role;
  const worker = c.workers[role];
  const cwd = role === 'builder' ? git.worktreePath(c.repo, e.block) : role === 'reviewer' ? git.reviewPath(c.repo, e.block) : c.repo;
  const take = async (): Promise<LifeSnapshot> => {
    const proc = worker?.running?.(e.session);
    const progress = c.turns.ticks(e.session);
    if (proc) return takeSnapshot({ pid: proc.pid, startTime: proc.startTime, outputBytes: proc.outputBytes + progress, cwd });
    return { exists: c.turns.isRunning(e.session, e.turn), cpuTicks: 0, outputBytes: progress, worktree: await worktreePrint(cwd) };
  };
  if (worker?.probe && role !== 'architect') {
    // Talk before you page: a conversational worker is asked, in-session, between its steps.
    const elapsed = formatDuration(Math.round(e.elapsed_ms / 1000) * 1000);
    worker.probe(e.session, renderPrompt('probe', { block: e.block, elapsed }, { role, phase: r.phase, expect: ['WORKING'] }));
  }
  const before = await take();
  await sleep(c.clock, r.probeWaitMs);
  const after = await take();
  const { alive, signs } = signsOfLife(before, after);
  // A worker that exited during the wait may have replied: its turn ends once the adapter has
  // stopped what it left and read its output. Wait for that (bounded), and let the turn's reply
  // reach the queue first — then this probe finds the turn answered, instead of re-issuing it
  // and losing the reply.
  if (!after.exists && (await c.turns.ended(e.session, e.turn, r.probeWaitMs + SETTLE_MS))) {
    await new Promise((done) => setImmediate(done));
  }
  return { type: 'worker.probed', block: e.block, session: e.session, turn: e.turn, alive, signs };
}

/** A turn that showed signs of life gets more time: its overrun timer is armed again. */
export const extend = effect({
  run: (c, e: EventOf<'worker.extended'>) => void c.turns.arm(e.session, e.turn, e.extension_ms),
});
