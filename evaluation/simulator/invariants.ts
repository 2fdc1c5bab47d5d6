/**
 * The named invariants, checked as a simulated run goes (see docs/evaluation.md): over
 * each decision (lands-once, lands-what-was-reviewed, spend-within-budget), over the world's git as trunk moves
 * (trunk-linear; trunk-tested-green, trunk-checks-green in PR mode, and no-landing-past-dependency in answers.ts, where
 * the landing happens), over each stack (within-batch) and each start of work (within-parallelism), and after
 * every step (no-silent-stall). The rest — replays, decides-every-input,
 * terminates, intent-before-effect, crash-converges — are checked by the run and search.
 */
import type { EventBody, EventOf, TronEvent } from '../../engine/core/events.ts';
import { TERMINAL } from '../../engine/core/state.ts';
import type { SimWorld } from './sim.ts';

/** A broken invariant: its name, and what happened. */
export class Failure extends Error {
  constructor(
    readonly invariant: string,
    message: string,
  ) {
    super(message);
  }
}

/** A trunk (local, or the remote's: `from`) moves only to a descendant of where it is. */
export function linear(sim: SimWorld, to: string, by: string, from = sim.git.trunk): void {
  if (!sim.git.isAncestor(from, to)) {
    throw new Failure('trunk-linear', `${by} moved trunk from ${from.slice(-8)} to ${to.slice(-8)}, which does not descend from it`);
  }
}

/** The phases that hold one of the max_parallel slots. */
const SLOT_PHASES: ReadonlySet<string> = new Set(['build', 'review']);

export function check(sim: SimWorld, e: TronEvent): void {
  switch (e.type) {
    case 'land.intent': {
      // PR mode: a person's word on the forge holds — a pull request they closed stays
      // unlanded, and a head they requested changes on never lands.
      const forge = sim.git.forge;
      const asked = forge?.changes.get(e.sha);
      if (asked !== undefined)
        throw new Failure(
          'changes-honoured',
          `land.intent (seq ${e.seq}) lands ${e.sha.slice(-8)}, on which a person requested changes to ${asked}`,
        );
      for (const b of e.blocks) {
        const closed = forge?.pulls.get(b.block)?.closed;
        if (closed !== undefined)
          throw new Failure(
            'closed-stays-closed',
            `land.intent (seq ${e.seq}) lands ${b.block}, whose pull request a person closed ("${closed}")`,
          );
        if (sim.git.landed.has(b.block) || sim.landings.includes(b.block)) {
          throw new Failure('lands-once', `land.intent (seq ${e.seq}) lands ${b.block} again: git already has refs/tron/landed/${b.block}`);
        }
        // What lands of a block is the change its reviewer approved: the same patch (a clean
        // replay keeps it; a replay that changed it goes back to review first).
        const landing = sim.git.commits.get(b.sha)?.patch;
        const approved = sim.approved.get(b.block);
        if (landing !== approved) {
          throw new Failure(
            'lands-what-was-reviewed',
            `land.intent (seq ${e.seq}) lands ${b.block} at ${b.sha.slice(-8)} (patch ${landing ?? '?'}), but its reviewer approved ${approved === undefined ? 'nothing' : `patch ${approved}`}`,
          );
        }
      }
      return;
    }
    case 'worktree.requested': {
      // Free slots take ready blocks: a block that held no build or review slot before this input starts (or
      // starts again, from trunk) only while the blocks in build or review, itself among them,
      // are at most max_parallel — as the log stands at this decision. (A block the lane or a
      // person sends back from merge to build resumes in its worktree at once, slot or not —
      // docs/evaluation.md — and counts against every start after it.)
      const { before, at } = sim.around(e);
      if (SLOT_PHASES.has(before.blocks.get(e.block)?.phase ?? 'pending')) return;
      const busy = at.order.filter((id) => SLOT_PHASES.has(at.blocks.get(id)!.phase));
      if (busy.length > sim.cfg.maxParallel)
        throw new Failure(
          'within-parallelism',
          `worktree.requested (seq ${e.seq}) starts ${e.block} with ${busy.length} blocks in build or review (${busy.join(', ')}), past max_parallel = ${sim.cfg.maxParallel}`,
        );
      return;
    }
    case 'block.phase':
      // The reviewer approves the attested sha: what may land of the block is that patch.
      if (e.from === 'review' && e.on === 'APPROVE') {
        const attested = sim.around(e).at.blocks.get(e.block)?.attested;
        const patch = attested === undefined ? undefined : sim.git.commits.get(attested)?.patch;
        if (patch !== undefined) sim.approved.set(e.block, patch);
      }
      return;
    case 'lane.stacked':
      // A stack holds at most [merge] batch blocks: the first `batch` of the queue, or fewer.
      // PR mode stacks one block at a time, so each pull request's checks run on the sha that lands.
      if (e.blocks.length > (sim.cfg.pr ? 1 : sim.cfg.batch))
        throw new Failure(
          'within-batch',
          `lane.stacked (seq ${e.seq}) stacks ${e.blocks.length} blocks, past ${sim.cfg.pr ? 'one a stack in PR mode' : `[merge] batch = ${sim.cfg.batch}`}`,
        );
      return;
    case 'block.dispatched': {
      const { block_usd, run_usd } = sim.cfg.budgets;
      const spent = sim.spend.blocks.get(e.block) ?? 0;
      if (block_usd !== undefined && spent > block_usd + 1e-9) {
        throw new Failure(
          'spend-within-budget',
          `${e.block} was given a new turn with $${spent.toFixed(2)} spent, past block_usd = ${block_usd}`,
        );
      }
      if (run_usd !== undefined && sim.spend.run > run_usd + 1e-9) {
        throw new Failure(
          'spend-within-budget',
          `a new turn started with $${sim.spend.run.toFixed(2)} spent by the run, past run_usd = ${run_usd}`,
        );
      }
      return;
    }
    default:
      return;
  }
}

