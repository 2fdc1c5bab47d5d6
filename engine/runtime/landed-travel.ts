/**
 * Landed state that travels with the repository. git records what landed —
 * `refs/tron/landed/<id>` at each block's commit — but a plain `git clone` fetches branches
 * and tags only, and recovery believes a landed ref only when a run log records the landing
 * (a worker without a sandbox can write refs: engine/core/recover.ts). So a teammate's
 * fresh clone used to build every landed block again. Before recovery, a start takes the
 * landings that came from elsewhere, from two sources it can trust without a log:
 *
 * - **with `[remote]`**, every start: the remote's landed refs at shas on the remote's
 *   trunk, for blocks of the register this clone holds no landing of. Under `[remote]` the
 *   remote is the truth; workers never reach its credentials, so only tron — or a person
 *   who may push, and could move trunk itself — put them there. Local trunk fast-forwards
 *   to the remote's first when it is behind (as `followRemote` does for a standby).
 * - **without `[remote]`, on a clone's first start** (no run directory yet: no worker ever
 *   ran in this clone, so none can have planted a ref): the landed refs of the remote
 *   trunk's upstream (`branch.<trunk>.remote`, which `git clone` sets), read with one
 *   `ls-remote`, and any already here (fetched by hand) — each at a sha on trunk's own
 *   first-parent history. Trunk is not moved: a landing on the upstream that this trunk
 *   lacks is said, with the pull that brings it.
 *
 * Recovery then finds those blocks landed (core/recover.ts, `travelled`), and their
 * landings are recorded in this run's log, so every later start believes them as its own.
 * The worst a forged ref on a trusted remote can do is make tron skip a block; the start
 * names every block it takes this way.
 */
import type { EventBody } from '../core/events.ts';
import * as git from '../git/index.ts';
import { fetchTrunk, openRemote, readRemote, redactUrl, type Remote, type RemoteAccess } from '../git/remote.ts';
import { runGit } from '../git/run.ts';

/** Landings a start takes from elsewhere: the event that made them local, and block → where it came from. */
export interface Travelled {
  events: EventBody[];
  /** Block → the source's words, for recovery's `block.recovered` detail. */
  from: Map<string, { sha: string; source: string }>;
  /** What the operator should hear: the blocks taken, or why a source could not be read. */
  notes: string[];
}

const NOTHING: Travelled = { events: [], from: new Map(), notes: [] };

/** With `[remote]`: the remote's landings of blocks in `ids` this clone lacks and no log here records. */
export async function remoteLandings(
  repo: string,
  remote: Remote,
  ids: readonly string[],
  recorded: ReadonlySet<string>,
): Promise<Travelled> {
  const here = await git.landedRefs(repo);
  const lacking = ids.filter((id) => !here.has(id) && !recorded.has(id));
  if (lacking.length === 0) return NOTHING;
  const read = await readRemote(repo, remote);
  if (!read.ok) return { ...NOTHING, notes: [unreadable(remote, read.message)] };
  const offered = lacking.flatMap((id) => {
    const sha = read.refs.landed.get(id);
    return sha === undefined ? [] : [{ id, sha }];
  });
  if (offered.length === 0 || read.refs.trunk === undefined) return NOTHING;
  const fetched = await fetchTrunk(repo, remote);
  if (!fetched.ok) return { ...NOTHING, notes: [unreadable(remote, fetched.message)] };
  const to = fetched.sha;
  if (to === undefined) return NOTHING;
  const from = await git.currentTrunkSha(repo, remote.trunk);
  if (from !== to && !(await git.isAncestor(repo, from, to)))
    return {
      ...NOTHING,
      notes: [
        `tron: ${remote.name} says ${names(offered)} landed, but its ${remote.trunk} does not descend from this clone's: they are not taken (push or reset your ${remote.trunk} to ${remote.name}'s, then start again)`,
      ],
    };
  const line = await git.firstParentShas(repo, to);
  const blocks = offered.filter((b) => line.has(b.sha));
  if (blocks.length === 0) return NOTHING;
  const followed = await git.followLandings(repo, { trunk: remote.trunk, from, to, landed: blocks });
  if (!followed.moved) return NOTHING;
  const source = `${remote.name}'s refs/tron/landed/`;
  const moved = from === to ? '' : `; ${remote.trunk} fast-forwarded ${from.slice(0, 12)} → ${to.slice(0, 12)}`;
  const detail = `${names(blocks)} landed before this clone's runs (${source}) and are not built again${moved}`;
  return {
    events: [{ type: 'remote.followed', from, to, blocks: blocks.map((b) => ({ block: b.id, sha: b.sha })), detail }],
    from: new Map(blocks.map((b) => [b.id, { sha: b.sha, source }])),
    notes: [`tron: ${detail}`],
  };
}

