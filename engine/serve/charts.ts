/**
 * The charts of the runs page (`GET /api/v1/charts`): landed blocks per day, lead time from
 * ready to landed and the phases it went to, cost per landed block by role and by model,
 * the first-try gate pass rate, and the most frequent failing facts and escalations.
 *
 * Two steps, so a run is read once. `ChartFold` takes one run's events as they come (runs.ts
 * feeds it beside the run's other figures, and keeps what it holds once the run is over):
 * a few entries per block and a count per day, never the events. `chartsOf` is pure: the
 * folds of every run, oldest first, and a window of days ending at `now` in, the chart data
 * out. A block's lead time can cross runs (parked in one, answered in the next), so it is
 * put together there, from every run's entries. Between the two, `mergeCharts` makes the
 * folds of many runs one, so the runs that are over are merged once (runs.ts keeps it).
 *
 * Ready is when a block could first be worked on: the later of the first register that
 * named it and the landing of the last of its dependencies. Landed is the end of its wrap
 * (its phase becomes `landed`). The time between is split by the phase the block was in —
 * `pending` after ready is waiting for a slot, `parked` waiting for the operator — and
 * between two runs it stays in the phase the first left it in.
 */
import type { TronEvent } from '../core/events.ts';
import { apply, initialState, type EngineState } from '../core/state.ts';

/** What a chart counts per UTC day: `YYYY-MM-DD` → key → count (or sum). */
type PerDay = Map<string, Map<string, number>>;

/** One run's share of the charts. */
export interface RunCharts {
  /** How many runs it holds: 1, or more in a merge. */
  runs: number;
  /** Each block's phases in this run: the phase it entered and when, in order. */
  phases: Map<string, [phase: string, ts: number][]>;
  /** Each block's dependencies, as the run's latest register named them. */
  deps: Map<string, readonly string[]>;
  /** When the run landed each block it landed (block.landed). */
  landed: Map<string, number>;
  /** Each block's first truth gate in the run (purpose gate): when, and whether it held. */
  gates: Map<string, { ts: number; ok: boolean }>;
  /** USD spent per day by `role\tmodel`, where the cost is known. */
  usd: PerDay;
  /** Tokens used per day by `role\tmodel`. */
  tokens: PerDay;
  /** Tokens per day by `role\tmodel` whose cost is not known. */
  unpriced: PerDay;
  /** Failing facts per day, by `purpose\tfact`. */
  failures: PerDay;
  /** Escalations per day, by trouble. */
  escalations: PerDay;
}

/** The UTC day of a time, as `YYYY-MM-DD`. */
export const dayOf = (ts: number): string => new Date(ts).toISOString().slice(0, 10);

const DAY = 86_400_000;

function bump(m: PerDay, day: string, key: string, by: number): void {
  let d = m.get(day);
  if (!d) {
    d = new Map();
    m.set(day, d);
  }
  d.set(key, (d.get(key) ?? 0) + by);
}

function emptyCharts(): RunCharts {
  return {
    runs: 0,
    phases: new Map(),
    deps: new Map(),
    landed: new Map(),
    gates: new Map(),
    usd: new Map(),
    tokens: new Map(),
    unpriced: new Map(),
    failures: new Map(),
    escalations: new Map(),
  };
}

/** A run's events folded into its share of the charts, one at a time. */
export class ChartFold {
  readonly charts: RunCharts = { ...emptyCharts(), runs: 1 };

  /**
   * One event, with the block's phase before and after the engine's fold of it (the
   * caller folds the state already: runs.ts's Tally), so a phase is what `tron status` says.
   */
  add(e: TronEvent, was: string | undefined, now: string | undefined): void {
    const c = this.charts;
    if ('block' in e && typeof e.block === 'string' && now !== undefined && now !== was) {
      let list = c.phases.get(e.block);
      if (!list) {
        list = [];
        c.phases.set(e.block, list);
      }
      list.push([now, e.ts]);
    }
    const day = dayOf(e.ts);
    switch (e.type) {
      case 'register.loaded':
        // A block the register names for the first time in the run starts pending.
        for (const b of e.blocks) {
          c.deps.set(b.id, b.depends_on);
          if (!c.phases.has(b.id)) c.phases.set(b.id, [['pending', e.ts]]);
        }
        break;
      case 'block.landed':
        c.landed.set(e.block, e.ts);
        break;
      case 'gate.passed':
        if (!c.gates.has(e.block)) c.gates.set(e.block, { ts: e.ts, ok: true });
        break;
      case 'gate.failed':
        if (e.purpose === 'gate' && !c.gates.has(e.block)) c.gates.set(e.block, { ts: e.ts, ok: false });
        for (const f of e.facts) if (!f.ok) bump(c.failures, day, `${e.purpose}\t${f.name}`, 1);
        break;
      case 'escalation.raised':
        bump(c.escalations, day, e.trouble, 1);
        break;
      case 'usage.recorded': {
        const key = `${e.role}\t${e.model}`;
        const tokens = e.input_tokens + e.cached_tokens + e.output_tokens;
        bump(c.tokens, day, key, tokens);
        if (e.cost_usd !== undefined) bump(c.usd, day, key, e.cost_usd);
        else bump(c.unpriced, day, key, tokens);
        break;
      }
      case 'worker.usage':
        // The OpenAI-wire worker's report: tokens and a model, no price.
        bump(c.tokens, day, `${e.role}\t${e.model}`, e.total_tokens);
        bump(c.unpriced, day, `${e.role}\t${e.model}`, e.total_tokens);
        break;
      default:
        break;
    }
  }
}

