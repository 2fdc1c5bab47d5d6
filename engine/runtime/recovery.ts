/**
 * Boot recovery. Every `tron start` first reads the previous run's log (folding past a
 * torn tail, which is set aside) and the repository's git state, and decides where each
 * block resumes:
 *
 * - git is the record of what landed: `refs/tron/landed/<id>` means landed, even when the
 *   crash came between the ref transaction and its event (then the block is wrapped) —
 *   provided its sha is on trunk's first-parent history and a run's log records the
 *   landing (or its intent): a ref anyone else made is moved aside, reported, not believed;
 * - abandoned and parked blocks stay so (a parked block whose page was never sent is
 *   paged now; a sent page is not sent again);
 * - verified work (an attested sha) resumes at its phase: review, merge or wrap;
 * - anything else is re-dispatched from trunk; its branch, if it holds commits not on
 *   trunk, is preserved as `orphan/<id>-<n>` when the fresh worktree is made.
 *
 * Before any of that, worker processes the previous run started and never saw end are
 * killed, matched by pid, start time and the run's marker in their environment. Only the
 * lines the engine wrote are read (engine/log/eventlog.ts): what else is in the log
 * is set aside and reported. Booting twice in a row with nothing in between takes no
 * action the second time: there is nothing left to kill and nothing to preserve.
 */
import { existsSync, readdirSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { BlockInfo, EventBody, EventOf, TronEvent } from '../core/events.ts';
import { EventLog, LogCorruptError, readLog, type LogRead } from '../log/eventlog.ts';
import { planRecovery, recordsLanding, type RecoveryWorld } from '../core/recover.ts';
import type { Clock } from '../os/clock.ts';
import { hasMarker, isSameProcess, killGroup } from '../os/proc.ts';
import { keyOfRunDir } from '../log/keys.ts';
import * as git from '../git/index.ts';
import { BLOCK_ID } from '../core/names.ts';
import { isBranchName } from '../project/config.ts';
import { blockChangedInRun } from './effects/engine-files.ts';

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
  /** The branch blocks land on: a landed ref counts only for a sha on its first-parent history. */
  trunk?: string;
  /** The repository's key was made by this start: logs before it are unsigned, and believed. */
  keyCreated?: boolean;
  /** Landings this start recorded itself before recovery (the merge queue's: queue-recovery.ts). */
  vouched?: (id: string, sha: string) => boolean;
  /** Landings that came with the repository (landed-travel.ts): block → where from. */
  travelled?: (id: string, sha: string) => string | undefined;
}): Promise<Recovery> {
  const { repo, previousRunDir } = opts;
  const previous = readPrevious(previousRunDir, opts);
  const events = previous.events;
  const run = events.find((e): e is EventOf<'run.started'> => e.type === 'run.started');
  const out: EventBody[] = [{ type: 'recovery.started', previous: run ? run.run : null, torn: previous.torn }, ...previous.notes];
  out.push(...killStrays(events, run));
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
  const plan = planRecovery(events, opts.blocks, await recoveryWorld(repo, opts, events));
  for (const u of plan.untrusted) {
    const kept = await git.setAsideLanded(repo, u.block, u.sha);
    out.push({ type: 'landed.untrusted', ...u, kept });
  }
  for (let resumed of plan.recovered) {
    if (resumed.phase === 'review' || resumed.phase === 'merge') {
      try {
        // Verified work this clone never held (the run led from another clone, and the remote had none of it) is not here to resume.
        if (resumed.sha && (await git.revParse(repo, resumed.sha)) === undefined)
          throw new Error(`its attested commit ${resumed.sha.slice(0, 12)} is not in this clone`);
        await git.resetWorktree(repo, resumed.block);
      } catch (error) {
        // A worktree git cannot read is the block's, not the start's: the block is dispatched
        // again from trunk, and its branch kept as an orphan when it is made anew.
        const why = (error instanceof Error ? error.message : String(error)).trim().split('\n')[0];
        resumed = { ...resumed, phase: 'pending', detail: `its worktree could not be restored (${why}): dispatched again from trunk` };
        delete resumed.sha;
      }
    }
    out.push(resumed);
  }
  await cleanEngineCheckouts(repo);
  return { ...(run ? { previous: run.run } : {}), events: out, answered: plan.answered };
}

