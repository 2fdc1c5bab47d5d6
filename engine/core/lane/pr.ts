/**
 * PR mode (`[forge] land = "pr"`; DESIGN §3): a stack tron tested green does not land yet.
 * `pr.requested` pushes each block's branch and opens (or finds and updates) its one pull
 * request; what the forge says comes back as `pr.observed`, decided here, purely:
 *
 * - a pull request a person closed: the block is abandoned, with their words;
 * - changes requested by a person on the pushed head: back to build, with their notes;
 * - a required hosted check red on the sha: back to build, with the check's own words;
 * - a check still running or not reported yet, or (`require_human_approval`) no approving
 *   review yet: `pr.wait`, then ask again — a check that never reports, after `[forge]
 *   retries` asks, pages the operator;
 * - every required check green on exactly that sha (and approved when asked): `land.intent`,
 *   the same landing as without a forge.
 *
 * Invariant, enforced here: in PR mode trunk moves only to a sha that tron's own hermetic
 * test found green (the lane's rule, which chose the sha) AND whose required hosted checks
 * the forge reported green — never past a red, pending or missing check.
 *
 * With `[forge] merge = "queue"`, green does not land by itself: the pull request is put in
 * the forge's merge queue at exactly that sha (`pr.requested` with `queue: "enqueue"`),
 * and tron watches it there (`queue: "watch"`) — queued is never merged (GitHub's `gh pr
 * merge` exits 0 when it only queued). The block lands only once the queue merged it AND
 * the remote's trunk holds the queue's commit AND that commit's tree is exactly the tree
 * tron tested, on the trunk tron tested on (`land.intent` with `queued`: only the landed
 * refs are pushed then). A commit of another tree pages the operator (TRON_FORGE_QUEUE);
 * a queue that takes the pull request out sends the block back to build with its reason.
 *
 * A failed call (`pr.failed`) waits as long as a rate limit asks, or a doubling backoff for
 * a 5xx, as `pr.wait` — a timer event, so replay holds; a refused token pages the operator.
 */
import type { BodyOf } from '../events.ts';
import type { ForgeWait, Stack } from '../state.ts';
import type { Step } from '../decide/step.ts';
import { abandon } from '../decide/escalate.ts';
import { backToBuild, close, pageAndPark } from './lane.ts';

/** The longest wait between two asks of the forge. */
const MAX_WAIT_MS = 60_000;

/** A stack that waits on the forge, and what it waits with. */
type AtForge = { stack: Stack; pr: ForgeWait };

/** Stack `id`, if it is the one in flight and waits on the forge. */
function atForge(step: Step, id: number): AtForge | undefined {
  const stack = step.s.lane.stack;
  return stack?.id === id && stack.step.at === 'forge' ? { stack, pr: stack.step.pr } : undefined;
}

export function onPrObserved(step: Step, e: BodyOf<'pr.observed'>): void {
  const at = atForge(step, e.stack);
  if (!at || at.pr.sha !== e.sha) return;
  const { stack, pr } = at;
  const queue = step.s.lane.pr?.queue === true;
  // Trunk moved through the queue: that is the truth, whatever else was said since.
  if (queue && e.queue?.state === 'merged') {
    landFromQueue(step, at, e);
    return;
  }
  const closed = e.pulls.filter((p) => p.state === 'closed');
  if (closed.length > 0) {
    for (const p of closed) {
      const words = p.words ? `, saying: ${p.words}` : ', without a comment';
      abandon(step, p.block, `a person closed its pull request #${p.number} (${p.url})${words}`);
    }
    close(step, `pull request closed on the forge: ${closed.map((p) => p.block).join(', ')} abandoned`);
    return;
  }
  if (e.changes.length > 0) {
    for (const c of e.changes)
      sendBack(step, at, c.block, 'changes_requested', `${c.author} requested changes on the pull request: ${c.notes}`);
    close(step, `changes requested on the forge for ${e.changes.map((c) => c.block).join(', ')}`);
    return;
  }
  const red = e.checks.filter((c) => c.state === 'failure');
  if (red.length > 0) {
    // One block a stack in PR mode: the top is the block whose pull request the checks ran on.
    const said = red
      .map((c) => `${c.name} failed on ${e.sha.slice(0, 12)}${c.url ? ` (${c.url})` : ''}:\n${c.text ?? '(no output)'}`)
      .join('\n\n');
    sendBack(step, at, pr.blocks.at(-1)!.block, 'hosted_checks', `a required hosted check is red on the pull request:\n${said}`);
    close(step, `required hosted check red on ${e.sha.slice(0, 12)}: ${red.map((c) => c.name).join(', ')}`);
    return;
  }
  const missing = e.checks.filter((c) => c.state === 'missing');
  const retries = step.s.lane.pr?.retries ?? 0;
  if (missing.length > 0 && pr.missing > retries) {
    const detail = `TRON_FORGE_CHECKS: the required check(s) ${missing.map((c) => c.name).join(', ')} never reported on ${e.sha} after ${pr.missing} asks; nothing lands past a missing check. Make the check run on pull requests from tron/* branches (or correct [forge] required_checks), then answer.`;
    refuse(step, pr, detail);
    return;
  }
  const waiting = [...missing, ...e.checks.filter((c) => c.state === 'pending')].map((c) => `${c.name} ${c.state}`);
  const unapproved = step.s.lane.pr?.requireApproval ? pr.blocks.filter((b) => !e.approved.includes(b.block)).map((b) => b.block) : [];
  if (unapproved.length > 0) waiting.push(`waiting for an approving review of ${unapproved.join(', ')}`);
  if (waiting.length > 0) {
    wait(step, e.stack, e.attempt, backoff(step, e.attempt), waiting.join('; '));
    return;
  }
  if (queue) {
    inQueue(step, at, e);
    return;
  }
  step.emit({ type: 'land.intent', stack: stack.id, sha: pr.sha, from: step.s.trunkSha!, blocks: [...pr.blocks], tested: pr.tested });
}