/** Folds whole logs (each a run's events, oldest run first): what runs.ts does a run at a time. */
export function foldRuns(logs: readonly (readonly TronEvent[])[]): RunCharts[] {
  return logs.map((events) => {
    const fold = new ChartFold();
    let state: EngineState = initialState();
    for (const e of events) {
      const block = 'block' in e && typeof e.block === 'string' ? e.block : undefined;
      const was = block === undefined ? undefined : state.blocks.get(block)?.phase;
      state = apply(state, e);
      fold.add(e, was, block === undefined ? undefined : state.blocks.get(block)?.phase);
    }
    return fold.charts;
  });
}

export interface Bar {
  key: string;
  value: number;
}

/** What `GET /api/v1/charts` answers. Times in ms; money in USD. */
export interface Charts {
  days: number;
  /** The first and last UTC day of the window. */
  from: string;
  to: string;
  /** Runs read (every run on disk: a lead time can start in any). */
  runs: number;
  /** One entry per day of the window, oldest first, zeros included. */
  landedPerDay: { day: string; landed: number }[];
  lead: {
    /** Blocks landed in the window whose ready time is known. */
    blocks: number;
    median: number | null;
    p90: number | null;
    /** Mean time per landed block in each phase between ready and landed, in the spine's order where known. */
    phases: Bar[];
  };
  cost: {
    landed: number;
    usd: number;
    tokens: number;
    unpricedTokens: number;
    /** USD per landed block (spend in the window over the blocks landed in it), by role and by model. */
    byRole: (Bar & { usd: number; tokens: number })[];
    byModel: (Bar & { usd: number; tokens: number })[];
  };
  gate: {
    /** Blocks whose first truth gate fell in the window. */
    blocks: number;
    firstTry: number;
    /** firstTry / blocks; null without a gate. */
    rate: number | null;
  };
  /** Failing facts, most frequent first (`fact`, or `purpose: fact` off the truth gate), at most ten. */
  failures: Bar[];
  /** Escalations by trouble, most frequent first, at most ten. */
  escalations: Bar[];
}

const PHASE_ORDER = ['pending', 'build', 'review', 'merge', 'wrap', 'parked'];

/** The nearest-rank percentile of sorted numbers. */
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

function top(m: Map<string, number>, n: number): Bar[] {
  return [...m]
    .map(([key, value]) => ({ key, value }))
    .sort((a, b) => b.value - a.value || a.key.localeCompare(b.key))
    .slice(0, n);
}

/**
 * Runs' folds (oldest first) as one: a block's phases one after the other, its first
 * landing and first gate, its latest dependencies, the per-day counts summed. Merging is
 * associative, so the runs that are over are merged once and kept (runs.ts), and a request
 * merges only that and the run under way. Pure: the folds given are not changed.
 */
export function mergeCharts(runs: readonly RunCharts[]): RunCharts {
  const out = emptyCharts();
  for (const r of runs) {
    out.runs += r.runs;
    for (const [block, list] of r.phases) {
      let all = out.phases.get(block);
      if (!all) {
        all = [];
        out.phases.set(block, all);
      }
      for (const entry of list) if (all.at(-1)?.[0] !== entry[0]) all.push(entry);
    }
    for (const [block, d] of r.deps) out.deps.set(block, d);
    for (const [block, ts] of r.landed) if (!out.landed.has(block)) out.landed.set(block, ts);
    for (const [block, g] of r.gates) if (!out.gates.has(block)) out.gates.set(block, g);
    for (const k of ['usd', 'tokens', 'unpriced', 'failures', 'escalations'] as const)
      for (const [day, byKey] of r[k]) for (const [key, n] of byKey) bump(out[k], day, key, n);
  }
  return out;
}

/**
 * The chart data of `runs` (every run's fold, oldest first; or their merge) for the `days`
 * UTC days that end on `now`'s. Pure: the same folds and window give the same charts.
 */
