/**
 * Where each block of an earlier run resumes — the planning half of boot recovery, pure.
 * engine/runtime/recovery.ts reads the previous log and git (landed refs, trunk's
 * first-parent history, older logs, block files) and acts on the plan (moves untrusted
 * refs aside, resets worktrees); the simulator (evaluation/simulator/) feeds the same
 * function its simulated world, so a simulated restart runs the code a real start runs.
 *
 * The rules (see recovery.ts for the whole story): git is the record of what landed — a
 * `refs/tron/landed/<id>` on trunk's first-parent history whose landing a run log records
 * means landed (wrapped now if the crash came before), anything else is not believed;
 * abandoned and parked blocks stay so; verified work resumes at review, merge or wrap;
 * anything else is re-dispatched from trunk.
 */
import type { BlockInfo, BodyOf, EventOf, TronEvent } from './events.ts';
import { apply, type BlockState, initialState } from './state.ts';

/** What recovery knows of the world besides the previous log. */
export interface RecoveryWorld {
  /** refs/tron/landed/<id> → sha, as git has them. */
  landedRefs: ReadonlyMap<string, string>;
  /** trunk's first-parent history: where every landing puts a landed sha. */
  onTrunk: { has(sha: string): boolean };
  /** The branch blocks land on (named in the reason a ref is not believed). */
  trunk?: string;
  /** Whether an older run's log records block `id` landing at `sha`: asked only when the previous log does not. */
  olderRecords?: (id: string, sha: string) => boolean;
  /** Whether this start itself recorded block `id` landing at `sha` before recovery (the merge queue's landing, engine/runtime/queue-recovery.ts). */
  vouched?: (id: string, sha: string) => boolean;
  /**
   * Where a landing no log of this clone records came from, when it came with the repository
   * (engine/runtime/landed-travel.ts: the remote's landed refs, or an upstream's on a clone's
   * first start): such a landing is believed, and a block this clone never ran resumes landed.
   */
  travelled?: (id: string, sha: string) => string | undefined;
  /** Why the block's file is suspect (changed while a run without --watch ran), if it is. */
  suspect?: (id: string, digest: string) => string | undefined;
}

export interface RecoveryPlan {
  /** Landed refs not believed, in register order: each is moved aside and reported (landed.untrusted). */
  untrusted: { block: string; sha: string; reason: string }[];
  /** Where each block resumes, in register order. */
  recovered: BodyOf<'block.recovered'>[];
  /** Inbox files the previous run already recorded as answered. */
  answered: string[];
}

/** Plans where every block of `blocks` resumes, from the previous run's events and the world. */
export function planRecovery(events: readonly TronEvent[], blocks: readonly BlockInfo[], world: RecoveryWorld): RecoveryPlan {
  const prev = events.reduce(apply, initialState());
  const untrusted: RecoveryPlan['untrusted'] = [];
  const landed = new Map<string, string>();
  const trunk = world.trunk ?? events.find((e): e is EventOf<'run.started'> => e.type === 'run.started')?.trunk;
  for (const { id } of blocks) {
    const sha = world.landedRefs.get(id);
    if (sha === undefined) continue;
    let reason: string | undefined;
    if (!world.onTrunk.has(sha)) reason = `${sha.slice(0, 12)} is not on the first-parent history of ${trunk ?? 'trunk'}`;
    else if (
      !recordsLanding(events, id, sha) &&
      prev.blocks.get(id)?.landedSha !== sha &&
      !world.vouched?.(id, sha) &&
      !world.olderRecords?.(id, sha) &&
      world.travelled?.(id, sha) === undefined
    ) {
      reason = 'no run log records that tron landed it';
    }
    if (reason === undefined) landed.set(id, sha);
    else untrusted.push({ block: id, sha, reason });
  }
  const recovered: BodyOf<'block.recovered'>[] = [];
  for (const info of blocks) {
    const b = prev.blocks.get(info.id);
    const sha = landed.get(info.id);
    const suspect = world.suspect?.(info.id, info.digest);
    if (!b && !sha && !suspect) continue;
    const came = sha === undefined || b ? undefined : world.travelled?.(info.id, sha);
    let resumed = resumeAt(info.id, b, sha, events, prev.trunkHalt?.block, came);
    if (suspect && UNFINISHED.has(resumed.phase)) resumed = parkSuspect(resumed, suspect);
    recovered.push(resumed);
  }
  const answered = events.flatMap((e) => (e.type === 'operator.answered' ? [e.file] : []));
  return { untrusted, recovered, answered };
}

/** The landings one line records, as [block, sha]: the landing, its announced intent, or a recovered landing. */
function landingsOf(e: TronEvent): ReadonlyArray<readonly [string, string]> {
  if (e.type === 'block.landed') return [[e.block, e.sha]];
  if (e.type === 'land.intent') return e.blocks.map((b) => [b.block, b.sha] as const);
  if (e.type === 'block.recovered' && e.sha && (e.phase === 'landed' || e.phase === 'wrap')) return [[e.block, e.sha]];
  return [];
}

