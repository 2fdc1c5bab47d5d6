/**
 * Recovery with a remote ([remote]): the remote is the record of what landed. A landing
 * is announced (land.intent) before its push; killed after the push reached the remote
 * and before local trunk followed, the previous run leaves the remote with the landing
 * and the repository without it. At the next start — before recovery reads the local
 * landed refs — the remote's trunk and `refs/tron/landed/*` are read, and a landing the
 * remote holds exactly as announced is made local: trunk from the intent's base to its
 * top and each block's landed ref, in one ref transaction. Recovery then finds the
 * blocks landed, and nothing is pushed twice. A remote that cannot be read leaves things
 * as they are: the lane's push finds the landing there later (git/remote.ts: a refused
 * lease on landed refs that are ours counts as pushed).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import { readLog } from '../log/eventlog.ts';
import * as git from '../git/index.ts';
import { fetchTrunk, readRemote, type Remote } from '../git/remote.ts';

/** The previous run's last landing that never ended (no block.landed, no refusal, no restack). */
export function openLanding(events: readonly TronEvent[]): EventOf<'land.intent'> | undefined {
  let open: EventOf<'land.intent'> | undefined;
  for (const e of events) {
    if (e.type === 'land.intent') open = e;
    if (e.type === 'block.landed' && open?.blocks.some((b) => b.block === e.block)) open = undefined;
    if ((e.type === 'land.refused' || e.type === 'remote.moved') && open?.stack === e.stack) open = undefined;
  }
  return open;
}

/**
 * Makes local what the remote already has of the previous run's unfinished landing
 * (see the file comment); returns the note that says so, or nothing.
 */
export async function catchUpFromRemote(repo: string, remote: Remote, previousRunDir: string | undefined): Promise<EventBody[]> {
  if (!previousRunDir || !existsSync(join(previousRunDir, 'events.jsonl'))) return [];
  const open = openLanding(readLog(join(previousRunDir, 'events.jsonl')).events);
  if (!open) return [];
  const fetched = await fetchTrunk(repo, remote);
  if (!fetched.ok || fetched.sha === undefined) return [];
  const read = await readRemote(repo, remote);
  if (!read.ok) return [];
  const all = open.blocks.every((b) => read.refs.landed.get(b.block) === b.sha);
  if (!all || !(await git.isAncestor(repo, open.sha, fetched.sha))) return [];
  const local = await git.currentTrunkSha(repo, remote.trunk);
  if (local !== open.from) return [];
  const moved = await git.moveRefs(repo, {
    trunk: remote.trunk,
    expectedOld: open.from,
    top: open.sha,
    blocks: open.blocks.map((b) => ({ id: b.block, sha: b.sha })),
  });
  if (!moved.ok) return [];
  return [
    {
      type: 'remote.recovered',
      blocks: open.blocks,
      sha: open.sha,
      detail: `the remote ${remote.name} already had the landing of ${open.blocks.map((b) => b.block).join(', ')} (the previous run was stopped before it recorded it): local ${remote.trunk} and the landed refs follow`,
    },
  ];
}
