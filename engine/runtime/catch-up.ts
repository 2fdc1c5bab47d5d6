/**
 * What a start catches up on before recovery reads the previous run: the table of steps,
 * run in order, each with when it applies. A new catch-up is a row. Each step may add
 * notes to the boot (in the order the log gets them: an interrupted landing's, the
 * remote's, the merge queue's, what this clone lacked, what travelled), print what the
 * operator should hear, or stop the start (a checkout that is not clean).
 */
import { InputError } from '../core/errors.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import type { ForgeRun } from '../forge/session.ts';
import * as git from '../git/index.ts';
import { openRemote, type Remote, type RemoteAccess, remoteAccess } from '../git/remote.ts';
import type { Clock } from '../os/clock.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import { firstStartLandings, remoteLandings, type Travelled } from './landed-travel.ts';
import { catchUpFromQueue } from './queue-recovery.ts';
import { clearInterruptedLanding, recover, type Recovery } from './recovery.ts';
import { recordedLandings } from '../core/recover.ts';
import { catchUpFromRemote, followRemote, restoreWork } from './remote-recovery.ts';
import { landedFrom } from './start-reads.ts';

/** How long a clone's first start waits on its upstream's landed refs (landed-travel.ts) before going on without them. */
const UPSTREAM_TIMEOUT_MS = 30_000;

export interface CatchUpInput {
  repo: string;
  config: Config;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  blocks: readonly Block[];
  /** The previous run's directory, and its events (none when there is no readable log). */
  previous: string | undefined;
  before: readonly TronEvent[];
  /** Trunk when the lease (or the lock) was taken. */
  trunkSha: string;
  /** The user's git credential setup, read once for the run's remote calls (with [remote]). */
  access: RemoteAccess | undefined;
  forgeRun: ForgeRun | undefined;
}

/** What the steps found. */
export interface CaughtUp {
  /** [remote], opened once: its URL read now, not again. */
  remote?: Remote;
  /** A landing the previous run died in the middle of: its git locks, then the checkout it was moving. */
  cleared: EventBody[];
  /** What the remote already held of a landing the previous run announced. */
  fromRemote: EventBody[];
  /** [forge] merge = "queue": a pull request the queue merged while tron was stopped. */
  fromQueue: EventBody[];
  /** Landings and verified work the previous run recorded that this clone lacked, taken from the remote. */
  followed: EventBody[];
  /** Landings made elsewhere (the remote's, or on a clone's first start its upstream's): not built again. */
  travelled?: Travelled;
}

interface Step {
  name: string;
  when: (i: CatchUpInput, got: CaughtUp) => boolean;
  run: (i: CatchUpInput, got: CaughtUp) => Promise<void>;
}

const withRemote = (_i: CatchUpInput, got: CaughtUp) => got.remote !== undefined;

