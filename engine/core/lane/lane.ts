/**
 * The merge lane. Approved blocks queue; when the lane is free, the first `[merge] batch`
 * of them become one stack on trunk: the engine replays each block's own commits onto the
 * one before (lane.stacked → rebase.done), tests the top in a clean checkout of exactly
 * that sha (candidate.requested → candidate.tested), and lands the whole stack in one ref
 * transaction (land.intent → block.landed). A red stack is bisected over its prefixes
 * (bisect.step): the green prefix lands, the first block whose addition turned it red goes
 * back to build with the output, the blocks after it go back to the queue. A rebase that
 * conflicts with trunk asks the builder (a merge turn); one that changed the patch goes
 * back to review. Nothing below a stack's top was tested on its own; the top was.
 *
 * Invariant, enforced here: trunk only ever moves to a sha whose tree passed setup and the
 * tests in the engine's own checkout of exactly that sha — every land.intent names a top
 * that a candidate.tested found green (for a bisected stack, the green prefix's top), or
 * a block's own head that its gate found green and that sits on trunk as it is (then the
 * candidate test would repeat that very run, and is skipped).
 */
import type { BodyOf, Fact } from '../events.ts';
import type { BlockState, Stack, StackStep } from '../state.ts';
import { approaching } from '../block-index.ts';
import { dispatch, type Step, wrapSummary } from '../decide/step.ts';
import { escalate } from '../decide/escalate.ts';
import { runOutput } from '../test-output.ts';

/**
 * From schedule, after every input: a free lane takes the first blocks of its queue as one
 * stack. With [merge] gather, while the queue is short of a batch it first waits for the
 * blocks on their way (gate or review under way: `approaching`) — one test for all of
 * them instead of a stack each; each of those inputs brings the lane back here. With
 * [merge] speculate it waits only while one of them is in its gate: once each is being
 * challenged or reviewed, they are stacked behind the queue at the shas being judged — the
 * stack gather would have waited to form — and it is rebased and tested while their turns
 * run (`settleStack`). A block that comes on its way later is not waited for.
 */
export function stackNext(step: Step): void {
  const s = step.s;
  if (s.lane.stack || s.trunkHalt !== undefined || s.lane.queue.length === 0) return;
  let early: StackedBlock[] = [];
  if (s.lane.gather && s.lane.queue.length < s.lane.batch && s.index.approaching > 0) {
    const judged = s.lane.speculate ? beingJudged(step) : undefined;
    if (!judged) return;
    early = judged;
  }
  const queued = s.lane.queue.slice(0, s.lane.batch).map((id): StackedBlock => {
    const b = step.block(id);
    return { block: id, sha: b.attested!, ...(b.patchId !== undefined ? { patch_id: b.patchId } : {}) };
  });
  const blocks = [...queued, ...early].slice(0, s.lane.batch);
  const awaiting = blocks.slice(queued.length).map((x) => x.block);
  step.emit({ type: 'lane.stacked', stack: s.lane.stacks + 1, trunk_sha: s.trunkSha!, blocks, ...(awaiting.length > 0 && { awaiting }) });
}

type StackedBlock = BodyOf<'lane.stacked'>['blocks'][number];

/** The blocks on their way, in register order, each at the sha being judged; undefined while one of them is still in its gate. */
function beingJudged(step: Step): StackedBlock[] | undefined {
  const out: StackedBlock[] = [];
  for (const id of step.s.index.onTheirWay.values()) {
    const b = step.block(id);
    const sha = judgedAt(b);
    if (sha === undefined) return undefined;
    const patchId = b.attested === sha ? b.patchId : b.observed?.head === sha ? b.observed.patch_id : undefined;
    out.push({ block: id, sha, ...(patchId !== undefined ? { patch_id: patchId } : {}) });
  }
  return out;
}

/** The sha whose verdict a block's turn will give: its challenge's (the facts' head) or its review's; undefined for any other turn. */
function judgedAt(b: BlockState): string | undefined {
  if (!approaching(b) || b.waiting.on !== 'turn') return undefined;
  const turn = b.waiting.turn;
  const kind = turn.kind === 'restate' ? turn.restating : turn.kind;
  return kind === 'challenge' ? b.challenged : kind === 'review' ? b.attested : undefined;
}