export function chartsOf(runs: readonly RunCharts[], window: { now: number; days: number }): Charts {
  const to = dayOf(window.now);
  const from = dayOf(Date.parse(`${to}T00:00:00Z`) - (window.days - 1) * DAY);
  const inWindow = (day: string) => day >= from && day <= to;
  const all = runs.length === 1 ? runs[0]! : mergeCharts(runs);
  const { phases, deps, landed, gates } = all;

  const landedPerDay: Charts['landedPerDay'] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); dayOf(t) <= to; t += DAY) landedPerDay.push({ day: dayOf(t), landed: 0 });
  const slot = new Map(landedPerDay.map((d) => [d.day, d]));
  const leads: number[] = [];
  const spent = new Map<string, number>();
  for (const [block, ts] of landed) {
    const d = slot.get(dayOf(ts));
    if (!d) continue;
    d.landed += 1;
    const list = phases.get(block) ?? [];
    const first = list[0]?.[1];
    if (first === undefined) continue;
    const ready = Math.max(first, ...(deps.get(block) ?? []).map((dep) => landed.get(dep) ?? first));
    const end = list.find(([p, at]) => p === 'landed' && at >= ts)?.[1] ?? ts;
    leads.push(end - ready);
    for (const [i, [phase, at]] of list.entries()) {
      const stop = Math.min(list[i + 1]?.[1] ?? end, end);
      const start = Math.max(at, ready);
      if (stop > start && phase !== 'landed') spent.set(phase, (spent.get(phase) ?? 0) + (stop - start));
    }
  }
  leads.sort((a, b) => a - b);
  const rank = (p: string) => (PHASE_ORDER.includes(p) ? PHASE_ORDER.indexOf(p) : PHASE_ORDER.length);
  const leadPhases = [...spent]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([key, ms]) => ({ key, value: Math.round(ms / leads.length) }));

  const landedCount = landedPerDay.reduce((n, d) => n + d.landed, 0);
  const sum = (m: PerDay, part: 0 | 1) => {
    const out = new Map<string, number>();
    for (const [day, byKey] of m) {
      if (!inWindow(day)) continue;
      for (const [key, v] of byKey) {
        const k = key.split('\t')[part]!;
        out.set(k, (out.get(k) ?? 0) + v);
      }
    }
    return out;
  };
  const costBy = (part: 0 | 1) => {
    const usd = new Map<string, number>();
    const tokens = new Map<string, number>();
    for (const [k, v] of sum(all.usd, part)) usd.set(k, (usd.get(k) ?? 0) + v);
    for (const [k, v] of sum(all.tokens, part)) tokens.set(k, (tokens.get(k) ?? 0) + v);
    return [...tokens.keys()]
      .map((key) => ({
        key,
        usd: usd.get(key) ?? 0,
        tokens: tokens.get(key) ?? 0,
        value: landedCount === 0 ? 0 : (usd.get(key) ?? 0) / landedCount,
      }))
      .sort((a, b) => b.usd - a.usd || b.tokens - a.tokens || a.key.localeCompare(b.key));
  };
  const byRole = costBy(0);
  const byModel = costBy(1);
  let unpricedTokens = 0;
  for (const v of sum(all.unpriced, 0).values()) unpricedTokens += v;

  let gated = 0;
  let firstTry = 0;
  for (const g of gates.values()) {
    if (!inWindow(dayOf(g.ts))) continue;
    gated += 1;
    if (g.ok) firstTry += 1;
  }

  const counted = (pick: (r: RunCharts) => PerDay, label: (key: string) => string) => {
    const out = new Map<string, number>();
    for (const [day, byKey] of pick(all)) {
      if (!inWindow(day)) continue;
      for (const [key, n] of byKey) out.set(label(key), (out.get(label(key)) ?? 0) + n);
    }
    return out;
  };
  const failures = counted(
    (r) => r.failures,
    (key) => {
      const [purpose, fact] = key.split('\t') as [string, string];
      return purpose === 'gate' ? fact : `${purpose}: ${fact}`;
    },
  );
  const escalations = counted(
    (r) => r.escalations,
    (key) => key,
  );

  return {
    days: window.days,
    from,
    to,
    runs: all.runs,
    landedPerDay,
    lead: { blocks: leads.length, median: percentile(leads, 0.5), p90: percentile(leads, 0.9), phases: leadPhases },
    cost: {
      landed: landedCount,
      usd: byRole.reduce((n, r) => n + r.usd, 0),
      tokens: byRole.reduce((n, r) => n + r.tokens, 0),
      unpricedTokens,
      byRole,
      byModel,
    },
    gate: { blocks: gated, firstTry, rate: gated === 0 ? null : firstTry / gated },
    failures: top(failures, 10),
    escalations: top(escalations, 10),
  };
}