/** Whether a log records block `id` landing at `sha`: the landing, its announced intent, or a recovered landing. */
export function recordsLanding(events: readonly TronEvent[], id: string, sha: string): boolean {
  return events.some((e) => landingsOf(e).some(([b, s]) => b === id && s === sha));
}

/** Every landing a log records, block → the shas it is recorded landing at (as recordsLanding reads them). */
export function recordedLandings(events: readonly TronEvent[]): Map<string, Set<string>> {
  const landed = new Map<string, Set<string>>();
  for (const e of events) for (const [b, s] of landingsOf(e)) landed.set(b, (landed.get(b) ?? new Set()).add(s));
  return landed;
}

function resumeAt(
  id: string,
  b: BlockState | undefined,
  landedSha: string | undefined,
  events: readonly TronEvent[],
  halting: string | undefined,
  came?: string,
): BodyOf<'block.recovered'> {
  const carried = {
    type: 'block.recovered' as const,
    block: id,
    attempt: b?.attempt ?? 0,
    turns: b?.turns ?? {},
    architect_calls: b?.architectCalls ?? 0,
    rounds: b?.rounds ?? { build: 0, review: 0, merge: 0 },
    page: false,
    ...(b?.base ? { base: b.base } : {}),
    ...(b?.patchId ? { patch_id: b.patchId } : {}),
    ...(b?.summary ? { summary: b.summary } : {}),
    ...(b?.answeredAt !== undefined ? { answered_at: b.answeredAt } : {}),
  };
  // A block that resumes in the phase it had keeps the time it entered it.
  const since = b ? { since: b.since } : {};
  if (landedSha) {
    // Landed before this clone's runs: there is nothing of it here to wrap.
    if (came !== undefined)
      return {
        ...carried,
        phase: 'landed',
        sha: landedSha,
        detail: `landed before this clone's runs: refs/tron/landed/${id} from ${came}`,
      };
    if (b?.phase === 'landed') return { ...carried, ...since, phase: 'landed', sha: landedSha, detail: `refs/tron/landed/${id} exists` };
    return {
      ...carried,
      phase: 'wrap',
      sha: landedSha,
      detail: `refs/tron/landed/${id} exists but the run ended before the block was wrapped: the landing is recognised, not repeated`,
    };
  }
  if (!b || b.phase === 'pending') return { ...carried, phase: 'pending', detail: 'not started yet' };
  if (b.phase === 'landed')
    return { ...carried, phase: 'pending', detail: `the log says landed but refs/tron/landed/${id} is gone: built again` };
  if (b.phase === 'abandoned')
    return { ...carried, ...since, phase: 'abandoned', reason: b.reason ?? '', detail: 'abandoned in an earlier run' };
  if (b.phase === 'parked') {
    return {
      ...carried,
      ...since,
      phase: 'parked',
      reason: b.reason ?? '',
      ...(b.trouble ? { trouble: b.trouble.trouble } : {}),
      // A trunk touch halts the lane again only if its halt was still in force.
      ...(b.trouble?.trouble === 'trunk_touched' ? { halts: halting === id } : {}),
      page: !pageSent(events, id),
      detail: 'parked in an earlier run, waiting for the operator',
    };
  }
  if (b.attested && (b.phase === 'review' || b.phase === 'merge')) {
    return {
      ...carried,
      ...since,
      phase: b.phase,
      sha: b.attested,
      detail: `verified work (attested ${b.attested.slice(0, 12)}) resumes at ${b.phase}`,
    };
  }
  if (b.phase === 'wrap' && b.landedSha)
    return { ...carried, ...since, phase: 'wrap', sha: b.landedSha, detail: 'landed; wrapping resumes' };
  return {
    ...carried,
    phase: 'pending',
    detail: `unverified work in ${b.phase}: re-dispatched from trunk, its branch preserved if it holds commits`,
  };
}

/** Phases a block still has work in: a block file changed under them waits for the operator. */
const UNFINISHED = new Set(['pending', 'review', 'merge', 'parked']);

/** A block whose file changed while the previous run ran without --watch: parked, and paged, until the operator answers. */
function parkSuspect(resumed: BodyOf<'block.recovered'>, reason: string): BodyOf<'block.recovered'> {
  const { sha: _sha, ...rest } = resumed;
  return {
    ...rest,
    phase: 'parked',
    reason,
    trouble: 'engine_files',
    page: true,
    detail: 'its block file changed while the previous run ran without --watch: parked for the operator',
  };
}

/** Whether the block's last escalation to the operator was followed by a sent page. */
function pageSent(events: readonly TronEvent[], id: string): boolean {
  let raised = false;
  for (const e of events) {
    if (e.type === 'escalation.raised' && e.block === id && e.handler === 'operator') raised = true;
    if (e.type === 'page.sent' && e.block === id) raised = false;
  }
  return !raised;
}
