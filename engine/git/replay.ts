/**
 * The merge lane's replay in bulk: a whole stack of blocks put one on the other in the
 * object store by six git processes, however many blocks it holds — where replaying them
 * one by one (stack.ts) takes eight a block.
 *
 * It takes the blocks whose replay needs no merge at all: a block of plain commits (one
 * parent each, no commit shared with another block, no `encoding` header) whose paths no
 * commit between where it left trunk and where it goes (trunk's own since then, and the
 * blocks below it in the stack) touches. Then the three-way merge `merge-tree` or
 * cherry-pick would make has one answer — every path the block changed as the block left
 * it, every other path as the stack below left it — so the block's commits are written
 * as exactly that, one after another, by one `git fast-import`: same author, author date
 * and message, committed by `tron <tron@localhost>`, the patch unchanged by construction.
 * "Touches" is kept wide, so that no rename git would detect could make the answers
 * differ: the same path, a file where the other side has a folder, or a file added to a
 * folder from which the other side deleted one (what git's directory-rename detection
 * starts from).
 *
 * It stops at the first block it cannot take, and the caller replays that one and the
 * rest one by one (stack.ts), which merges, cherry-picks and reports conflicts. Nothing
 * here runs a filter, merge driver or hook (run.ts), reads a working tree, or leaves a
 * ref behind: fast-import's commits go to `refs/tron/lane/replay`, which the same stream
 * deletes before it ends; the commits stay objects until a landing points refs at them.
 */
import { keepParentLines, keepParents, keepPatch, knownLine, knownParents, knownPatch } from './known.ts';
import { readObject } from './resolver.ts';
import { DIFF_FLAGS, gitOut, runGitBytes, type Sha } from './run.ts';

export interface StackBlock {
  block: string;
  /** Its approved head. */
  sha: Sha;
}

/** One block of the stack, replayed (or, at the bottom, already on trunk). */
export interface StoreReplay {
  block: string;
  outcome: 'fast_forward' | 'rebased';
  /** Its commit in the stack: its head (fast_forward) or the last of its replayed commits. */
  sha: Sha;
  /** Where it left trunk: the parent of its first commit. */
  upstream: Sha;
  /** The patch id of its change, the same before the replay and after. */
  patch: string;
}

/** The ref fast-import writes to, deleted again by the same stream. */
const SCRATCH_REF = 'refs/tron/lane/replay';

/** What a side changed: the paths, and which were added or deleted. */
interface Touched {
  paths: Set<string>;
  /** Every folder above a changed path. */
  dirs: Set<string>;
  added: Set<string>;
  /** Every folder above a deleted path. */
  deletedDirs: Set<string>;
}

/** One change of a commit, as a fast-import command. */
interface Change {
  path: string;
  status: string;
  command: string;
}

interface Commit {
  sha: Sha;
  author: string;
  message: string;
  changes: Change[];
}

interface Plan {
  block: string;
  head: Sha;
  upstream: Sha;
  commits: Commit[];
}

/**
 * Replays the longest prefix of `blocks` that needs no merge onto `trunk`, each block on
 * the one before. Returns the prefix's results, bottom first — possibly none (then the
 * caller replays every block one by one); a git failure anywhere also returns none, and
 * whatever objects were written stay unreachable.
 */
export async function replayInStore(repo: string, trunk: Sha, blocks: readonly StackBlock[]): Promise<StoreReplay[]> {
  try {
    return await replay(repo, trunk, blocks);
  } catch {
    return [];
  }
}