/**
 * Without `[remote]`, on a clone's first start: the landings of trunk's upstream (and any
 * landed ref already here) at shas on this trunk's first-parent history, made local.
 */
export async function firstStartLandings(
  repo: string,
  opts: { trunk: string; ids: readonly string[]; access: () => Promise<RemoteAccess>; timeoutMs: number },
): Promise<Travelled> {
  const here = await git.landedRefs(repo);
  const notes: string[] = [];
  const offered = new Map<string, { sha: string; source: string }>();
  for (const id of opts.ids) {
    const sha = here.get(id);
    if (sha !== undefined) offered.set(id, { sha, source: 'refs/tron/landed/ of this clone, before its first run' });
  }
  const upstream = await upstreamOf(repo, opts.trunk);
  const lacking = opts.ids.filter((id) => !offered.has(id));
  if (upstream && lacking.length > 0) {
    // An upstream without a URL is git's odd state, not this start's problem: said, and the start goes on.
    const remote = await openRemote(repo, {
      name: upstream,
      trunk: opts.trunk,
      timeoutMs: opts.timeoutMs,
      access: await opts.access(),
    }).catch((err: Error) => err);
    const read = remote instanceof Error ? undefined : await readRemote(repo, remote);
    if (remote instanceof Error || !read)
      notes.push(
        `tron: ${upstream}, the upstream of ${opts.trunk}, could not be opened (${remote instanceof Error ? remote.message : ''}): its landings are not known here`,
      );
    else if (!read.ok) notes.push(unreadable(remote, read.message));
    else
      for (const id of lacking) {
        const sha = read.refs.landed.get(id);
        if (sha !== undefined) offered.set(id, { sha, source: `${upstream}'s refs/tron/landed/ (${redactUrl(remote.fetchUrl)})` });
      }
  }
  const trunkSha = await git.revParse(repo, `refs/heads/${opts.trunk}`);
  if (offered.size === 0 || trunkSha === undefined) return { ...NOTHING, notes };
  const line = await git.firstParentShas(repo, trunkSha);
  const taken = [...offered].filter(([, o]) => line.has(o.sha));
  const missing = [...offered].filter(([, o]) => !line.has(o.sha)).map(([id]) => id);
  if (missing.length > 0)
    notes.push(
      `tron: ${missing.join(', ')} landed at shas ${opts.trunk} here does not hold on its first-parent history: built again unless you pull ${upstream ?? 'the upstream'}'s ${opts.trunk} first`,
    );
  const create = taken.filter(([id]) => !here.has(id)).map(([id, o]) => ({ id, sha: o.sha }));
  if (create.length > 0) {
    const made = await git.followLandings(repo, { trunk: opts.trunk, from: trunkSha, to: trunkSha, landed: create });
    if (!made.moved) return { ...NOTHING, notes };
  }
  if (taken.length === 0) return { ...NOTHING, notes };
  const from = new Map(taken);
  notes.push(
    `tron: ${[...from.keys()].join(', ')} landed before this clone's first run (${[...new Set([...from.values()].map((o) => o.source))].join('; ')}): not built again`,
  );
  return { events: [], from, notes };
}

/** The remote `git clone` set as trunk's upstream, if any. */
async function upstreamOf(repo: string, trunk: string): Promise<string | undefined> {
  const got = await runGit(repo, ['config', '--get', `branch.${trunk}.remote`]);
  const name = got.exitCode === 0 ? got.stdout.trim() : '';
  // "." is the repository itself: nothing travels from there.
  return name === '' || name === '.' ? undefined : name;
}

function names(blocks: ReadonlyArray<{ id: string }>): string {
  return blocks.map((b) => b.id).join(', ');
}

function unreadable(remote: Remote, message: string): string {
  return `tron: ${remote.name}'s landed refs could not be read (${message.split('\n')[0]}): a block landed elsewhere that this clone does not know of would be built again`;
}
