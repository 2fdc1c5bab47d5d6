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
import type { BodyOf, Fact } from '../events.ts';
import type { ForgeWait, Stack } from '../state.ts';
import { dispatch, type Step } from '../decide/step.ts';
import { abandon, escalate } from '../decide/escalate.ts';
import { close } from './lane.ts';

/** The longest wait between two asks of the forge. */
const MAX_WAIT_MS = 60_000;

/** The stack `id` when it waits on the forge, and what it waits with. */
function atForge(step: Step, id: number): { stack: Stack; pr: ForgeWait } | undefined {
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
    landFromQueue(step, stack, pr, e);
    return;
  }
  const closed = e.pulls.filter((p) => p.state === 'closed');
  if (closed.length > 0) {
    for (const p of closed)
      abandon(
        step,
        p.block,
        `a person closed its pull request #${p.number} (${p.url})${p.words ? `, saying: ${p.words}` : ', without a comment'}`,
      );
    close(step, `pull request closed on the forge: ${closed.map((p) => p.block).join(', ')} abandoned`);
    return;
  }
  if (e.changes.length > 0) {
    for (const c of e.changes)
      backToBuild(step, stack, pr, c.block, {
        name: 'changes_requested',
        ok: false,
        evidence: `${c.author} requested changes on the pull request: ${c.notes}`,
      });
    close(step, `changes requested on the forge for ${e.changes.map((c) => c.block).join(', ')}`);
    return;
  }
  const red = e.checks.filter((c) => c.state === 'failure');
  if (red.length > 0) {
    // One block a stack in PR mode: the top is the block whose pull request the checks ran on.
    const top = pr.blocks.at(-1)!;
    const said = red
      .map((c) => `${c.name} failed on ${e.sha.slice(0, 12)}${c.url ? ` (${c.url})` : ''}:\n${c.text ?? '(no output)'}`)
      .join('\n\n');
    backToBuild(step, stack, pr, top.block, {
      name: 'hosted_checks',
      ok: false,
      evidence: `a required hosted check is red on the pull request:\n${said}`,
    });
    close(step, `required hosted check red on ${e.sha.slice(0, 12)}: ${red.map((c) => c.name).join(', ')}`);
    return;
  }
  const missing = e.checks.filter((c) => c.state === 'missing');
  const retries = step.s.lane.pr?.retries ?? 0;
  if (missing.length > 0 && pr.missing > retries) {
    const id = pr.blocks.at(-1)!.block;
    const detail = `TRON_FORGE_CHECKS: the required check(s) ${missing.map((c) => c.name).join(', ')} never reported on ${e.sha} after ${pr.missing} asks; nothing lands past a missing check. Make the check run on pull requests from tron/* branches (or correct [forge] required_checks), then answer.`;
    refuse(step, id, detail);
    return;
  }
  const waiting = [...missing, ...e.checks.filter((c) => c.state === 'pending')].map((c) => `${c.name} ${c.state}`);
  const unapproved = step.s.lane.pr?.requireApproval ? pr.blocks.filter((b) => !e.approved.includes(b.block)).map((b) => b.block) : [];
  if (waiting.length > 0 || unapproved.length > 0) {
    const reason = [...waiting, ...(unapproved.length > 0 ? [`waiting for an approving review of ${unapproved.join(', ')}`] : [])].join(
      '; ',
    );
    step.emit({ type: 'pr.wait', stack: stack.id, attempt: e.attempt, wait_ms: backoff(step, e.attempt), reason });
    return;
  }
  if (queue) {
    inQueue(step, stack, pr, e);
    return;
  }
  step.emit({ type: 'land.intent', stack: stack.id, sha: pr.sha, from: step.s.trunkSha!, blocks: [...pr.blocks], tested: pr.tested });
}

/** Every check green on the sha (queue mode): put it in the merge queue, or watch it there. */
function inQueue(step: Step, stack: Stack, pr: ForgeWait, e: BodyOf<'pr.observed'>): void {
  if (!e.queue) {
    step.emit({
      type: 'pr.requested',
      stack: stack.id,
      sha: pr.sha,
      blocks: [...pr.blocks],
      tested: pr.tested,
      attempt: e.attempt + 1,
      queue: 'enqueue',
    });
    return;
  }
  if (e.queue.state === 'queued') {
    step.emit({ type: 'pr.wait', stack: stack.id, attempt: e.attempt, wait_ms: backoff(step, e.attempt), reason: 'in the merge queue' });
    return;
  }
  const top = pr.blocks.at(-1)!.block;
  backToBuild(step, stack, pr, top, {
    name: 'merge_queue',
    ok: false,
    evidence: `the merge queue took the pull request out: ${e.queue.reason ?? '(no reason given)'}`,
  });
  close(step, `the merge queue removed ${top}: ${e.queue.reason ?? 'no reason given'}`);
}