async function replay(repo: string, trunk: Sha, blocks: readonly StackBlock[]): Promise<StoreReplay[]> {
  if (blocks.length === 0) return [];
  const plans = await ownCommits(repo, trunk, blocks);
  if (plans.length === 0) return [];
  const commits = await readCommits(
    repo,
    plans.flatMap((p) => p.commits.map((c) => c.sha)),
  );
  const upstreams = [...new Set(plans.map((p) => p.upstream).filter((u) => u !== trunk))];
  const diffs = await changes(repo, [...plans.flatMap((p) => p.commits.map((c) => c.sha)), ...upstreams.map((u) => `${trunk} ${u}`)]);
  const trunkSince = new Map(upstreams.map((u) => [u, touched(diffs.get(`${trunk} ${u}`) ?? [])]));

  // The prefix: each block's paths against trunk's since it left and the stack's below it.
  const below = touched([]);
  const taken: Plan[] = [];
  for (const [i, plan] of plans.entries()) {
    const own: Change[] = [];
    let plain = true;
    for (const c of plan.commits) {
      const read = commits.get(c.sha);
      if (read === undefined) plain = false;
      else Object.assign(c, read, { changes: diffs.get(c.sha) ?? [] });
      own.push(...c.changes);
    }
    if (!plain) break;
    const mine = touched(own);
    const onTrunk = i === 0 && plan.upstream === trunk;
    if (!onTrunk && (clash(mine, below) || clash(mine, trunkSince.get(plan.upstream) ?? touched([])))) break;
    merge(below, mine);
    taken.push(plan);
  }
  if (taken.length === 0) return [];

  const replayed = taken[0]!.upstream === trunk ? taken.slice(1) : taken;
  const shas = replayed.length > 0 ? await fastImport(repo, replayed[0] === taken[0] ? trunk : taken[0]!.head, replayed) : [];
  const patches = await patchIds(repo, taken);
  let next = 0;
  return taken.map((plan) => {
    const patch = patches.get(plan.head) ?? '';
    if (!replayed.includes(plan)) return { block: plan.block, outcome: 'fast_forward', sha: plan.head, upstream: plan.upstream, patch };
    next += plan.commits.length;
    return { block: plan.block, outcome: 'rebased', sha: shas[next - 1]!, upstream: plan.upstream, patch };
  });
}

/**
 * Each block's own commits — those its head has over trunk, by one walk for all — as long
 * as they are a plain line: one parent each, none shared with another block. Stops at the
 * first block that is not.
 */
async function ownCommits(repo: string, trunk: Sha, blocks: readonly StackBlock[]): Promise<Plan[]> {
  const parents = knownOwn(repo, trunk, blocks) ?? (await listedOwn(repo, trunk, blocks));
  const claimed = new Set<Sha>();
  const plans: Plan[] = [];
  for (const b of blocks) {
    const line: Sha[] = [];
    let at = b.sha;
    while (parents.has(at)) {
      const of = parents.get(at)!;
      if (of.length !== 1 || claimed.has(at)) return plans;
      line.push(at);
      at = of[0]!;
    }
    if (line.length === 0) return plans;
    for (const sha of line) claimed.add(sha);
    plans.push({
      block: b.block,
      head: b.sha,
      upstream: at,
      commits: line.reverse().map((sha) => ({ sha, author: '', message: '', changes: [] })),
    });
  }
  return plans;
}

/** `rev-list --parents ^trunk <heads>`: each commit the heads have over trunk, with its parents. */
async function listedOwn(repo: string, trunk: Sha, blocks: readonly StackBlock[]): Promise<Map<Sha, readonly Sha[]>> {
  const listed = await gitOut(repo, ['rev-list', '--parents', `^${trunk}`, ...new Set(blocks.map((b) => b.sha))]);
  keepParentLines(repo, listed);
  const parents = new Map<Sha, readonly Sha[]>();
  for (const line of listed.split('\n').filter(Boolean)) {
    const [sha, ...of] = line.split(' ');
    parents.set(sha!, of);
  }
  return parents;
}

/**
 * What `listedOwn` would list, from the parents git told before (known.ts) — the gate's
 * walk of each block's commits, and the line of commits trunk has moved by since the
 * block left it — or undefined when those do not settle it. From each head, one-parent
 * commits lead down to a commit `x` that trunk's known line reaches (or trunk itself);
 * every ancestor of trunk is then on that line or below `x`, and none of the walked
 * commits is below `x`, so the walked commits not on the line are exactly those trunk
 * lacks. Anything else — a merge, a commit not known, a walked commit on trunk's line —
 * is asked of git.
 */