/** A speculative stack's blocks still awaiting their verdict — those the rebase kept (all of them until it reports). */
function unapproved(stack: Stack): readonly { block: string; sha: string }[] {
  const awaiting = stack.awaiting ?? [];
  return stack.entries.length === 0 ? awaiting : awaiting.filter((a) => stack.entries.some((x) => x.block === a.block));
}

/**
 * Why the stack cannot land, if it cannot: a block of it abandoned since it was stacked
 * (withdrawn on the forge), or one stacked before its verdict and no longer being judged
 * at the sha stacked.
 */
function givenUp(step: Step, stack: Stack): string | undefined {
  const blocks = stack.entries.length > 0 ? stack.entries.map((x) => x.block) : stack.asked;
  const abandoned = blocks.find((id) => step.block(id).phase === 'abandoned');
  if (abandoned) return `${abandoned} was abandoned; the stack was given up`;
  const gone = unapproved(stack).find((a) => judgedAt(step.block(a.block)) !== a.sha);
  return gone && `${gone.block} was stacked before its verdict and not approved at ${gone.sha.slice(0, 12)}; the stack was given up`;
}

/**
 * From schedule, after every input: what a stack waits for between its effects. While its
 * rebase or test runs nothing is decided — that effect owns `_lane`, and the next stack
 * must not start there under it. Then a stack holding a block abandoned meanwhile is given
 * up, the others going back to the front of the queue. A stack formed before its blocks'
 * verdicts ([merge] speculate) is given up the same way by a block not approved at the sha
 * stacked (sent back, its review asked for changes, parked, or its challenge brought new
 * commits), and the next stack is formed without it. Once every block is approved, the
 * stack goes on where it waited — lands, bisects, or (a lone block on trunk as it is)
 * lands as its gate tested it.
 */
export function settleStack(step: Step): void {
  const stack = step.s.lane.stack;
  if (stack?.step.at !== 'judging') return;
  const reason = givenUp(step, stack);
  if (reason) {
    close(step, reason);
    return;
  }
  if (!stack.awaiting || unapproved(stack).length > 0 || stack.entries.length === 0) return;
  if (stack.green === stack.entries.length || stack.red) judge(step, stack);
  else testOrLand(step, stack);
}

/**
 * A rebased stack, its blocks approved: its top is tested — or, a lone block on trunk as it
 * is that its gate found green, it lands on that run (the candidate test would repeat it).
 */
function testOrLand(step: Step, stack: Stack): void {
  const top = stack.entries.at(-1)!;
  if (stack.entries.length === 1 && step.block(top.block).greenAt === top.sha) land(step, stack, 1, 'gate');
  else step.emit({ type: 'candidate.requested', stack: stack.id, sha: top.sha, blocks: stack.entries.map((x) => x.block) });
}

/**
 * The step stack `id` was at when the input arrived (before the fold took it in), or
 * undefined when it is not the stack in flight. Each input of the lane is taken at one step
 * only — a rebase while rebasing, a test result while testing, a push's outcome while
 * landing, the forge's word while waiting on it — and decides nothing at any other (the
 * table in lane-steps.test.ts).
 */
export function arrivedAt(step: Step, id: number): StackStep['at'] | undefined {
  const stack = step.was.lane.stack;
  return stack?.id === id ? stack.step.at : undefined;
}