/** The queue merged it: land what trunk now holds — only if it is exactly the tree tron tested. */
function landFromQueue(step: Step, stack: Stack, pr: ForgeWait, e: BodyOf<'pr.observed'>): void {
  const commit = e.queue!.commit!;
  if (e.queue!.tree !== true) {
    const detail = `TRON_FORGE_QUEUE: the merge queue moved ${step.s.trunk} on the forge to ${commit}, which is not exactly the tree tron tested (${pr.sha}) on ${step.s.trunkSha}; nothing is recorded as landed. See what else the queue merged with it (or which merge method it used), then answer.`;
    refuse(step, pr.blocks.at(-1)!.block, detail);
    return;
  }
  // The block's landed ref marks the queue's commit: what brought it onto trunk's first-parent line,
  // the line recovery believes a landing on (its own commit is that commit's second parent).
  step.emit({
    type: 'land.intent',
    stack: stack.id,
    sha: commit,
    from: step.s.trunkSha!,
    blocks: pr.blocks.map((b) => ({ block: b.block, sha: commit })),
    tested: pr.tested,
    queued: true,
  });
}

export function onPrFailed(step: Step, e: BodyOf<'pr.failed'>): void {
  const at = atForge(step, e.stack);
  if (!at) return;
  const { stack, pr } = at;
  const id = pr.blocks.at(-1)!.block;
  if (e.kind === 'rate_limited') {
    step.emit({
      type: 'pr.wait',
      stack: stack.id,
      attempt: e.attempt,
      wait_ms: e.wait_ms ?? backoff(step, 1),
      reason: `rate limited: ${e.message}`,
    });
    return;
  }
  if (e.kind === 'transient' && pr.failures <= (step.s.lane.pr?.retries ?? 0)) {
    step.emit({
      type: 'pr.wait',
      stack: stack.id,
      attempt: e.attempt,
      wait_ms: backoff(step, pr.failures),
      reason: `the forge failed: ${e.message}`,
    });
    return;
  }
  const code = e.kind === 'auth' ? 'TRON_FORGE_AUTH' : 'TRON_FORGE_UNREACHABLE';
  refuse(step, id, `${code}: the forge refused the landing of ${pr.blocks.map((b) => b.block).join(', ')} (${e.kind}): ${e.message}`);
}

/** The wait passed: ask the forge again about the same landing. */
export function onPrWaited(step: Step, e: BodyOf<'pr.waited'>): void {
  const at = atForge(step, e.stack);
  if (!at) return;
  const { stack, pr } = at;
  step.emit({
    type: 'pr.requested',
    stack: stack.id,
    sha: pr.sha,
    blocks: [...pr.blocks],
    tested: pr.tested,
    attempt: e.attempt + 1,
    ...(pr.queued && { queue: 'watch' as const }),
  });
}

function backoff(step: Step, n: number): number {
  const base = step.s.lane.pr?.backoffMs ?? 1000;
  return Math.min(MAX_WAIT_MS, base * 2 ** Math.min(Math.max(0, n - 1), 16));
}

/** A person's or a hosted check's word sends the block back to build, within its build budget. */
function backToBuild(step: Step, stack: Stack, pr: ForgeWait, id: string, fact: Fact): void {
  const entry = stack.entries.find((x) => x.block === id) ?? pr.blocks.find((x) => x.block === id)!;
  step.emit({ type: 'gate.failed', block: id, sha: entry.sha, purpose: 'lane', facts: [fact] });
  const b = step.block(id);
  if (b.rounds.build >= step.budget('build')) {
    escalate(step, id, 'gate_budget', `the gate failed ${b.rounds.build} times:\n${b.feedback}`);
    return;
  }
  step.move(id, 'culprit');
  dispatch(step, id, 'build');
}

/** The forge will not let this landing through by itself: page the operator, halt the lane, land nothing. */
function refuse(step: Step, id: string, detail: string): void {
  step.emit({ type: 'escalation.raised', block: id, trouble: 'remote_refused', handler: 'operator', detail });
  step.emit({ type: 'block.parked', block: id, reason: detail });
  close(step, 'the forge refused the landing; nothing landed');
}