/** Folds what the budget invariant needs from an input. */
export function account(sim: SimWorld, e: EventBody): void {
  if (e.type === 'usage.recorded') {
    sim.spend.run += e.cost_usd ?? 0;
    sim.spend.blocks.set(e.block, (sim.spend.blocks.get(e.block) ?? 0) + (e.cost_usd ?? 0));
  } else if (e.type === 'operator.answered') sim.spend.blocks.set(e.block, 0);
}

/** Every block is landed, parked or abandoned, or something in the world will move it. */
export function checkStall(sim: SimWorld): void {
  const s = sim.state;
  if (s.finished) {
    const f = sim.log.findLast((e): e is EventOf<'run.finished'> => e.type === 'run.finished')!;
    if (f.reason !== 'done') return;
    for (const id of s.order) {
      const b = s.blocks.get(id)!;
      if (TERMINAL.has(b.phase) || b.phase === 'parked' || b.phase === 'pending' || b.waiting.on === 'worker' || b.waiting.on === 'lane')
        continue;
      throw new Failure('no-silent-stall', `the run finished with ${id} in ${b.phase}, waiting on ${b.waiting.on}`);
    }
    return;
  }
  if (!s.registered) return;
  checkWaiting(sim);
  for (const id of s.order) {
    const b = s.blocks.get(id)!;
    const w = b.waiting;
    const has = (type: string) => sim.items.some((x) => x.kind === 'effect' && x.d.type === type && 'block' in x.d && x.d.block === id);
    const missing =
      (w.on === 'turn' && !sim.turnItem(w.turn.session, w.turn.turn) && !sim.items.some((x) => x.kind === 'aborted' && x.d.block === id)) ||
      (w.on === 'worktree' && !has('worktree.requested')) ||
      (w.on === 'facts' && !has('facts.requested')) ||
      (w.on === 'wrap' && !has('wrap.requested'));
    if (missing) throw new Failure('no-silent-stall', `${id} waits on ${w.on} and nothing in the world will answer it\n${describe(sim)}`);
  }
}

/**
 * `waiting-told-true`: what the state says a block waits on — what `tron status`, the
 * board and the API show — is so: in the merge lane's queue, in its stack, for a slot as a
 * pending block, for the operator as a parked one; a parked block waits on the operator,
 * and a landed or abandoned one on nothing.
 */
function checkWaiting(sim: SimWorld): void {
  const s = sim.state;
  for (const id of s.order) {
    const b = s.blocks.get(id)!;
    const on = b.waiting.on;
    const wrong =
      on === 'lane' && !s.lane.queue.includes(id)
        ? "it is not in the merge lane's queue"
        : on === 'stack' && !s.lane.stack?.asked.includes(id)
          ? 'no stack holds it'
          : on === 'slot' && b.phase !== 'pending'
            ? `it is in ${b.phase}, not pending`
            : on === 'operator' && b.phase !== 'parked'
              ? `it is in ${b.phase}, not parked`
              : b.phase === 'parked' && on !== 'operator'
                ? 'it is parked'
                : TERMINAL.has(b.phase) && on !== 'nothing'
                  ? `it is ${b.phase}`
                  : undefined;
    if (wrong) throw new Failure('waiting-told-true', `${id} is told to wait on ${on}, but ${wrong}\n${describe(sim)}`);
  }
}

export function describe(sim: SimWorld): string {
  const s = sim.state;
  const blocks = s.order.map((id) => `${id}: ${s.blocks.get(id)!.phase}/${s.blocks.get(id)!.waiting.on}`).join(', ');
  const items = sim.items.map((x) => (x.kind === 'effect' ? `${x.d.type}${x.paused ? '(paused)' : ''}` : x.kind)).join(', ');
  return `  blocks: ${blocks}\n  lane: queue [${s.lane.queue.join(', ')}], stack ${s.lane.stack ? s.lane.stack.id : 'none'}\n  pending: ${items || 'nothing'}`;
}
