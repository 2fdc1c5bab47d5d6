/**
 * PR mode's effects (`[forge] land = "pr"`; the decisions are engine/core/lane/pr.ts):
 *
 * - `pr.requested`: push `tron/<id>` at each block's commit of the landing (tron's own
 *   namespace on the remote, moved by lease against what `ls-remote` showed a moment
 *   before), open or find-and-update the block's one pull request (found by its head
 *   branch first: never two), then read the required checks on the landing's sha, the
 *   reviews, and who closed what — one `pr.observed`, or `pr.failed` with the forge's
 *   words and the wait it asked for.
 * - `pr.wait`: the wait; `pr.waited` brings the decision back.
 *
 * Every call here is a read or idempotent by lookup, so a crash at any instant, and the
 * same request run again after a restart, never opens a second pull request.
 */
import type { EventBody, EventOf } from '../../core/events.ts';
import { type Forge, ForgeError, type ForgePull, isOwnComment, upsertPull } from '../../forge/forge.ts';
import { watchWake } from '../../forge/wake.ts';
import { isAncestor } from '../../git/index.ts';
import { fetchTrunk, pushBranches, readRemote } from '../../git/remote.ts';
import { runGit } from '../../git/run.ts';
import { effect, type EffectContext, errorLine, type Moment } from './context.ts';

/** What a pull request says of its block. */
interface PullText {
  block: string;
  title: string;
  body: string;
}

export interface PrRequest {
  decision: EventOf<'pr.requested'>;
  texts: PullText[];
  /** Trunk when the decision was made: what the landing was tested on (the merge queue's commit must sit on it). */
  trunk?: string;
}

/** The pull request's text: the brief, the criteria with the builder's evidence, the reviewer's notes, the run. */
function pullText(id: string, at: Moment, runId: string): PullText {
  const b = at.blocks.get(id);
  const s = at.state.blocks.get(id);
  let evidence: Record<string, unknown> = {};
  let notes = '';
  for (const e of at.history) {
    if (e.type !== 'reply.accepted' || e.block !== id) continue;
    if (e.word === 'CONFIRMED') evidence = (e.payload.evidence as Record<string, unknown>) ?? {};
    if (e.word === 'APPROVE' && typeof e.payload.notes === 'string') notes = e.payload.notes;
  }
  const criteria = (s?.info.criteria ?? b?.criteria ?? []).map((c, i) => {
    const said = evidence[`c${i + 1}`];
    return `- [x] ${c}${typeof said === 'string' ? `\n  — ${said.split('\n').join('\n    ')}` : ''}`;
  });
  const issue = b?.file.includes('://') ? `\n\nCloses ${b.file}` : '';
  return {
    block: id,
    title: s?.info.title ?? b?.title ?? id,
    body: [
      b?.brief ?? '',
      '',
      '### Criteria, with the builder’s evidence',
      '',
      ...criteria,
      '',
      '### The reviewer’s notes',
      '',
      notes || '(approved without notes)',
      '',
      `---\nBlock \`${id}\`, tron run \`${runId}\`. tron lands this when its own hermetic test and the required checks are green on the same sha; do not merge it by hand.${issue}`,
    ].join('\n'),
  };
}

export const askForge = effect({
  request: (e: EventOf<'pr.requested'>, at: Moment): PrRequest => {
    const run = at.history.find((h) => h.type === 'run.started');
    const runId = run?.type === 'run.started' ? run.run : '';
    return {
      decision: e,
      texts: e.blocks.map((b) => pullText(b.block, at, runId)),
      ...(at.state.trunkSha && { trunk: at.state.trunkSha }),
    };
  },
  run: async (c, r: PrRequest): Promise<EventBody> => {
    const e = r.decision;
    const failed = (kind: 'rate_limited' | 'transient' | 'auth' | 'refused', message: string, wait?: number): EventBody => ({
      type: 'pr.failed',
      stack: e.stack,
      attempt: e.attempt,
      kind,
      ...(wait !== undefined && { wait_ms: Math.round(wait) }),
      message,
    });
    if (!c.forge || !c.remote) return failed('refused', 'land = "pr" needs [forge] and [remote]; one is missing in this run');
    const seen = await readRemote(c.repo, c.remote);
    if (!seen.ok) return failed(seen.kind === 'transient' ? 'transient' : 'refused', seen.message);
    // In the merge queue the branch is the queue's to keep (GitHub may delete it once merged): pushed no more.
    const moves = e.queue === 'watch' ? [] : e.blocks.filter((b) => seen.refs.branches.get(b.block) !== b.sha);
    const pushed = await pushBranches(
      c.repo,
      c.remote,
      moves.map((b) => ({ id: b.block, sha: b.sha, expected: seen.refs.branches.get(b.block) })),
    );
    if (!pushed.ok) return failed(pushed.kind === 'transient' || pushed.kind === 'moved' ? 'transient' : 'refused', pushed.message);
    try {
      return await observe(c, c.forge, r);
    } catch (err) {
      const fe = err instanceof ForgeError ? err : new ForgeError('transient', errorLine(err));
      return failed(fe.kind, fe.message, fe.retryAfterMs);
    }
  },
  onFailure: (r: PrRequest, error: Error): EventBody => ({
    type: 'pr.failed',
    stack: r.decision.stack,
    attempt: r.decision.attempt,
    kind: 'transient',
    message: errorLine(error),
  }),
});

