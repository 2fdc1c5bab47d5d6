/**
 * Coverage of the spine by the SIM templates: every transition of the pass spine
 * (from, on, to — taken when a `block.phase` event records it) and every row of the
 * exception spine (`ESCALATION`, taken when an `escalation.raised` names its trouble)
 * must be reached by at least one passing template. So a new edge in the spine needs a
 * new scenario. Pure: it reads events, the spine and the table, nothing else.
 */
import type { TronEvent } from '../engine/core/events.ts';
import { ESCALATION, type Spine } from '../engine/spine/spine.ts';

export interface EdgeCoverage {
  from: string;
  on: string;
  to: string;
  templates: string[];
}

export interface RowCoverage {
  trouble: string;
  /** Templates that raised this trouble. */
  templates: string[];
  /** For each handler of the row, the templates that reached it. */
  handlers: Record<string, string[]>;
}

export interface Coverage {
  transitions: EdgeCoverage[];
  escalations: RowCoverage[];
  /** Moves recorded by block.phase events that are not transitions of the spine. */
  offSpine: EdgeCoverage[];
  complete: boolean;
}

/** What the runs of each template reached. */
export function coverage(spine: Spine, runs: ReadonlyArray<{ name: string; events: readonly TronEvent[] }>): Coverage {
  const key = (from: string, on: string, to: string) => `${from}\0${on}\0${to}`;
  const transitions = new Map<string, EdgeCoverage>();
  for (const p of spine.phases)
    for (const t of p.transitions) transitions.set(key(p.name, t.on, t.to), { from: p.name, on: t.on, to: t.to, templates: [] });
  const escalations = new Map<string, RowCoverage>(
    Object.entries(ESCALATION).map(([trouble, row]) => [
      trouble,
      { trouble, templates: [], handlers: Object.fromEntries(row.handlers.map((h) => [h, [] as string[]])) },
    ]),
  );
  const offSpine = new Map<string, EdgeCoverage>();
  const add = (list: string[], name: string) => {
    if (!list.includes(name)) list.push(name);
  };
  for (const { name, events } of runs) {
    for (const e of events) {
      if (e.type === 'block.phase') {
        const k = key(e.from, e.on, e.to);
        const edge = transitions.get(k) ?? offSpine.get(k) ?? { from: e.from, on: e.on, to: e.to, templates: [] };
        if (!transitions.has(k)) offSpine.set(k, edge);
        add(edge.templates, name);
      }
      if (e.type === 'escalation.raised') {
        const row = escalations.get(e.trouble);
        if (!row) continue;
        add(row.templates, name);
        const handled = row.handlers[e.handler] ?? [];
        row.handlers[e.handler] = handled;
        add(handled, name);
      }
    }
  }
  const t = [...transitions.values()];
  const r = [...escalations.values()];
  return {
    transitions: t,
    escalations: r,
    offSpine: [...offSpine.values()],
    complete: t.every((x) => x.templates.length > 0) && r.every((x) => x.templates.length > 0),
  };
}

const names = (list: readonly string[]) =>
  list.length === 0 ? 'UNREACHED' : list.length <= 4 ? list.join(', ') : `${list.slice(0, 4).join(', ')} (+${list.length - 4})`;

/** The coverage table, as `tron sim --coverage` prints it. */
export function renderCoverage(c: Coverage): string {
  const edge = (x: EdgeCoverage) => `${x.from} —${x.on}→ ${x.to}`;
  const w = Math.max(...[...c.transitions, ...c.offSpine].map((x) => edge(x).length), ...c.escalations.map((x) => x.trouble.length));
  const line = (label: string, rest: string) => `  ${label.padEnd(w)}  ${rest}`;
  const lines = ['spine transitions, and the templates that take them'];
  for (const x of c.transitions) lines.push(line(edge(x), names(x.templates)));
  lines.push('', 'escalation rows, the templates that raise them, and the handlers reached');
  for (const x of c.escalations) {
    const handlers = Object.entries(x.handlers)
      .map(([h, list]) => `${h} ${list.length > 0 ? '✓' : '·'}`)
      .join(' ');
    lines.push(line(x.trouble, `${names(x.templates)}${x.templates.length > 0 ? `; ${handlers}` : ''}`));
  }
  if (c.offSpine.length > 0) {
    lines.push('', 'moves outside the spine (block.phase events that are no transition of it)');
    for (const x of c.offSpine) lines.push(line(edge(x), names(x.templates)));
  }
  const reached = (list: ReadonlyArray<{ templates: string[] }>) => list.filter((x) => x.templates.length > 0).length;
  lines.push(
    '',
    `coverage: ${reached(c.transitions)}/${c.transitions.length} transitions, ${reached(c.escalations)}/${c.escalations.length} escalation rows${c.complete ? ' — complete' : ' — INCOMPLETE'}`,
  );
  return lines.join('\n');
}

/** What no passing template reaches, for a test's failure message. */
export function unreached(c: Coverage): string[] {
  return [
    ...c.transitions.filter((x) => x.templates.length === 0).map((x) => `transition ${x.from} —${x.on}→ ${x.to}`),
    ...c.escalations.filter((x) => x.templates.length === 0).map((x) => `escalation row ${x.trouble}`),
  ];
}
