/**
 * Run statistics, from the events alone: `report.md` at the end of every run and
 * `tron report RUN_DIR [--json]`. Nothing here reads git, the clock or the workers, so
 * a report can be recomputed from any recorded log, and two runs compared figure by
 * figure. Where the time went (workers, test runs, the engine itself, the merge lane)
 * is computed in engine/render/report-time.ts.
 */
import { forgeSection } from './forge-links.ts';
import { EVENT_SCHEMAS, type TestRun, type TronEvent } from '../core/events.ts';
import { blockedBy } from '../core/blocked.ts';
import { apply, initialState } from '../core/state.ts';
import { failureExcerpt } from '../core/test-output.ts';
import { laneIntervals, mergeWaitIntervals, sumMs, testIntervals, unionMs, workerIntervals, type Interval } from './report-time.ts';

/** What workers spent, summed from usage events. */
export interface SpendStats {
  /** Prompt tokens not read from a cache. */
  inputTokens: number;
  cachedTokens: number;
  outputTokens: number;
  /** All three. */
  tokens: number;
  /** USD of the usage whose cost is known (reported by the worker or priced from [prices]). */
  costUsd: number;
  /** Tokens of usage whose cost is not known. */
  unpricedTokens: number;
}

export function emptySpend(): SpendStats {
  return { inputTokens: 0, cachedTokens: 0, outputTokens: 0, tokens: 0, costUsd: 0, unpricedTokens: 0 };
}

/** Adds one usage record to `into`, in place. */
function spend(into: SpendStats, input: number, cached: number, output: number, costUsd: number | undefined): void {
  const tokens = input + cached + output;
  into.inputTokens += input;
  into.cachedTokens += cached;
  into.outputTokens += output;
  into.tokens += tokens;
  if (costUsd === undefined) into.unpricedTokens += tokens;
  else into.costUsd += costUsd;
}

/** One trip along the exception spine, and how it ended. */
export interface EscalationStat {
  seq: number;
  trouble: string;
  handler: string;
  outcome: string;
}

export interface BlockStats {
  id: string;
  /** The phase the block ended the run in. */
  phase: string;
  /** The dependency it waits on, when it is blocked (its dependency did not land). */
  blockedBy?: string;
  /** Attempts started (a RETRY starts a new one). */
  attempts: number;
  /** ms spent in each phase, including `pending` before the first dispatch. */
  phaseMs: Record<string, number>;
  /** Gate failures by the fact that failed. */
  gateFailures: Record<string, number>;
  /** Review turns (restatements aside). */
  reviewRounds: number;
  /** Times the reviewer sent the block back with CHANGES. */
  changesRequested: number;
  escalations: EscalationStat[];
  /** Total tokens by role, where the workers reported usage. */
  tokens: Record<string, number>;
  /** Tokens and cost of the block's usage events, summed in log order. */
  spend: SpendStats;
  /** The same, by role. */
  spendByRole: Record<string, SpendStats>;
  /** ms waiting in the merge lane's queue. */
  mergeWaitMs: number;
  /** ms of worker turns, summed. */
  workerMs: number;
  /** ms of the engine's test runs for this block, summed. */
  testMs: number;
}