export function onRebased(step: Step, e: BodyOf<'rebase.done'>): void {
  const stack = step.s.lane.stack;
  if (stack?.id !== e.stack || arrivedAt(step, e.stack) !== 'rebasing') return;
  if (e.trunk_sha !== stack.trunk) {
    const detail = `trunk moved from ${stack.trunk} to ${e.trunk_sha} by someone other than the engine`;
    pageAndPark(step, stack.asked[0]!, 'trunk_touched', detail, e.trunk_sha);
    close(step, `${detail}; the stack was given up`);
    return;
  }
  const awaited = new Set((stack.awaiting ?? []).map((a) => a.block));
  for (const r of e.results) {
    // A block not yet approved meets trunk's change once it is, in the next stack. Only a block
    // replayed straight onto trunk meets trunk alone; one that clashed with a block below it
    // in the stack waits for the next stack, where it is at the bottom.
    if (r.outcome === 'fast_forward' || r.outcome === 'clean' || awaited.has(r.block) || r.onto !== stack.trunk) continue;
    if (r.outcome === 'changed') {
      step.move(r.block, 'patch.changed');
      dispatch(step, r.block, 'review', r.sha);
    } else {
      conflicted(step, r.block, r.files ?? []);
    }
  }
  const now = step.s.lane.stack!;
  if (now.entries.length === 0) {
    close(step, 'no block of the stack replayed cleanly onto trunk');
    return;
  }
  // A stack that cannot land: settleStack gives it up. A lone block on trunk as it is, still
  // judged: its gate's run will be the test once it is approved (settleStack).
  if (givenUp(step, now) || (now.entries.length === 1 && unapproved(now).some((a) => a.sha === now.entries[0]!.sha))) return;
  testOrLand(step, now);
}

/** A rebase onto trunk that conflicts: the builder's own session brings the branch up to date, within the merge budget. */
function conflicted(step: Step, id: string, files: readonly string[]): void {
  const b = step.block(id);
  if (b.rounds.merge >= step.budget('merge')) {
    escalate(step, id, 'merge_failed', `the branch still conflicts with trunk after ${b.rounds.merge} merge turn(s): ${files.join(', ')}`);
    return;
  }
  dispatch(step, id, 'merge');
}

/** A stack's top (or a prefix's) was tested: land it, bisect it, or hand back its culprit. */
export function onCandidateTested(step: Step, e: BodyOf<'candidate.tested'>): void {
  const stack = step.s.lane.stack;
  // A test nobody awaits (the fold left it out: another sha, or the stack at another step): nothing to decide.
  if (stack?.id !== e.stack || arrivedAt(step, e.stack) !== 'testing' || stack.step.at !== 'judging') return;
  // Blocks stacked before their verdict: the result waits for them; a stack that cannot land: given up (settleStack).
  if (unapproved(stack).length > 0 || givenUp(step, stack)) return;
  judge(step, stack);
}

/** A stack's tests so far decide: land the green whole, bisect, or hand back its culprit (and land the green prefix). */
function judge(step: Step, stack: Stack): void {
  const n = stack.entries.length;
  if (stack.green === n) {
    land(step, stack, n, 'lane');
    return;
  }
  const red = stack.red!.n;
  if (red - stack.green > 1) {
    const m = Math.floor((stack.green + red) / 2);
    const prefix = stack.entries.slice(0, m);
    step.emit({
      type: 'bisect.step',
      stack: stack.id,
      sha: prefix.at(-1)!.sha,
      blocks: prefix.map((x) => x.block),
      green: stack.green,
      red,
    });
    return;
  }
  culprit(step, stack, red);
  if (stack.green > 0) land(step, stack, stack.green, 'lane');
  else close(step, `${stack.entries[red - 1]!.block} turned the stack red on its own; nothing landed`);
}

function land(step: Step, stack: Stack, n: number, tested: 'lane' | 'gate'): void {
  const blocks = stack.entries.slice(0, n);
  // [forge] land = "pr": the hosted checks must be green on the same sha first (lane/pr.ts).
  if (step.s.lane.pr) {
    step.emit({ type: 'pr.requested', stack: stack.id, sha: blocks.at(-1)!.sha, blocks, tested, attempt: 1 });
    return;
  }
  step.emit({ type: 'land.intent', stack: stack.id, sha: blocks.at(-1)!.sha, from: step.s.trunkSha!, blocks, tested });
}

