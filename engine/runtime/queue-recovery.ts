/**
 * Recovery with the merge queue (`[forge] merge = "queue"`): a run killed while its pull
 * request waited in the queue leaves the queue to go on without it — it may merge while
 * tron is down. Then the remote's trunk holds the queue's commit and nothing of tron's
 * records it; the next stack would find trunk moved with a block's commits in it and take
 * them for a worker's push. So, at the next start — beside the remote's own catch-up
 * (remote-recovery.ts) and before recovery reads the local landed refs — the previous
 * run's queued pull request is asked about: merged, with the remote's trunk holding the
 * queue's commit, its tree exactly the tested one and its first parent local trunk, the
 * landing is recorded as the lane would have (the landed refs pushed, then local trunk,
 * the local landed refs and your checkout), and recovery finds the block landed.
 *
 * Anything else leaves things as they are: still queued, the resumed lane enqueues once
 * (it reads the queue first) and watches it; taken out, the lane starts it again; another
 * tree, the lane finds trunk moved and pages. A forge or remote that cannot be read here
 * only leaves the same to the lane.
 */
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import type { Forge } from '../forge/forge.ts';
import * as git from '../git/index.ts';
import { fetchTrunk, pushLanding, readRemote, type Remote } from '../git/remote.ts';
import { runGit } from '../git/run.ts';

/** The previous run's last ask of the queue whose stack never ended (no landing announced, not closed). */
export function openQueued(events: readonly TronEvent[]): EventOf<'pr.requested'> | undefined {
  let open: EventOf<'pr.requested'> | undefined;
  for (const e of events) {
    if (e.type === 'pr.requested' && e.queue !== undefined) open = e;
    if ((e.type === 'lane.closed' || e.type === 'land.intent') && open?.stack === e.stack) open = undefined;
  }
  return open;
}

export async function catchUpFromQueue(repo: string, remote: Remote, forge: Forge, previous: readonly TronEvent[]): Promise<EventBody[]> {
  const open = openQueued(previous);
  if (!open) return [];
  try {
    const top = open.blocks.at(-1)!;
    const pull = await forge.findPull(`tron/${top.block}`);
    if (!pull) return [];
    const q = await forge.queueState(pull.number);
    if (q.state !== 'merged') return [];
    const fetched = await fetchTrunk(repo, remote);
    if (!fetched.ok || fetched.sha === undefined) return [];
    const now = fetched.sha;
    if (now !== q.commit && !(await git.isAncestor(repo, q.commit, now))) return [];
    const local = await git.currentTrunkSha(repo, remote.trunk);
    const tree = async (rev: string) => (await runGit(repo, ['rev-parse', '--verify', '--quiet', `${rev}^{tree}`])).stdout.trim();
    const parent = (await runGit(repo, ['rev-parse', '--verify', '--quiet', `${q.commit}^1`])).stdout.trim();
    if (parent !== local || (await tree(q.commit)) !== (await tree(open.sha)) || !(await git.isAncestor(repo, open.sha, q.commit)))
      return [];
    // As the lane lands through the queue (lane/pr.ts): each landed ref at the queue's commit.
    const blocks = open.blocks.map((b) => ({ id: b.block, sha: q.commit }));
    const pushed = await pushLanding(repo, remote, { expectedOld: now, top: now, blocks });
    if (!pushed.ok) {
      const read = await readRemote(repo, remote);
      if (!read.ok || !open.blocks.every((b) => read.refs.landed.get(b.block) === q.commit)) return [];
    }
    const moved = await git.moveRefs(repo, { trunk: remote.trunk, expectedOld: local, top: q.commit, blocks });
    if (!moved.ok) return [];
    await git.followTrunk(repo, remote.trunk, local, q.commit).catch(() => undefined);
    return [
      {
        type: 'remote.recovered',
        blocks: open.blocks.map((b) => ({ block: b.block, sha: q.commit })),
        sha: q.commit,
        detail: `the merge queue merged pull request #${pull.number} (${open.blocks.map((b) => b.block).join(', ')}) while tron was stopped: ${remote.trunk} holds exactly the tree tron tested at ${q.commit}; local ${remote.trunk}, the landed refs and your checkout follow`,
      },
    ];
  } catch {
    return [];
  }
}