export interface RunStats {
  run: string;
  exit: number | undefined;
  events: number;
  wallMs: number;
  /** Landed by this run: a block an earlier run landed is counted in `carried`. */
  landed: number;
  /** Parked for the operator; not the blocked ones. */
  parked: number;
  /** Still under way, or not started, when a run that did not end by itself stopped (a signal, a budget, a failure). */
  unfinished: number;
  /** Blocks already landed or abandoned by an earlier run, resumed so at this run's start and left so. */
  carried: { landed: number; abandoned: number };
  /** Waiting on a dependency that did not land (parked, abandoned, or blocked in turn). */
  blocked: number;
  abandoned: number;
  /** Blocks this run landed, per hour of wall time. */
  throughputPerHour: number;
  /** ms waiting in the merge lane's queue, summed over blocks. */
  mergeWaitMs: number;
  /** ms the merge lane had a stack in flight (rebasing, testing, landing), and the stacks it formed. */
  lane: { busyMs: number; stacks: number };
  time: {
    /** ms with at least one worker turn going (overlaps counted once). */
    workersMs: number;
    /** ms with at least one engine test run going. */
    testsMs: number;
    /** ms with neither: the engine's own share (git, decisions, waiting on nothing). */
    engineMs: number;
    /** The same figures summed without removing overlaps. */
    workersSumMs: number;
    testsSumMs: number;
  };
  /** Total tokens by role over the run. */
  tokens: Record<string, number>;
  /** Tokens and cost of every usage event of the run. */
  spend: SpendStats;
  /** The same, by role. */
  spendByRole: Record<string, SpendStats>;
  blocks: BlockStats[];
}

type Working = BlockStats & { enteredAt: number };