/**
 * The previous run's events that tron itself wrote. A torn tail is set aside (as ever);
 * lines that do not follow the log's signature chain are set aside and reported; a log
 * that cannot be believed at all — unsigned although the repository already had its key,
 * or unreadable in the middle — is set aside whole and reported. Never an error: what a
 * worker did to the log must not stop the next start.
 */
function readPrevious(runDir: string | undefined, opts: { clock: Clock; keyCreated?: boolean }) {
  const none = { events: [] as TronEvent[], torn: false, notes: [] as EventBody[] };
  if (!runDir || !existsSync(join(runDir, 'events.jsonl'))) return none;
  const file = join(runDir, 'events.jsonl');
  const run = basename(runDir);
  const whole = (detail: string) => ({ ...none, notes: [{ type: 'log.foreign' as const, run, lines: [], detail }] });
  let read: LogRead;
  try {
    read = readLog(file);
    if (read.torn) {
      EventLog.open(runDir, { clock: opts.clock, command: 'tron start (recovery)' }).close();
      read = { ...readLog(file), torn: read.torn };
    }
  } catch (err) {
    if (!(err instanceof LogCorruptError)) throw err;
    return whole(`the whole log was set aside: ${err.problems[0]?.message.split(';')[0] ?? err.message}`);
  }
  if (!read.signed && read.events.length > 0 && keyOfRunDir(runDir) !== undefined && !opts.keyCreated) {
    return whole('the whole log was set aside: it carries no signatures, though this repository signs its logs');
  }
  const notes: EventBody[] = [];
  if (read.foreign.length > 0) {
    const shown = read.foreign.slice(0, 3).map((f) => `line ${f.line} (${f.reason}): ${f.text}`);
    notes.push({
      type: 'log.foreign',
      run,
      lines: read.foreign.map((f) => f.line),
      detail: `${read.foreign.length} line(s) tron did not write were set aside: ${shown.join('; ')}`,
    });
  }
  return { events: read.events, torn: read.torn !== undefined, notes };
}

/**
 * What the recovery plan needs of git and the older logs: the landed refs, trunk's
 * first-parent history (read only when some block has a landed ref), whether an older
 * signed log records a landing (read only when the previous one does not), and which
 * block files changed while the previous run ran without --watch.
 */
async function recoveryWorld(
  repo: string,
  opts: {
    blocks: readonly BlockInfo[];
    trunk?: string;
    previousRunDir: string | undefined;
    keyCreated?: boolean;
    vouched?: (id: string, sha: string) => boolean;
    travelled?: (id: string, sha: string) => string | undefined;
  },
  events: readonly TronEvent[],
): Promise<RecoveryWorld> {
  const landedRefs = await git.landedRefs(repo);
  const trunk = opts.trunk ?? events.find((e): e is EventOf<'run.started'> => e.type === 'run.started')?.trunk;
  const any = opts.blocks.some((b) => landedRefs.has(b.id));
  const onTrunk =
    any && trunk && (await git.revParse(repo, `refs/heads/${trunk}`))
      ? await git.firstParentShas(repo, `refs/heads/${trunk}`)
      : new Set<string>();
  let older: TronEvent[][] | undefined;
  return {
    landedRefs,
    onTrunk,
    ...(trunk ? { trunk } : {}),
    ...(opts.vouched && { vouched: opts.vouched }),
    ...(opts.travelled && { travelled: opts.travelled }),
    olderRecords: (id, sha) => {
      older ??= olderLogs(repo, opts.previousRunDir, opts.keyCreated);
      return older.some((log) => recordsLanding(log, id, sha));
    },
    suspect: (id, digest) => blockChangedInRun(repo, id, digest, events),
  };
}