export const CATCH_UP: readonly Step[] = [
  {
    name: 'an interrupted landing',
    when: () => true,
    run: async (i, got) => {
      got.cleared = await clearInterruptedLanding(i.repo, i.before);
    },
  },
  {
    name: 'the remote',
    when: (i) => i.config.remote !== undefined,
    run: async (i, got) => {
      const r = i.config.remote!;
      got.remote = await openRemote(i.repo, {
        name: r.name,
        trunk: i.config.trunk,
        timeoutMs: r.timeoutMs,
        ...(i.access && { access: i.access }),
      });
    },
  },
  {
    name: 'a landing the remote already holds',
    when: withRemote,
    run: async (i, got) => {
      got.fromRemote = await catchUpFromRemote(i.repo, got.remote!, i.before);
    },
  },
  {
    // A clone that did not make the run's landings (a standby on another host) takes them from the remote, not builds them again.
    name: 'what this clone lacks of the run',
    when: withRemote,
    run: async (i, got) => {
      got.followed = [...(await followRemote(i.repo, got.remote!, i.before)), ...(await restoreWork(i.repo, got.remote!, i.before))];
      for (const e of got.followed) if (e.type === 'remote.followed' || e.type === 'work.restored') i.print(`tron: ${e.detail}`);
    },
  },
  {
    name: 'what the merge queue merged',
    when: (i, got) => got.remote !== undefined && i.forgeRun?.forge !== undefined && i.config.forge?.merge === 'queue',
    run: async (i, got) => {
      got.fromQueue = await catchUpFromQueue(i.repo, got.remote!, i.forgeRun!.forge!, i.before);
    },
  },
  {
    name: 'what the remote held, said',
    when: () => true,
    run: async (i, got) => {
      for (const e of [...got.fromRemote, ...got.fromQueue]) if (e.type === 'remote.recovered') i.print(`tron: ${e.detail}`);
    },
  },
  {
    name: 'landings made elsewhere',
    when: (i, got) => got.remote !== undefined || i.previous === undefined,
    run: async (i, got) => {
      const ids = i.blocks.map((b) => b.id);
      got.travelled = got.remote
        ? await remoteLandings(i.repo, got.remote, ids, new Set(recordedLandings(i.before).keys()))
        : await firstStartLandings(i.repo, {
            trunk: i.config.trunk,
            ids,
            access: () => remoteAccess(i.env),
            timeoutMs: UPSTREAM_TIMEOUT_MS,
          });
      for (const note of got.travelled.notes) i.print(note);
    },
  },
  {
    name: 'your checkout, left by an interrupted landing',
    when: () => true,
    run: async (i) => {
      const caughtUp = await git.catchUpCheckout(i.repo, i.config.trunk, landedFrom(i.before));
      if (caughtUp)
        i.print(
          `tron: your checkout of ${i.config.trunk} was left at ${caughtUp.slice(0, 12)} by an interrupted landing; moved it to ${i.trunkSha.slice(0, 12)}`,
        );
    },
  },
  {
    name: 'a clean checkout of trunk',
    when: () => true,
    run: async (i) => {
      const dirty = await git.checkMainCheckout(i.repo, i.config.trunk);
      if (dirty) throw new InputError([dirty]);
    },
  },
];

/** Runs the catch-up steps in order; what they found. */
export async function catchUp(i: CatchUpInput, steps: readonly Step[] = CATCH_UP): Promise<CaughtUp> {
  const got: CaughtUp = { cleared: [], fromRemote: [], fromQueue: [], followed: [] };
  for (const step of steps) if (step.when(i, got)) await step.run(i, got);
  return got;
}

/** The boot's notes from the catch-up, in the order the log gets them. */
export function catchUpNotes(got: CaughtUp): EventBody[] {
  return [...got.cleared, ...got.fromRemote, ...got.fromQueue, ...got.followed, ...(got.travelled?.events ?? [])];
}

/** Whether the catch-up found anything to record: then the start is never idle, it writes a run. */
export function caughtAnything(got: CaughtUp): boolean {
  return [got.cleared, got.fromRemote, got.fromQueue, got.travelled?.events ?? []].some((notes) => notes.length > 0);
}

/**
 * Recovery (recovery.ts), told what the catch-up found: a landing that travelled with the
 * repository, or that the merge queue merged while tron was stopped, is believed at the
 * sha it was found at.
 */
export function recoverAfter(
  i: Pick<CatchUpInput, 'repo' | 'config' | 'blocks' | 'previous'>,
  got: CaughtUp,
  o: { clock: Clock; keyCreated: boolean },
): Promise<Recovery> {
  return recover({
    repo: i.repo,
    previousRunDir: i.previous,
    blocks: i.blocks.map((b) => ({
      id: b.id,
      title: b.title,
      depends_on: b.dependsOn,
      priority: b.priority,
      criteria: b.criteria,
      digest: b.digest,
    })),
    clock: o.clock,
    trunk: i.config.trunk,
    keyCreated: o.keyCreated,
    travelled: (id, sha) => {
      const came = got.travelled?.from.get(id);
      return came?.sha === sha ? came.source : undefined;
    },
    vouched: (id, sha) => got.fromQueue.some((e) => e.type === 'remote.recovered' && e.blocks.some((b) => b.block === id && b.sha === sha)),
  });
}