/** Folds a run's events into its statistics. */
export function runStats(events: readonly TronEvent[]): RunStats {
  const blocks = new Map<string, Working>();
  const runSpend = emptySpend();
  const runSpendByRole: Record<string, SpendStats> = {};
  /** One usage record, into the block's, its role's and the run's sums. */
  const used = (b: Working, role: string, input: number, cached: number, output: number, costUsd: number | undefined) => {
    b.tokens[role] = (b.tokens[role] ?? 0) + input + cached + output;
    b.spendByRole[role] = b.spendByRole[role] ?? emptySpend();
    runSpendByRole[role] = runSpendByRole[role] ?? emptySpend();
    for (const into of [b.spend, b.spendByRole[role], runSpend, runSpendByRole[role]]) spend(into, input, cached, output, costUsd);
  };
  let run = '';
  let exit: number | undefined;
  const first = events[0]?.ts ?? 0;
  const last = events.at(-1)?.ts ?? first;
  const get = (id: string, ts: number): Working => {
    let b = blocks.get(id);
    if (!b) {
      b = {
        id,
        phase: 'pending',
        attempts: 0,
        phaseMs: {},
        gateFailures: {},
        reviewRounds: 0,
        changesRequested: 0,
        escalations: [],
        tokens: {},
        spend: emptySpend(),
        spendByRole: {},
        mergeWaitMs: 0,
        workerMs: 0,
        testMs: 0,
        enteredAt: ts,
      };
      blocks.set(id, b);
    }
    return b;
  };
  const enter = (b: Working, phase: string, ts: number) => {
    b.phaseMs[b.phase] = (b.phaseMs[b.phase] ?? 0) + (ts - b.enteredAt);
    b.phase = phase;
    b.enteredAt = ts;
  };
  events.forEach((e, i) => {
    switch (e.type) {
      case 'run.started':
        run = e.run;
        break;
      case 'register.loaded':
        for (const info of e.blocks) get(info.id, e.ts);
        break;
      case 'worktree.requested': {
        const b = get(e.block, e.ts);
        b.attempts = Math.max(b.attempts, e.attempt);
        if (b.phase === 'pending') enter(b, 'build', e.ts);
        break;
      }
      case 'block.recovered': {
        const b = get(e.block, e.ts);
        b.attempts = Math.max(b.attempts, e.attempt);
        enter(b, e.phase, e.ts);
        break;
      }
      case 'block.phase': {
        const b = get(e.block, e.ts);
        if (e.from === 'review' && e.on === 'CHANGES') b.changesRequested += 1;
        enter(b, e.to, e.ts);
        break;
      }
      case 'block.dispatched':
        if (e.kind === 'review') get(e.block, e.ts).reviewRounds += 1;
        break;
      case 'gate.failed': {
        const b = get(e.block, e.ts);
        for (const f of e.facts.filter((x) => !x.ok)) b.gateFailures[f.name] = (b.gateFailures[f.name] ?? 0) + 1;
        break;
      }
      case 'escalation.raised':
        get(e.block, e.ts).escalations.push({ seq: e.seq, trouble: e.trouble, handler: e.handler, outcome: outcomeOf(events, i) });
        break;
      case 'block.parked':
        enter(get(e.block, e.ts), 'parked', e.ts);
        break;
      case 'block.abandoned':
        enter(get(e.block, e.ts), 'abandoned', e.ts);
        break;
      case 'usage.recorded':
        used(get(e.block, e.ts), e.role, e.input_tokens, e.cached_tokens, e.output_tokens, e.cost_usd);
        break;
      case 'worker.usage':
        // Logs from before usage.recorded: prompt tokens count as input, and the cost is unknown.
        used(get(e.block, e.ts), e.role, e.prompt_tokens, 0, e.total_tokens - e.prompt_tokens, undefined);
        break;
      case 'run.finished':
        exit = e.exit;
        break;
      default:
        break;
    }
  });
  const workers = workerIntervals(events);
  const tests = testIntervals(events);
  const waits = mergeWaitIntervals(events);
  const byBlock = (list: readonly Interval[], id: string) => sumMs(list.filter((x) => x.block === id));
  const list = [...blocks.values()].map(({ enteredAt, ...b }) => {
    b.phaseMs[b.phase] = (b.phaseMs[b.phase] ?? 0) + (last - enteredAt);
    return { ...b, mergeWaitMs: byBlock(waits, b.id), workerMs: byBlock(workers, b.id), testMs: byBlock(tests, b.id) };
  });
  const wallMs = last - first;
  // What an earlier run settled (landed or abandoned, resumed so at this start) is not this run's doing.
  const settledBefore = new Map<string, string>();
  for (const e of events) {
    if (e.type === 'block.recovered' && (e.phase === 'landed' || e.phase === 'abandoned')) settledBefore.set(e.block, e.phase);
    else if ('block' in e && (e.type === 'block.phase' || e.type === 'worktree.requested')) settledBefore.delete(e.block);
  }
  const carriedOver = (b: BlockStats) => settledBefore.get(b.id) === b.phase;
  const landed = list.filter((b) => b.phase === 'landed' && !carriedOver(b)).length;
  // Blocked is read off the engine's own fold (a type this build does not know changes nothing).
  const state = events.reduce((st, e) => (Object.hasOwn(EVENT_SCHEMAS, e.type) ? apply(st, e) : st), initialState());
  for (const b of list) {
    const by = blockedBy(state, b.id);
    if (by) b.blockedBy = by.dependency;
  }
  const blocked = list.filter((b) => b.blockedBy !== undefined).length;
  const tokens: Record<string, number> = {};
  for (const b of list) for (const [role, n] of Object.entries(b.tokens)) tokens[role] = (tokens[role] ?? 0) + n;
  const workersMs = unionMs(workers);
  const testsMs = unionMs(tests);
  return {
    run,
    exit,
    events: events.length,
    wallMs,
    landed,
    parked: list.filter((b) => b.phase === 'parked' && b.blockedBy === undefined).length,
    unfinished: list.filter((b) => !['landed', 'abandoned', 'parked'].includes(b.phase) && b.blockedBy === undefined).length,
    carried: {
      landed: list.filter((b) => b.phase === 'landed' && carriedOver(b)).length,
      abandoned: list.filter((b) => b.phase === 'abandoned' && carriedOver(b)).length,
    },
    blocked,
    abandoned: list.filter((b) => b.phase === 'abandoned' && !carriedOver(b)).length,
    throughputPerHour: wallMs > 0 ? (landed * 3_600_000) / wallMs : 0,
    mergeWaitMs: sumMs(waits),
    lane: { busyMs: unionMs(laneIntervals(events)), stacks: laneIntervals(events).length },
    time: {
      workersMs,
      testsMs,
      engineMs: wallMs - unionMs([...workers, ...tests]),
      workersSumMs: sumMs(workers),
      testsSumMs: sumMs(tests),
    },
    tokens,
    spend: runSpend,
    spendByRole: runSpendByRole,
    blocks: list,
  };
}

