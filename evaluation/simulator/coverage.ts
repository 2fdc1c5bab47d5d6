/**
 * What a search reached, counted over all its runs: every decision type, spine
 * transition, escalation row (trouble → handler) and fault. A decision type or an
 * escalation row never reached fails the search: the world would not be answering every
 * decision the step can make.
 */
import { EVENT_SCHEMAS, eventKind, type EventType, type TronEvent } from '../../engine/core/events.ts';
import { ESCALATION } from '../../engine/spine/spine.ts';
import { CTX } from './sim.ts';

/**
 * Decisions and escalation rows the simulated world cannot reach yet, so they are not
 * asked of a search, each with where it is reached instead. The world has a remote
 * (pushes refused, unreachable or answered too late, trunk moved there by a teammate)
 * and worktrees that cannot be made, so `remote.retry`, `remote_refused` and
 * `worktree_failed` are no longer here; nor are `pr.requested` and `pr.wait`, since some
 * runs land through pull requests ([forge] land = "pr"). A decision type or escalation row added to the
 * engine before the world models it is listed here until the world can make it.
 */
export const UNSIMULATED: { decisions: readonly string[]; escalations: readonly string[] } = {
  decisions: [],
  escalations: [],
};

export const DECISION_TYPES = (Object.keys(EVENT_SCHEMAS) as EventType[]).filter(
  (t) => eventKind(t) === 'decision' && !UNSIMULATED.decisions.includes(t),
);
export const ESCALATION_ROWS = Object.entries(ESCALATION)
  .flatMap(([trouble, row]) => row.handlers.map((h) => `${trouble} → ${h}`))
  .filter((r) => !UNSIMULATED.escalations.includes(r));
export const TRANSITIONS = CTX.spine.phases.flatMap((p) => p.transitions.map((t) => `${p.name} → ${t.to} on ${t.on}`));

export class Coverage {
  readonly decisions = new Map<string, number>();
  readonly inputs = new Map<string, number>();
  readonly transitions = new Map<string, number>();
  readonly escalations = new Map<string, number>();
  readonly faults = new Map<string, number>();

  input(e: TronEvent): void {
    bump(this.inputs, e.type);
  }

  decision(e: TronEvent): void {
    bump(this.decisions, e.type);
    if (e.type === 'block.phase') bump(this.transitions, `${e.from} → ${e.to} on ${e.on}`);
    else if (e.type === 'escalation.raised') bump(this.escalations, `${e.trouble} → ${e.handler}`);
  }

  fault(key: string, n = 1): void {
    bump(this.faults, key, n);
  }

  merge(faults: ReadonlyMap<string, number>): void {
    for (const [k, n] of faults) this.fault(k, n);
  }

  missing(): { decisions: string[]; escalations: string[]; transitions: string[] } {
    return {
      decisions: DECISION_TYPES.filter((t) => !this.decisions.has(t)),
      escalations: ESCALATION_ROWS.filter((r) => !this.escalations.has(r)),
      transitions: TRANSITIONS.filter((t) => !this.transitions.has(t)),
    };
  }

  /** Complete when every decision type and every escalation row was reached. */
  complete(): boolean {
    const m = this.missing();
    return m.decisions.length === 0 && m.escalations.length === 0;
  }

  render(): string {
    const m = this.missing();
    const table = (title: string, all: readonly string[], seen: Map<string, number>) => {
      const rows = all.map((k) => `  ${String(seen.get(k) ?? 0).padStart(9)}  ${k}`);
      const extra = [...seen.keys()]
        .filter((k) => !all.includes(k))
        .map((k) => `  ${String(seen.get(k)).padStart(9)}  ${k} (not in the table)`);
      return `${title} (${all.filter((k) => seen.has(k)).length}/${all.length})\n${[...rows, ...extra].join('\n')}`;
    };
    const faults = [...this.faults.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, n]) => `  ${String(n).padStart(9)}  ${k}`);
    return [
      table('decision types', DECISION_TYPES, this.decisions),
      table('transitions', TRANSITIONS, this.transitions),
      table('escalation rows', ESCALATION_ROWS, this.escalations),
      `faults (${this.faults.size})\n${faults.join('\n')}`,
      m.decisions.length + m.escalations.length === 0
        ? 'coverage: every decision type and escalation row reached'
        : `coverage INCOMPLETE: never reached ${[...m.decisions, ...m.escalations].join(', ')}`,
    ].join('\n\n');
  }
}

function bump(m: Map<string, number>, k: string, n = 1): void {
  m.set(k, (m.get(k) ?? 0) + n);
}