/** Every check green on the sha (queue mode): put it in the merge queue, or watch it there. */
function inQueue(step: Step, at: AtForge, e: BodyOf<'pr.observed'>): void {
  if (!e.queue) {
    ask(step, at, e.attempt + 1, 'enqueue');
    return;
  }
  if (e.queue.state === 'queued') {
    wait(step, e.stack, e.attempt, backoff(step, e.attempt), 'in the merge queue');
    return;
  }
  const block = at.pr.blocks.at(-1)!.block;
  sendBack(step, at, block, 'merge_queue', `the merge queue took the pull request out: ${e.queue.reason ?? '(no reason given)'}`);
  close(step, `the merge queue removed ${block}: ${e.queue.reason ?? 'no reason given'}`);
}

/** The queue merged it: land what trunk now holds — only if it is exactly the tree tron tested. */
function landFromQueue(step: Step, { stack, pr }: AtForge, e: BodyOf<'pr.observed'>): void {
  const commit = e.queue!.commit!;
  if (e.queue!.tree !== true) {
    const detail = `TRON_FORGE_QUEUE: the merge queue moved ${step.s.trunk} on the forge to ${commit}, which is not exactly the tree tron tested (${pr.sha}) on ${step.s.trunkSha}; nothing is recorded as landed. See what else the queue merged with it (or which merge method it used), then answer.`;
    refuse(step, pr, detail);
    return;
  }
  // The block's landed ref marks the queue's commit: what brought it onto trunk's first-parent line,
  // the line recovery believes a landing on (its own commit is that commit's second parent).
  const blocks = pr.blocks.map((b) => ({ block: b.block, sha: commit }));
  step.emit({ type: 'land.intent', stack: stack.id, sha: commit, from: step.s.trunkSha!, blocks, tested: pr.tested, queued: true });
}

export function onPrFailed(step: Step, e: BodyOf<'pr.failed'>): void {
  const pr = atForge(step, e.stack)?.pr;
  if (!pr) return;
  if (e.kind === 'rate_limited') {
    wait(step, e.stack, e.attempt, e.wait_ms ?? backoff(step, 1), `rate limited: ${e.message}`);
    return;
  }
  if (e.kind === 'transient' && pr.failures <= (step.s.lane.pr?.retries ?? 0)) {
    wait(step, e.stack, e.attempt, backoff(step, pr.failures), `the forge failed: ${e.message}`);
    return;
  }
  const code = e.kind === 'auth' ? 'TRON_FORGE_AUTH' : 'TRON_FORGE_UNREACHABLE';
  refuse(step, pr, `${code}: the forge refused the landing of ${pr.blocks.map((b) => b.block).join(', ')} (${e.kind}): ${e.message}`);
}

/** The wait passed: ask the forge again about the same landing. */
export function onPrWaited(step: Step, e: BodyOf<'pr.waited'>): void {
  const at = atForge(step, e.stack);
  if (at) ask(step, at, e.attempt + 1, at.pr.queued ? 'watch' : undefined);
}

/** Asks the forge about the same landing again (its `attempt`th ask); `queue`: into the merge queue, or how it stands there. */
function ask(step: Step, { stack, pr }: AtForge, attempt: number, queue?: 'enqueue' | 'watch'): void {
  step.emit({
    type: 'pr.requested',
    stack: stack.id,
    sha: pr.sha,
    blocks: [...pr.blocks],
    tested: pr.tested,
    attempt,
    ...(queue && { queue }),
  });
}

/** Waits `ms` before the forge is asked again (`pr.waited`), saying why. */
function wait(step: Step, stack: number, attempt: number, ms: number, reason: string): void {
  step.emit({ type: 'pr.wait', stack, attempt, wait_ms: ms, reason });
}

function backoff(step: Step, n: number): number {
  const base = step.s.lane.pr?.backoffMs ?? 1000;
  return Math.min(MAX_WAIT_MS, base * 2 ** Math.min(Math.max(0, n - 1), 16));
}

/** A person's or a hosted check's word sends block `id` back to build, at the sha it was stacked at. */
function sendBack(step: Step, { stack, pr }: AtForge, id: string, fact: string, evidence: string): void {
  const entry = stack.entries.find((x) => x.block === id) ?? pr.blocks.find((x) => x.block === id)!;
  backToBuild(step, id, entry.sha, { name: fact, ok: false, evidence });
}

/** The forge will not let this landing through by itself: page the operator about its top block, halt the lane, land nothing. */
function refuse(step: Step, pr: ForgeWait, detail: string): void {
  pageAndPark(step, pr.blocks.at(-1)!.block, 'remote_refused', detail);
  close(step, 'the forge refused the landing; nothing landed');
}