/**
 * How the escalation at `events[i]` ended: the restated or architect's word, the
 * operator's answer, what the probe found — or where the trouble went next.
 */
export function outcomeOf(events: readonly TronEvent[], i: number): string {
  const esc = events[i] as Extract<TronEvent, { type: 'escalation.raised' }>;
  for (const e of events.slice(i + 1)) {
    if (!('block' in e) || e.block !== esc.block) continue;
    switch (esc.handler) {
      case 'restate':
      case 'architect':
        if (e.type === 'reply.accepted') return e.word;
        if (e.type === 'reply.refused') return `refused: ${e.kind}`;
        break;
      case 'operator':
        if (e.type === 'operator.answered') return `answered ${e.word}`;
        if (e.type === 'block.recovered' && e.phase !== 'parked') return `resumed: ${e.phase}`;
        break;
      case 'probe':
        if (e.type === 'worker.extended') return 'life: extended';
        if (e.type === 'turn.reissued') return 'silent: re-issued';
        if (e.type === 'reply.received') return 'replied';
        break;
      case 'reissue':
        if (e.type === 'reply.received' && e.ok) return 'replied';
        break;
      default:
        break;
    }
    if (e.type === 'escalation.raised' && esc.handler !== 'operator') return `passed to ${e.handler}`;
    if (e.type === 'block.abandoned') return 'abandoned';
    if (e.type === 'block.landed') return 'landed';
  }
  return esc.handler === 'operator' ? 'unanswered' : 'unresolved';
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
const count = (n: number) => n.toLocaleString('en-US');
/** USD to 4 places: small turns cost fractions of a cent. */
export const usd = (n: number) => `$${n.toFixed(4)}`;
/** A spend in one cell: cost and tokens, and what is unpriced. */
function spendCell(x: SpendStats): string {
  if (x.tokens === 0 && x.costUsd === 0) return '—';
  const unpriced = x.unpricedTokens > 0 ? `, ${count(x.unpricedTokens)} unpriced` : '';
  return `${usd(x.costUsd)} (${count(x.tokens)} tokens${unpriced})`;
}
const pct = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : '—');
const list = (r: Record<string, number>, fmt: (n: number) => string = String) =>
  Object.entries(r)
    .map(([k, v]) => `${k} ${fmt(v)}`)
    .join(', ') || '—';

/** Lines of a failed test run's excerpt in the report; the whole output is in its log. */
export const REPORT_FAILURE_LINES = 30;

/**
 * Every failed test run of the run — at a gate, in the merge lane, on trunk after a
 * landing — with what failed: the failing tests' own lines and the runner's summary
 * (engine/core/test-output.ts), or the output's last lines, and the log's path.
 */
function failedTestRuns(events: readonly TronEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    let run: TestRun | null | undefined;
    let who: string;
    let at: string;
    if (e.type === 'facts.observed') [run, who, at] = [e.tests, e.block, e.head];
    else if (e.type === 'candidate.tested') [run, who, at] = [e.tests, `lane stack ${e.stack} (${e.blocks.join(', ')})`, e.sha];
    else if (e.type === 'trunk.tested') [run, who, at] = [e.tests, `${e.block}, trunk after landing`, e.sha];
    else continue;
    if (!run || (run.exit === 0 && !run.timed_out)) continue;
    const what = run.timed_out ? 'timed out' : `exited ${run.exit}`;
    const shown = run.failures !== undefined ? (failureExcerpt(run.failures, REPORT_FAILURE_LINES) ?? run.failures) : run.tail.trimEnd();
    const label = run.failures !== undefined ? 'the failing tests' : 'last lines';
    out.push(`- seq ${e.seq}, ${who} at ${at.slice(0, 12)}: the tests ${what}; ${label} (log: ${run.log}):`, '', '  ```');
    for (const line of shown.split('\n')) out.push(`  ${line}`.trimEnd());
    out.push('  ```', '');
  }
  if (out.at(-1) === '') out.pop();
  return out;
}