async function observe(c: EffectContext, forge: Forge, r: PrRequest): Promise<EventBody> {
  const e = r.decision;
  const trunk = c.config.trunk;
  const pulls: { block: string; pull: ForgePull; words?: string }[] = [];
  for (const t of r.texts) {
    const { pull } = await upsertPull(forge, { head: `tron/${t.block}`, base: trunk, title: t.title, body: t.body });
    let words: string | undefined;
    if (pull.state === 'closed' && !pull.merged) {
      const self = await forge.self();
      const said = (await (forge.pullComments ? forge.pullComments(pull.number) : forge.comments(pull.number)))
        .filter((x) => !isOwnComment(x, self))
        .at(-1);
      if (said) words = `${said.author}: ${said.body.trim().slice(0, 2000)}`;
    }
    pulls.push({ block: t.block, pull, ...(words !== undefined && { words }) });
  }
  const required = c.config.forge?.requiredChecks ?? (await forge.requiredChecks(trunk));
  const checks = required.length > 0 ? await forge.checks(e.sha, required) : [];
  const changes: { block: string; author: string; notes: string }[] = [];
  const approved: string[] = [];
  for (const p of pulls) {
    if (p.pull.state !== 'open') continue;
    const head = e.blocks.find((b) => b.block === p.block)!.sha;
    const latest = new Map<string, { state: string; body: string; sha: string }>();
    for (const v of await forge.reviews(p.pull.number)) if (v.state !== 'COMMENTED' && v.state !== 'PENDING') latest.set(v.author, v);
    for (const [author, v] of latest)
      if (v.state === 'CHANGES_REQUESTED' && v.sha === head) changes.push({ block: p.block, author, notes: v.body || '(no notes)' });
    if ([...latest.values()].some((v) => v.state === 'APPROVED')) approved.push(p.block);
  }
  const queue = e.queue ? await observeQueue(c, forge, r, pulls.at(-1)!.pull) : undefined;
  return {
    type: 'pr.observed',
    stack: e.stack,
    sha: e.sha,
    attempt: e.attempt,
    ...(queue && { queue }),
    pulls: pulls.map((p) => ({
      block: p.block,
      number: p.pull.number,
      url: p.pull.url,
      state: p.pull.merged ? 'merged' : p.pull.state,
      ...(p.words !== undefined && { words: p.words }),
    })),
    checks: checks.map((k) => ({
      name: k.name,
      state: k.state,
      ...(k.text !== undefined && { text: trimOutput(k.text) }),
      ...(k.url !== undefined && { url: k.url }),
    })),
    changes,
    approved,
  };
}

/**
 * [forge] merge = "queue": enqueues the pull request at exactly the tested head when the
 * decision says so (unless the queue has it already, or merged it: a retry or a restart
 * enqueues once), and reads where it is. Merged counts only when the remote's trunk holds
 * the queue's commit — the forge's word alone is not trunk — and says whether that commit
 * is exactly the tested tree on the tested trunk.
 */
async function observeQueue(
  c: EffectContext,
  forge: Forge,
  r: PrRequest,
  pull: ForgePull,
): Promise<NonNullable<EventOf<'pr.observed'>['queue']>> {
  const e = r.decision;
  let q = await forge.queueState(pull.number);
  if (e.queue === 'enqueue' && (q.state === 'none' || q.state === 'removed') && pull.state === 'open') {
    await forge.enqueue(pull, e.blocks.at(-1)!.sha);
    q = await forge.queueState(pull.number);
  }
  if (q.state === 'queued') return { state: 'queued' };
  if (q.state !== 'merged') return { state: 'removed', reason: q.state === 'removed' ? q.reason : 'no longer in the merge queue' };
  const fetched = await fetchTrunk(c.repo, c.remote!);
  if (!fetched.ok) throw new ForgeError(fetched.kind === 'transient' ? 'transient' : 'refused', fetched.message);
  const trunk = fetched.sha;
  const onTrunk = trunk !== undefined && (trunk === q.commit || (await isAncestor(c.repo, q.commit, trunk)));
  // The forge says merged before its trunk shows it: not landed yet, asked again.
  if (!onTrunk) return { state: 'queued' };
  const tree = async (rev: string) => (await runGit(c.repo, ['rev-parse', '--verify', '--quiet', `${rev}^{tree}`])).stdout.trim();
  const parent = (await runGit(c.repo, ['rev-parse', '--verify', '--quiet', `${q.commit}^1`])).stdout.trim();
  // The block's own commit on trunk too (the queue's merge method "merge"): a squash or a rebase is another history.
  const exact =
    (await tree(q.commit)) === (await tree(e.sha)) &&
    r.trunk !== undefined &&
    parent === r.trunk &&
    (await isAncestor(c.repo, e.sha, q.commit));
  return { state: 'merged', commit: q.commit, tree: exact };
}

/** A check's output as the builder is told it: its last 60 lines, at most 8 KB. */
function trimOutput(text: string): string {
  const lines = text.trimEnd().split('\n');
  const tail = lines.slice(-60).join('\n');
  const cut = tail.length > 8192 ? tail.slice(-8192) : tail;
  return lines.length > 60 || tail.length > 8192 ? `…\n${cut}` : cut;
}

/**
 * The wait before the forge is asked again: the decision said how long; the input says it
 * passed. A webhook `tron serve` received (engine/forge/wake.ts) ends a wait for checks,
 * reviews or the merge queue at once — the input is the same, only sooner; a rate limit's
 * or a failure's wait is kept whole.
 */
export const waitForge = effect({
  run: (c, e: EventOf<'pr.wait'>) =>
    new Promise<EventBody>((resolve) => {
      const done = () => {
        cancel();
        woken?.close();
        resolve({ type: 'pr.waited', stack: e.stack, attempt: e.attempt });
      };
      const cancel = c.clock.after(e.wait_ms, done);
      const woken = /^(rate limited|the forge failed)/.test(e.reason) ? undefined : watchWake(c.repo, done);
    }),
});