/** The logs of every run before the previous one, newest first: signed ones, or any when the key is new. */
function olderLogs(repo: string, previousRunDir: string | undefined, keyCreated: boolean | undefined): TronEvent[][] {
  const runs = join(repo, '.tron', 'runs');
  if (!existsSync(runs)) return [];
  const logs: TronEvent[][] = [];
  for (const id of readdirSync(runs).sort().reverse()) {
    const dir = join(runs, id);
    if (previousRunDir && resolve(dir) === resolve(previousRunDir)) continue;
    try {
      const read = readLog(join(dir, 'events.jsonl'));
      if (read.signed || keyCreated) logs.push(read.events);
    } catch {
      // no log, or one that cannot be read: it records nothing
    }
  }
  return logs;
}

/**
 * A landing announced (land.intent) and never seen to end leaves git's lock files behind:
 * remove them. Runs at boot, under the engine lock, before anything reads the checkout;
 * `events` are the previous run's, as start read them (none when its log could not be read).
 */
export async function clearInterruptedLanding(repo: string, events: readonly TronEvent[]): Promise<EventBody[]> {
  const started = events.find((e) => e.type === 'run.started');
  let open: Extract<TronEvent, { type: 'land.intent' }> | undefined;
  for (const e of events) {
    if (e.type === 'land.intent') open = e;
    if (e.type === 'block.landed' && open?.blocks.some((b) => b.block === e.block)) open = undefined;
    if (e.type === 'land.refused' && open?.stack === e.stack) open = undefined;
  }
  if (!open || !started || started.type !== 'run.started') return [];
  // Names from the log become lock files' paths: only a branch's and blocks' names (a forged line's "../../Cargo" is not one).
  if (!isBranchName(started.trunk)) return [];
  const ids = open.blocks.map((b) => b.block).filter((id) => BLOCK_ID.test(id));
  if (ids.length === 0) return [];
  const removed = await git.clearLandingLocks(repo, started.trunk, ids);
  return removed.map((file) => ({
    type: 'lock.cleared',
    block: ids[0]!,
    file,
    detail: 'left by a landing the previous run died in the middle of',
  }));
}

/**
 * Worker processes started and never seen to end: killed by pid, start time and the
 * run's marker in their environment — never by name, and never a process that lacks the
 * marker (a recorded pid and start time alone could be a stranger's, named by a forged line).
 */
function killStrays(events: readonly TronEvent[], started: EventOf<'run.started'> | undefined): EventBody[] {
  const alive = new Map<number, EventOf<'worker.spawned'>>();
  for (const e of events) {
    // A process on an agent's host is the agent's to end (its turn is stopped through the database).
    if (e.type === 'worker.spawned' && !e.agent) alive.set(e.pid, e);
    if (e.type === 'worker.exited' && !e.agent) alive.delete(e.pid);
  }
  const out: EventBody[] = [];
  for (const w of alive.values()) {
    if (!isSameProcess(w.pid, w.start_time)) continue;
    const who = { block: w.block, session: w.session, pid: w.pid, start_time: w.start_time };
    if (!started?.marker) {
      out.push({ type: 'worker.spared', ...who, reason: 'the run recorded no marker, so the process cannot be told from a stranger' });
    } else if (!hasMarker(w.pid, started.marker)) {
      out.push({ type: 'worker.spared', ...who, reason: `its environment does not carry the run's TRON_RUN_MARKER` });
    } else if (killGroup(w.pid, w.start_time, 'SIGKILL')) {
      out.push({ type: 'worker.killed', ...who, run: started.run });
    }
  }
  return out;
}

/**
 * The engine's own checkouts (`_lane`, `_check-<n>`, `_trunk`: rebases and test runs)
 * are made afresh in each run — one a crash interrupted may hold a half-done cherry-pick
 * or a test's leftovers; stale worktree records are pruned.
 */
async function cleanEngineCheckouts(repo: string): Promise<void> {
  const root = join(repo, git.WORKTREES_DIR);
  const names = existsSync(root) ? readdirSync(root).filter((n) => n.startsWith('_')) : [];
  for (const name of names) await git.removeWorktree(repo, join(root, name));
  await git.pruneWorktrees(repo);
}