/** What earlier runs had settled, said apart from what this run did. */
function carriedLine(c: RunStats['carried']): string {
  const parts = [c.landed > 0 ? `${c.landed} landed` : '', c.abandoned > 0 ? `${c.abandoned} abandoned` : ''].filter(Boolean);
  return parts.length > 0 ? ` Carried over from earlier runs, not counted above: ${parts.join(', ')}.` : '';
}

/** report.md: the statistics as Markdown. */
// [forge]: each block's issue and pull request (render/forge-links.ts).
export function renderReport(events: readonly TronEvent[]): string {
  const s = runStats(events);
  const t = s.time;
  const lines = [
    `# tron run ${s.run}`,
    '',
    `${s.landed} landed, ${s.unfinished > 0 ? `${s.unfinished} unfinished, ` : ''}${s.parked} parked, ${s.blocked > 0 ? `${s.blocked} blocked (waiting on a dependency that did not land), ` : ''}${s.abandoned} abandoned; ${s.events} events; wall time ${secs(s.wallMs)}; exit ${s.exit ?? '(running)'}.${carriedLine(s.carried)}`,
    '',
    `- throughput: ${s.throughputPerHour.toFixed(1)} blocks landed per hour of wall time`,
    `- engine alone: ${secs(t.engineMs)} (${pct(t.engineMs, s.wallMs)} of wall time; no worker turn and no test run going)`,
    `- workers: ${secs(t.workersMs)} busy (${pct(t.workersMs, s.wallMs)}); ${secs(t.workersSumMs)} summed over turns`,
    `- test runs: ${secs(t.testsMs)} busy (${pct(t.testsMs, s.wallMs)}); ${secs(t.testsSumMs)} summed`,
    `- merge lane: ${s.lane.stacks} stack(s), busy ${secs(s.lane.busyMs)} (${pct(s.lane.busyMs, s.wallMs)} of wall time); blocks waited ${secs(s.mergeWaitMs)} in its queue, summed`,
    `- tokens: ${list(s.tokens)}`,
    `- spend: ${spendCell(s.spend)}; input ${count(s.spend.inputTokens)}, cached ${count(s.spend.cachedTokens)}, output ${count(s.spend.outputTokens)}`,
    `- spend by role: ${
      Object.entries(s.spendByRole)
        .map(([role, x]) => `${role} ${spendCell(x)}`)
        .join(', ') || '—'
    }`,
    '',
    '| block | phase | attempts | time by phase | gate failures | review rounds | changes asked | escalations | merge wait | worker time | test time | tokens | cost |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const b of s.blocks) {
    const time = list(Object.fromEntries(Object.entries(b.phaseMs).filter(([k]) => k !== 'landed' && k !== 'abandoned')), secs);
    const escalations = b.escalations.map((x) => `${x.trouble}→${x.handler}`).join(', ') || '—';
    lines.push(
      `| ${b.id} | ${b.blockedBy ? `blocked by ${b.blockedBy}` : b.phase} | ${b.attempts} | ${time} | ${list(b.gateFailures)} | ${b.reviewRounds} | ${b.changesRequested} | ${escalations} | ${secs(b.mergeWaitMs)} | ${secs(b.workerMs)} | ${secs(b.testMs)} | ${list(b.tokens)} | ${spendCell(b.spend)} |`,
    );
  }
  lines.push(...forgeSection(events));
  const red = failedTestRuns(events);
  if (red.length > 0) lines.push('', '## Failed test runs', '', ...red);
  const all = s.blocks.flatMap((b) => b.escalations.map((x) => ({ block: b.id, ...x })));
  if (all.length > 0) {
    lines.push('', '## Escalations', '');
    for (const x of all.sort((a, b) => a.seq - b.seq)) lines.push(`- seq ${x.seq}, ${x.block}: ${x.trouble} → ${x.handler} — ${x.outcome}`);
  }
  return `${lines.join('\n')}\n`;
}
