/**
 * Boot recovery. Every `tron start` first reads the previous run's log (folding past a
 * torn tail, which is set aside) and the repository's git state, and decides where each
 * block resumes:
 *
 * - git is the record of what landed: `refs/tron/landed/<id>` means landed, even when the
 *   crash came between the ref transaction and its event (then the block is wrapped);
 * - abandoned and parked blocks stay so (a parked block whose page was never sent is
 *   paged now; a sent page is not sent again);
 * - verified work (an attested sha) resumes at its phase: review, merge or wrap;
 * - anything else is re-dispatched from trunk; its branch, if it holds commits not on
 *   trunk, is preserved as `orphan/<id>-<n>` when the fresh worktree is made.
 *
 * Before any of that, worker processes the previous run started and never saw end are
 * killed, matched by pid and start time. Booting twice in a row with nothing in between
 * takes no action the second time: there is nothing left to kill and nothing to preserve.
 */
import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { BlockInfo, BodyOf, EventBody, TronEvent } from '../core/events.ts';
import { EventLog, readLog } from './eventlog.ts';
import { apply, initialState, type BlockState } from '../core/state.ts';
import type { Clock } from '../core/clock.ts';
import { killGroup } from './proc.ts';
import * as git from '../git/index.ts';
import { blockChangedInRun } from './engine-files.ts';

export interface Recovery {
  previous?: string;
  /** recovery.started, worker.killed notes and block.recovered inputs, in order. */
  events: EventBody[];
  /** Inbox files the previous run already recorded as answered. */
  answered: string[];
}

/** Reads the previous run, kills its strays and says where every block resumes. */
export async function recover(opts: {
  repo: string;
  previousRunDir: string | undefined;
  blocks: readonly BlockInfo[];
  clock: Clock;
}): Promise<Recovery> {
  const { repo, previousRunDir } = opts;
  const landed = await git.landedRefs(repo);
  let events: TronEvent[] = [];
  let torn = false;
  if (previousRunDir && existsSync(join(previousRunDir, 'events.jsonl'))) {
    torn = readLog(join(previousRunDir, 'events.jsonl')).torn !== undefined;
    if (torn) EventLog.open(previousRunDir, { clock: opts.clock, command: 'tron start (recovery)' }).close();
    events = readLog(join(previousRunDir, 'events.jsonl')).events;
  }
  const run = events.find((e) => e.type === 'run.started');
  const out: EventBody[] = [{ type: 'recovery.started', previous: run && run.type === 'run.started' ? run.run : null, torn }];
  out.push(...killStrays(events, run && run.type === 'run.started' ? run.run : ''));
  for (const file of await git.clearEngineRefLocks(repo)) {
    out.push({
      type: 'lock.cleared',
      block: file
        .split('/')
        .at(-1)!
        .replace(/\.lock$/, ''),
      file,
      detail: 'a ref lock left by a git process killed with the previous run',
    });
  }
  const prev = events.reduce(apply, initialState());
  for (const info of opts.blocks) {
    const b = prev.blocks.get(info.id);
    const sha = landed.get(info.id);
    const suspect = blockChangedInRun(repo, info.id, info.digest, events);
    if (!b && !sha && !suspect) continue;
    let resumed = resumeAt(info.id, b, sha, events);
    if (suspect && UNFINISHED.has(resumed.phase)) resumed = parkSuspect(resumed, suspect);
    if (resumed.phase === 'review' || resumed.phase === 'merge') await git.resetWorktree(repo, info.id);
    out.push(resumed);
  }
  await cleanEngineCheckouts(repo);
  const answered = events.flatMap((e) => (e.type === 'operator.answered' ? [e.file] : []));
  return { ...(run && run.type === 'run.started' ? { previous: run.run } : {}), events: out, answered };
}

/**
 * A landing announced (land.intent) and never seen to end leaves git's lock files behind:
 * remove them. Runs at boot, under the engine lock, before anything reads the checkout.
 */
export async function clearInterruptedLanding(repo: string, previousRunDir: string | undefined): Promise<EventBody[]> {
  if (!previousRunDir || !existsSync(join(previousRunDir, 'events.jsonl'))) return [];
  const events = readLog(join(previousRunDir, 'events.jsonl')).events;
  const started = events.find((e) => e.type === 'run.started');
  let open: Extract<TronEvent, { type: 'land.intent' }> | undefined;
  for (const e of events) {
    if (e.type === 'land.intent') open = e;
    if ((e.type === 'block.landed' || e.type === 'land.refused') && open?.block === e.block) open = undefined;
  }
  if (!open || !started || started.type !== 'run.started') return [];
  const removed = await git.clearLandingLocks(repo, started.trunk, open.block);
  return removed.map((file) => ({
    type: 'lock.cleared',
    block: open!.block,
    file,
    detail: 'left by a landing the previous run died in the middle of',
  }));
}

/** Worker processes started and never seen to end: killed by pid and start time, never by name. */
function killStrays(events: readonly TronEvent[], run: string): EventBody[] {
  const alive = new Map<number, Extract<TronEvent, { type: 'worker.spawned' }>>();
  for (const e of events) {
    if (e.type === 'worker.spawned') alive.set(e.pid, e);
    if (e.type === 'worker.exited') alive.delete(e.pid);
  }
  const killed: EventBody[] = [];
  for (const w of alive.values()) {
    if (killGroup(w.pid, w.start_time, 'SIGKILL')) {
      killed.push({ type: 'worker.killed', block: w.block, session: w.session, pid: w.pid, start_time: w.start_time, run });
    }
  }
  return killed;
}

function resumeAt(
  id: string,
  b: BlockState | undefined,
  landedSha: string | undefined,
  events: readonly TronEvent[],
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
  };
  // A block that resumes in the phase it had keeps the time it entered it.
  const since = b ? { since: b.since } : {};
  if (landedSha) {
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

/** Review and trunk checkouts are recreated on demand; stale worktree records are pruned. */
async function cleanEngineCheckouts(repo: string): Promise<void> {
  // The engine's checkout for trunk test runs is made afresh for each run.
  const trunkCheckout = git.reviewPath(repo, '_trunk');
  if (existsSync(trunkCheckout)) await git.removeWorktree(repo, trunkCheckout);
  await git.pruneWorktrees(repo);
}

/** Copies what adapters persist per session (openai conversations, sim progress) into the new run. */
export function carrySessions(previousRunDir: string | undefined, runDir: string): void {
  if (!previousRunDir) return;
  for (const name of ['sessions', 'sim']) {
    const from = join(previousRunDir, name);
    if (existsSync(from)) cpSync(from, join(runDir, name), { recursive: true });
  }
}