/** The first block whose addition turned the stack red goes back to build with the failing output. */
function culprit(step: Step, stack: Stack, red: number): void {
  const entry = stack.entries[red - 1]!;
  const run = stack.red!.run;
  const below = stack.entries.slice(0, red - 1).map((x) => x.block);
  const onTop = below.length > 0 ? ` on top of ${below.join(', ')}` : '';
  const where = `with your change rebased onto trunk ${stack.trunk.slice(0, 12)}${onTop} (${entry.sha.slice(0, 12)}, a clean checkout)`;
  const setupFailed = run.setup !== undefined && (run.setup.exit !== 0 || run.setup.timed_out);
  const out = setupFailed ? run.setup! : run.tests!;
  const how = out.timed_out ? `timed out ${where} (output: ${out.log})` : `exited ${out.exit} ${where}`;
  const evidence = `${setupFailed ? 'setup' : 'the test command'} ${how}; ${runOutput(out)}`;
  backToBuild(step, entry.block, entry.sha, { name: setupFailed ? 'setup' : 'tests', ok: false, evidence });
}

/** A block of the stack fails in the lane (its tests, a person's or a hosted check's word): back to build, within its build budget. */
export function backToBuild(step: Step, id: string, sha: string, fact: Fact): void {
  step.emit({ type: 'gate.failed', block: id, sha, purpose: 'lane', facts: [fact] });
  const b = step.block(id);
  if (b.rounds.build >= step.budget('build')) {
    escalate(step, id, 'gate_budget', `the gate failed ${b.rounds.build} times:\n${b.feedback}`);
    return;
  }
  step.move(id, 'culprit');
  dispatch(step, id, 'build');
}

export function onLanded(step: Step, e: BodyOf<'block.landed'>): void {
  const b = step.block(e.block);
  if (b.phase === 'merge') {
    step.move(b.id, 'landed');
    step.emit({ type: 'wrap.requested', block: b.id, summary: wrapSummary(step.block(b.id)) });
  }
  const landing = step.s.lane.stack?.step;
  if (landing?.at !== 'landing' || !landing.blocks.includes(e.block) || landing.landed.length < landing.blocks.length) return;
  if (step.s.lane.verifyTrunk) step.emit({ type: 'test.requested', block: e.block, sha: e.top });
  close(step, `landed ${landing.landed.join(', ')} at ${e.top.slice(0, 12)}`);
}

/** Trunk was not where the engine left it: at the landing's ref transaction or push, or — with a remote — when the stack was formed and a worker had pushed to the remote's trunk (effects/remote.ts fetchBeforeStack). */
export function onLandRefused(step: Step, e: BodyOf<'land.refused'>): void {
  const at = arrivedAt(step, e.stack);
  if (at !== 'landing' && at !== 'rebasing') return;
  pageAndPark(step, e.blocks[0]!, 'trunk_touched', `the ref transaction was refused: ${e.detail}`, e.actual);
  close(step, `the ref transaction was refused: ${e.detail}`);
}

/** Ends the stack: the blocks still waiting on it go back to the front of the queue, in order. */
export function close(step: Step, detail: string): void {
  const stack = step.s.lane.stack!;
  const returned = stack.asked.filter((id) => step.block(id).waiting.on === 'stack');
  const landed = stack.step.at === 'landing' ? [...stack.step.landed] : [];
  step.emit({ type: 'lane.closed', stack: stack.id, landed, returned, detail });
}

/** [merge] verify_trunk: a red check of trunk pages the operator; the run cannot end with exit 0. */
export function onTrunkTested(step: Step, e: BodyOf<'trunk.tested'>): void {
  if (e.ok) return;
  // The top passed in the lane; red on trunk means the tests are not repeatable. It
  // cannot be un-landed without rewriting trunk, which is the user's: page the operator.
  step.emit({
    type: 'escalation.raised',
    block: e.block,
    trouble: 'trunk_red',
    handler: 'operator',
    detail: `the tests failed on trunk at ${e.sha}, though they passed at the same sha in the merge lane (output: ${e.tests.log})`,
  });
}

/** Pages the operator about block `id` (trunk moved under the engine, or the remote refused a landing) and parks it. */
export function pageAndPark(
  step: Step,
  id: string,
  trouble: 'trunk_touched' | 'remote_refused',
  detail: string,
  sha?: string | null,
): void {
  step.emit({ type: 'escalation.raised', block: id, trouble, handler: 'operator', detail, ...(sha ? { sha } : {}) });
  step.emit({ type: 'block.parked', block: id, reason: detail });
}
