/**
 * Replay: re-drive the pure decision step from a recorded run's inputs and compare what
 * it decides with what the run recorded. The recorded inputs (replies, observations,
 * answers) are fed back in order; every decision the step makes must equal the next
 * recorded decision, field for field (seq and ts aside). This is how tron proves a run
 * was decided by the code and nothing else.
 */
import { decide, type DecideContext } from './decide/decide.ts';
import { eventKind, type EventBody, type TronEvent } from './events.ts';
import { apply, initialState } from './state.ts';

export interface Divergence {
  /** seq of the recorded event where replay first disagreed (or of the input that made it). */
  seq: number;
  /** The input whose decisions disagreed. */
  input: TronEvent;
  recorded: EventBody | undefined;
  derived: EventBody | undefined;
}

export type ReplayResult = { ok: true; inputs: number; decisions: number } | { ok: false; divergence: Divergence };

function body(e: TronEvent): EventBody {
  const { v: _v, seq: _seq, ts: _ts, ...rest } = e;
  return rest as EventBody;
}

/** Key-order-free JSON: the log writer orders fields by schema, the step by the order it emits them. */
const canon = (x: unknown): string =>
  JSON.stringify(x, (_k, v) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
/** Equal as JSON, whatever the key order. */
const same = (a: unknown, b: unknown) => alike(a, b) || canon(a) === canon(b);

/**
 * A quick structural equality that implies equal `canon` forms (an absent key and an
 * undefined one are alike, as in JSON). It may miss some JSON-equal pairs (NaN and null,
 * say), which `same` then settles with `canon`: only a divergence pays for that.
 */
function alike(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => alike(x, b[i]));
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  for (const k in x) if (x[k] !== undefined && !alike(x[k], y[k])) return false;
  for (const k in y) if (y[k] !== undefined && x[k] === undefined) return false;
  return true;
}

/**
 * Re-decides every recorded input and compares with the recorded decisions. `step` is the
 * decision step to check the log against: `decide`, or (the simulator's planted mutations)
 * a variant of it.
 */
export function replay(events: readonly TronEvent[], ctx: DecideContext, step: typeof decide = decide): ReplayResult {
  let state = initialState();
  let inputs = 0;
  let decisions = 0;
  let i = 0;
  while (i < events.length) {
    const e = events[i]!;
    const kind = eventKind(e.type);
    if (kind !== 'input') {
      if (kind === 'decision') {
        return { ok: false, divergence: { seq: e.seq, input: e, recorded: body(e), derived: undefined } };
      }
      state = apply(state, e);
      i += 1;
      continue;
    }
    inputs += 1;
    const derived = state.finished ? [] : step(state, e, ctx).decisions;
    state = apply(state, e);
    i += 1;
    for (let k = 0; ; k += 1) {
      const next = events[i];
      const recorded = next && eventKind(next.type) === 'decision' ? next : undefined;
      const want = derived[k];
      if (!recorded && !want) break;
      if (!recorded || !want || !same(body(recorded), want)) {
        return {
          ok: false,
          divergence: {
            seq: recorded?.seq ?? next?.seq ?? e.seq,
            input: e,
            recorded: recorded ? body(recorded) : undefined,
            derived: want,
          },
        };
      }
      state = apply(state, recorded);
      decisions += 1;
      i += 1;
    }
  }
  return { ok: true, inputs, decisions };
}
