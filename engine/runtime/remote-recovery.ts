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
import type { EventBody, EventOf, TronEvent } from '../core/events.ts';
import * as git from '../git/index.ts';
import { fetchRefs, fetchTrunk, listRemoteRefs, readRemote, type Remote, remoteProblemCode } from '../git/remote.ts';
import { GitFailure, GitStateError, gitOut, runGit } from '../git/run.ts';
import { apply, initialState } from '../core/state.ts';
import { recordedLandings } from '../core/recover.ts';
import { workRefOf } from './effects/work-ref.ts';

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
export async function catchUpFromRemote(repo: string, remote: Remote, previous: readonly TronEvent[]): Promise<EventBody[]> {
  const open = openLanding(previous);
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

/**
 * A clone that did not make the landings its run's log records — a standby on another
 * host, a new clone of a repository whose log is in a database — lacks their landed refs,
 * and its trunk is behind: recovery would build those blocks again. The remote has them.
 * Before recovery, when the previous log records a landing this clone has no landed ref
 * for, the remote's trunk and landed refs are read: local trunk fast-forwards to the
 * remote's (your checkout follows), and each such block whose landed ref the remote holds
 * at the very sha the log records gets it here. Recovery then checks them as ever (on
 * trunk's first-parent history, recorded by the log). Nothing missing: no network call. A
 * remote that cannot be read, or whose trunk does not descend from this one, stops the
 * start (exit 1, the remote's code; exit 2, TRON_TRUNK_DIVERGED) rather than let recovery
 * build landed blocks again.
 */
export async function followRemote(repo: string, remote: Remote, previous: readonly TronEvent[]): Promise<EventBody[]> {
  const recorded = recordedLandings(previous);
  if (recorded.size === 0) return [];
  const here = await git.landedRefs(repo);
  const missing = [...recorded].filter(([id]) => !here.has(id)).sort(([a], [b]) => (a < b ? -1 : 1));
  if (missing.length === 0) return [];
  // Without the remote's word this clone would build landed blocks again: the start stops instead, and is tried again.
  const lacking = `this clone lacks the landings of ${missing.map(([id]) => id).join(', ')} that the run's log records`;
  const fetched = await fetchTrunk(repo, remote);
  const read = fetched.ok ? await readRemote(repo, remote) : fetched;
  if (!read.ok)
    throw new GitFailure(
      remoteProblemCode(read),
      `${lacking}, and ${remote.name} could not be read (${read.reason}): ${read.message.split('\n')[0]}; start again once it answers`,
    );
  const to = read.refs.trunk;
  if (!fetched.ok || fetched.sha === undefined || to !== fetched.sha) return [];
  const from = await git.currentTrunkSha(repo, remote.trunk);
  if (from !== to && !(await git.isAncestor(repo, from, to)))
    throw new GitStateError(
      'TRON_TRUNK_DIVERGED',
      `refs/heads/${remote.trunk}`,
      `${lacking}, and ${remote.name}'s ${remote.trunk} (${to.slice(0, 12)}) does not descend from this clone's (${from.slice(0, 12)}): push your commits, or reset ${remote.trunk} to ${remote.name}'s (git reset --hard ${remote.name}/${remote.trunk} on it), then start again`,
    );
  const blocks: { block: string; sha: string }[] = [];
  for (const [id, shas] of missing) {
    const sha = read.refs.landed.get(id);
    if (sha !== undefined && shas.has(sha) && (await git.isAncestor(repo, sha, to))) blocks.push({ block: id, sha });
  }
  if (blocks.length === 0 && from === to) return [];
  const followed = await git.followLandings(repo, {
    trunk: remote.trunk,
    from,
    to,
    landed: blocks.map((b) => ({ id: b.block, sha: b.sha })),
  });
  if (!followed.moved) return [];
  const names = blocks.map((b) => b.block).join(', ');
  const checkout =
    followed.checkout?.state === 'failed' ? `; your checkout of ${remote.trunk} could not follow: ${followed.checkout.message}` : '';
  return [
    {
      type: 'remote.followed',
      from,
      to,
      blocks,
      detail: `this clone lacked what ${remote.name} holds of the run${from === to ? '' : `: ${remote.trunk} fast-forwarded ${from.slice(0, 12)} → ${to.slice(0, 12)}`}${blocks.length > 0 ? `; the landed refs of ${names} made local` : ''}${checkout}`,
    },
  ];
}

/**
 * Verified work a clone that did not make it lacks: a block the previous log has at review
 * or merge resumes there at its attested sha (core/recover.ts), which only the leader's
 * clone held — unless the remote has it: `refs/tron/work/<id>` (the agents' pushes) or
 * `tron/<id>` (`push_branches`). Before recovery, for each such block whose branch and
 * attested commit are missing here, those refs are fetched, and the branch is made at the
 * attested sha when it came with them. What cannot be fetched stays missing: recovery then
 * dispatches the block again from trunk, as for any work the crash took.
 */
export async function restoreWork(repo: string, remote: Remote, previous: readonly TronEvent[]): Promise<EventBody[]> {
  // Only a run that verified work can have left some elsewhere: most starts fold nothing.
  if (!previous.some((e) => e.type === 'gate.passed' || e.type === 'block.recovered')) return [];
  const prev = previous.reduce(apply, initialState());
  const lacking: { block: string; sha: string }[] = [];
  for (const [id, b] of prev.blocks) {
    if (!b.attested || (b.phase !== 'review' && b.phase !== 'merge')) continue;
    if ((await git.revParse(repo, `refs/heads/tron/${id}`)) !== undefined || (await git.revParse(repo, b.attested)) !== undefined) continue;
    lacking.push({ block: id, sha: b.attested });
  }
  if (lacking.length === 0) return [];
  const names = lacking.flatMap((l) => [workRefOf(l.block), `refs/heads/tron/${l.block}`]);
  const listed = await listRemoteRefs(repo, remote, names);
  if (!listed.ok) return [];
  const pairs = names.filter((n) => listed.refs.has(n)).map((n, i) => [n, `refs/tron/restored/${i}`] as const);
  if (pairs.length === 0) return [];
  const fetched = await fetchRefs(repo, remote, pairs);
  // The refs only brought the objects: they go again, whatever came.
  await gitOut(repo, ['update-ref', '--stdin'], `${pairs.map(([, into]) => `delete ${into}`).join('\n')}\n`).catch(() => undefined);
  if (!fetched.ok) return [];
  const restored: { block: string; sha: string }[] = [];
  for (const l of lacking) {
    if ((await git.revParse(repo, l.sha)) === undefined) continue;
    // Created only: a branch made meanwhile is nobody's to overwrite.
    const made = await runGit(repo, [
      'update-ref',
      '-m',
      `tron: ${l.block}'s verified work from ${remote.name}`,
      `refs/heads/tron/${l.block}`,
      l.sha,
      '',
    ]);
    if (made.exitCode === 0) restored.push(l);
  }
  if (restored.length === 0) return [];
  return [
    {
      type: 'work.restored',
      blocks: restored,
      detail: `this clone lacked the verified work of ${restored.map((r) => `${r.block} (${r.sha.slice(0, 12)})`).join(', ')}; fetched from ${remote.name}, it resumes where the run left it`,
    },
  ];
}