function knownOwn(repo: string, trunk: Sha, blocks: readonly StackBlock[]): Map<Sha, readonly Sha[]> | undefined {
  const parents = new Map<Sha, readonly Sha[]>();
  for (const b of blocks) {
    const walked: Array<[Sha, Sha]> = [];
    let at = b.sha;
    let line = at === trunk ? new Set<Sha>() : knownLine(repo, at, trunk);
    while (line === undefined) {
      const of = knownParents(repo, at);
      if (of === undefined || of.length !== 1 || walked.length >= 1000) return undefined;
      walked.push([at, of[0]!]);
      at = of[0]!;
      line = at === trunk ? new Set<Sha>() : knownLine(repo, at, trunk);
    }
    if (walked.some(([sha]) => line.has(sha))) return undefined;
    for (const [sha, parent] of walked) parents.set(sha, [parent]);
  }
  return parents;
}

/** Author line and raw message of each commit, by one `cat-file --batch`; a commit with an `encoding` header or an odd author is left out. */
async function readCommits(repo: string, shas: readonly Sha[]): Promise<Map<Sha, { author: string; message: string }>> {
  const bodies = await commitBodies(repo, shas);
  const read = new Map<Sha, { author: string; message: string }>();
  for (const [sha, body] of bodies) {
    const split = body.indexOf('\n\n');
    const header = split < 0 ? body : body.slice(0, split);
    const author = /^author (.* <[^>\n]*> \d+ [+-]\d{4})$/m.exec(header)?.[1];
    if (author === undefined || /^encoding /m.test(header)) continue;
    read.set(sha, { author, message: split < 0 ? '' : body.slice(split + 2) });
  }
  return read;
}

/**
 * The raw content of each commit (latin1, a character a byte): by the repository's
 * long-lived `cat-file --batch` (resolver.ts), or, when it cannot read them all, by one
 * `cat-file --batch` of their own; anything but a commit is an error.
 */
async function commitBodies(repo: string, shas: readonly Sha[]): Promise<Map<Sha, string>> {
  const read = await Promise.all(shas.map((sha) => readObject(repo, sha)));
  const bodies = new Map<Sha, string>();
  shas.forEach((sha, i) => {
    const object = read[i];
    if (typeof object === 'object' && object.sha === sha && object.type === 'commit') bodies.set(sha, object.body);
  });
  if (bodies.size === shas.length) return bodies;
  bodies.clear();
  const out = (await runGitBytes(repo, ['cat-file', '--batch'], `${shas.join('\n')}\n`)).stdout;
  let at = 0;
  for (const sha of shas) {
    const eol = out.indexOf('\n', at);
    const [name, type, size] = out.slice(at, eol).split(' ');
    if (name !== sha || type !== 'commit') throw new Error(`cat-file: ${out.slice(at, eol)}`);
    bodies.set(sha, out.slice(eol + 1, eol + 1 + Number(size)));
    at = eol + 1 + Number(size) + 1;
  }
  return bodies;
}

/**
 * The changes each input line of `diff-tree --stdin` names — a commit against its parent,
 * or `<to> <from>` — keyed by that line, in one process; no rename detection.
 */
async function changes(repo: string, lines: readonly string[]): Promise<Map<string, Change[]>> {
  const args = ['diff-tree', '--stdin', '-r', '-z', '--always', '--no-renames', '--no-ext-diff', '--no-textconv'];
  const tokens = (await runGitBytes(repo, args, `${lines.join('\n')}\n`)).stdout.split('\0');
  const found = new Map<string, Change[]>();
  let line = -1;
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token === '') continue;
    if (!token.startsWith(':')) {
      line++;
      if (lines[line]?.split(' ')[0] !== token) throw new Error(`diff-tree: ${token} where ${lines[line]} was expected`);
      found.set(lines[line]!, []);
      continue;
    }
    const [, mode, , blob, status] = token.slice(1).split(' ');
    const path = tokens[++i]!;
    const command = status === 'D' ? `D ${quoted(path)}` : `M ${mode} ${blob} ${quoted(path)}`;
    found.get(lines[line]!)!.push({ path, status: status!, command });
  }
  return found;
}

