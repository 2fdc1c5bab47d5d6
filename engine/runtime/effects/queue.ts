/**
 * A landing through the forge's merge queue (`[forge] merge = "queue"`; decided in
 * engine/core/lane/pr.ts): the queue has already moved the remote's trunk to its own
 * commit (`land.intent` `sha`, whose tree the decision checked is exactly the tested one).
 * What is left is tron's record of it, as after its own push: the remote's
 * `refs/tron/landed/<id>` (one atomic push of those refs alone, each by lease: it must
 * not exist yet), then local trunk, the local landed refs and your checkout — the same
 * local transaction as without a queue (lane.ts).
 *
 * Trunk is never pushed here. A remote whose trunk does not hold the queue's commit, or a
 * local trunk that moved, is refused (`land.refused`); a network failure is a
 * `remote.failed` push, tried again as a push is (lane/remote.ts keeps `queued`).
 */
import type { EventBody, EventOf } from '../../core/events.ts';
import * as git from '../../git/index.ts';
import { fetchTrunk, pushLanding, readRemote, redactUrl, remoteProblemCode, type Remote, type RemoteFailure } from '../../git/remote.ts';
import type { EffectContext } from './context.ts';

export async function landAfterQueue(
  c: EffectContext,
  remote: Remote,
  e: EventOf<'land.intent'>,
  landLocally: (e: EventOf<'land.intent'>) => Promise<EventBody[]>,
): Promise<EventBody[]> {
  const ids = e.blocks.map((b) => b.block);
  const attempt = e.attempt ?? 1;
  const refused = (actual: string | null, detail: string): EventBody[] => [
    { type: 'land.refused', stack: e.stack, blocks: ids, actual, detail },
  ];
  const local = await git.currentTrunkSha(c.repo, c.config.trunk);
  if (local !== e.from) return refused(local, `trunk is at ${local}, not ${e.from}`);
  const fetched = await fetchTrunk(c.repo, remote);
  if (!fetched.ok) return [failed(remote, e.stack, fetched, attempt)];
  const now = fetched.sha;
  if (now === undefined || (now !== e.sha && !(await git.isAncestor(c.repo, e.sha, now))))
    return refused(now ?? null, `the remote's ${remote.trunk} is at ${now ?? 'nothing'}, which does not hold the merge queue's ${e.sha}`);
  const blocks = e.blocks.map((b) => ({ id: b.block, sha: b.sha }));
  const accepted = (found: boolean): Promise<EventBody[]> =>
    landLocally(e).then((after) => [
      { type: 'remote.pushed', stack: e.stack, from: e.from, sha: e.sha, blocks: e.blocks, ...(found ? { found } : {}) },
      ...after,
    ]);
  // Trunk's lease and value are both where the queue left it: only the landed refs move.
  const pushed = await pushLanding(c.repo, remote, { expectedOld: now, top: now, blocks });
  if (pushed.ok) return accepted(false);
  if (pushed.kind !== 'moved') return [failed(remote, e.stack, pushed, attempt)];
  // A lease refused: the refs may be ours already (a push whose answer was lost).
  const read = await readRemote(c.repo, remote);
  if (!read.ok) return [failed(remote, e.stack, read, attempt)];
  if (e.blocks.every((b) => read.refs.landed.get(b.block) === b.sha)) return accepted(true);
  return refused(read.refs.trunk ?? null, `the remote already has refs/tron/landed/ for ${ids.join(', ')}, not from this landing`);
}

function failed(remote: Remote, stack: number, f: RemoteFailure, attempt: number): EventBody {
  return {
    type: 'remote.failed',
    stack,
    op: 'push',
    kind: f.kind,
    reason: f.reason,
    code: remoteProblemCode(f),
    message: `${remote.name} (${redactUrl(remote.pushUrl)}): ${f.message}`,
    attempt,
  };
}