function touched(list: readonly Change[]): Touched {
  const t: Touched = { paths: new Set(), dirs: new Set(), added: new Set(), deletedDirs: new Set() };
  for (const c of list) {
    t.paths.add(c.path);
    for (const d of folders(c.path)) t.dirs.add(d);
    if (c.status === 'A') t.added.add(c.path);
    if (c.status === 'D') for (const d of folders(c.path)) t.deletedDirs.add(d);
  }
  return t;
}

function merge(into: Touched, from: Touched): void {
  for (const key of ['paths', 'dirs', 'added', 'deletedDirs'] as const) for (const x of from[key]) into[key].add(x);
}

/** The folders above `path`, nearest last: `a/b/c` → `a`, `a/b`. */
function folders(path: string): string[] {
  const parts = path.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}

/** Whether two sides' changes could meet in a merge (see the header). */
function clash(a: Touched, b: Touched): boolean {
  for (const p of a.paths) {
    if (b.paths.has(p) || b.dirs.has(p)) return true;
    if (folders(p).some((d) => b.paths.has(d))) return true;
  }
  const intoDeleted = (added: Set<string>, deletedDirs: Set<string>) => [...added].some((p) => folders(p).some((d) => deletedDirs.has(d)));
  return intoDeleted(a.added, b.deletedDirs) || intoDeleted(b.added, a.deletedDirs);
}

/** A path as fast-import reads it: C-quoted when it starts with a quote or holds a control character. */
function quoted(path: string): string {
  if (!/^"|[\0-\x1f\x7f]/.test(path)) return path;
  const escaped = path
    .replace(/[\\"]/g, (c) => `\\${c}`)
    .replace(/[\0-\x1f\x7f]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  return `"${escaped}"`;
}

/** Writes the plans' commits, each on the one before and the first on `onto`, in one fast-import; returns their shas in order. */
async function fastImport(repo: string, onto: Sha, plans: readonly Plan[]): Promise<Sha[]> {
  const committer = `tron <tron@localhost> ${Math.floor(Date.now() / 1000)} +0000`;
  const stream: string[] = [];
  let mark = 0;
  for (const c of plans.flatMap((p) => p.commits)) {
    const from = mark === 0 ? onto : `:${mark}`;
    mark++;
    stream.push(
      `commit ${SCRATCH_REF}\nmark :${mark}\nauthor ${c.author}\ncommitter ${committer}\ndata ${c.message.length}\n${c.message}\nfrom ${from}\n`,
      ...c.changes.map((x) => `${x.command}\n`),
      `\nget-mark :${mark}\n`,
    );
  }
  stream.push(`reset ${SCRATCH_REF}\nfrom ${'0'.repeat(onto.length)}\n\ndone\n`);
  const made = await runGitBytes(repo, ['fast-import', '--quiet', '--done'], stream.join(''));
  const shas = made.stdout.split('\n').filter(Boolean);
  if (made.exitCode !== 0 || shas.length !== mark) throw new Error(`fast-import: ${made.stderr.trim()}`);
  shas.forEach((sha, i) => {
    keepParents(repo, sha, [i === 0 ? onto : shas[i - 1]!]);
  });
  return shas;
}

/** The patch id of each plan's whole change (upstream to head), by one diff and one patch-id, as query.ts's patchId computes it. */
async function patchIds(repo: string, plans: readonly Plan[]): Promise<Map<Sha, string>> {
  // Each told before (the gate's, most often: known.ts), or all asked.
  const known = new Map(plans.map((p) => [p.head, knownPatch(repo, p.upstream, p.head)] as const));
  if ([...known.values()].every((id) => id !== undefined)) return known as Map<Sha, string>;
  const diff = await gitOut(
    repo,
    ['diff-tree', '--stdin', '-p', ...DIFF_FLAGS],
    `${plans.map((p) => `${p.head} ${p.upstream}`).join('\n')}\n`,
  );
  const ids = new Map<Sha, string>();
  if (diff.trim() === '') return ids;
  for (const line of (await gitOut(repo, ['patch-id', '--stable'], `${diff}\n`)).split('\n')) {
    const [patch, head] = line.split(' ');
    if (patch && head) ids.set(head, patch);
  }
  for (const p of plans) keepPatch(repo, p.upstream, p.head, ids.get(p.head) ?? '');
  return ids;
}
