/**
 * The workflow diagram as an abstract graph: which BPMN elements exist, how they
 * connect, and on which row and column of the grid each sits. Built from the spine and
 * the ESCALATION table; engine/render/bpmn-layout.ts turns the grid into coordinates and
 * engine/render/bpmn.ts into BPMN 2.0 XML. Ids are derived from names only, so the same spine
 * always gives the same graph.
 *
 * Pass lane: a start event, then every phase reachable from `start` (a task, or an end
 * event when terminal), each phase with more than one transition followed by an
 * exclusive gateway that splits on them. Exception lane: the handlers of the escalation
 * spine, the architect's typed choice and the phases only escalation reaches (parked,
 * abandoned). Active phases (those where a worker speaks) carry an escalation boundary
 * event that leads into the exception lane.
 */
import {
  boundaryDetails,
  choiceDetails,
  gatewayDetails,
  handlerDetails,
  phaseDetails,
  transitionDetails,
  troubleGatewayDetails,
  type Details,
} from './bpmn-details.ts';
import { WORKER_ROLES } from '../core/roles.ts';
import { ESCALATION, HANDLERS, OUTCOMES, type Handler, type Phase, type Spine, type Trouble } from '../spine/spine.ts';

export type NodeKind = 'start' | 'task' | 'gateway' | 'end' | 'boundary';
export type Lane = 'pass' | 'exception';
/** Grid rows: the pass row, the trouble gateway between the lanes, the exception row. */
export type Row = 'pass' | 'trouble' | 'exception';

export interface GraphNode {
  id: string;
  kind: NodeKind;
  name?: string;
  lane: Lane;
  row: Row;
  col: number;
  /** Boundary events only: the id of the task they sit on. */
  attachedTo?: string;
  details: Details;
}

export interface GraphEdge {
  id: string;
  source: string;
  target: string;
  name?: string;
  details: Details;
}

export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
}

/** The handler that answers with a typed choice (OUTCOMES) instead of passing on. */
const CHOOSER: Handler = 'architect';
export const TROUBLE_GATEWAY = 'Gateway_trouble';
const CHOICE_GATEWAY = 'Gateway_choice';

/** An XML id (NCName) from names: anything but letters, digits and `_` becomes `_`. */
export function sanitizeId(text: string): string {
  return text.replace(/[^A-Za-z0-9_]/g, '_');
}

export const phaseId = (name: string): string => sanitizeId(`Phase_${name}`);
const gatewayId = (name: string): string => sanitizeId(`Gateway_${name}`);
const boundaryId = (name: string): string => sanitizeId(`Boundary_${name}`);
const handlerId = (h: Handler): string => `Handler_${h}`;

/** Phases reachable from `from` by transitions, breadth first, in file order. */
function reachable(byName: Map<string, Phase>, from: string[], allowed: (name: string) => boolean): string[] {
  const seen: string[] = [];
  const queue = from.filter(allowed);
  while (queue.length > 0) {
    const name = queue.shift()!;
    if (seen.includes(name)) continue;
    seen.push(name);
    for (const t of byName.get(name)!.transitions) if (allowed(t.to) && !seen.includes(t.to)) queue.push(t.to);
  }
  return seen;
}

/** The handler chains of the exception spine, as rows list them (the chooser ends a chain). */
function handlerOrder(): { order: Handler[]; first: Map<Handler, Trouble[]>; pairs: [Handler, Handler][] } {
  const first = new Map<Handler, Trouble[]>();
  const pairs: [Handler, Handler][] = [];
  for (const [trouble, row] of Object.entries(ESCALATION) as [Trouble, (typeof ESCALATION)[Trouble]][]) {
    const hs = row.handlers as readonly Handler[];
    first.set(hs[0]!, [...(first.get(hs[0]!) ?? []), trouble]);
    for (let i = 0; i + 1 < hs.length; i++) {
      if (hs[i] === CHOOSER) continue;
      if (!pairs.some(([a, b]) => a === hs[i] && b === hs[i + 1])) pairs.push([hs[i]!, hs[i + 1]!]);
    }
  }
  const used = (Object.keys(HANDLERS) as Handler[]).filter((h) => first.has(h) || pairs.some(([a, b]) => a === h || b === h));
  const heads = used.filter((h) => !pairs.some(([, b]) => b === h));
  const order: Handler[] = [];
  for (const head of [...heads, ...used]) {
    let h: Handler | undefined = head;
    while (h && !order.includes(h)) {
      order.push(h);
      h = pairs.find(([a]) => a === h)?.[1];
    }
  }
  return { order, first, pairs };
}

/** The diagram's graph for a spine; throws when a transition or outcome names no phase. */
export function buildGraph(spine: Spine): Graph {
  const byName = new Map(spine.phases.map((p) => [p.name, p]));
  const need = (name: string, where: string): Phase => {
    const p = byName.get(name);
    if (!p) throw new Error(`workflow diagram: ${where} names phase "${name}", which the spine does not define`);
    return p;
  };
  need(spine.start, 'start');
  for (const p of spine.phases) for (const t of p.transitions) need(t.to, `${p.name} --${t.on}-->`);
  for (const [word, o] of Object.entries(OUTCOMES)) need(o.to, `outcome ${word}`);

  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const edgeIds = new Set<string>();
  const edge = (id: string, source: string, target: string, details: Details, name?: string): void => {
    let unique = sanitizeId(id);
    for (let n = 2; edgeIds.has(unique); n++) unique = `${sanitizeId(id)}_${n}`;
    edgeIds.add(unique);
    edges.push({ id: unique, source, target, details, ...(name ? { name } : {}) });
  };

  const pass = reachable(byName, [spine.start], () => true);
  const isPass = (name: string): boolean => pass.includes(name);
  const outcomeTargets = [OUTCOMES.PAGE.to, ...Object.values(OUTCOMES).map((o) => o.to)];
  const exceptional = reachable(byName, outcomeTargets, (n) => !isPass(n));
  for (const p of spine.phases) if (!isPass(p.name) && !exceptional.includes(p.name)) exceptional.push(p.name);

  /** Lays out one phase (and its gateway) from `col`; returns the next free column. */
  const placePhase = (phase: Phase, lane: Lane, col: number): number => {
    const row: Row = lane === 'pass' ? 'pass' : 'exception';
    const kind: NodeKind = phase.terminal ? 'end' : 'task';
    nodes.push({ id: phaseId(phase.name), kind, name: phase.title, lane, row, col, details: phaseDetails(phase) });
    if (phase.transitions.length <= 1) return col + 1;
    nodes.push({ id: gatewayId(phase.name), kind: 'gateway', lane, row, col: col + 1, details: gatewayDetails(phase) });
    return col + 2;
  };

  nodes.push({
    id: 'StartEvent_block',
    kind: 'start',
    name: 'block ready',
    lane: 'pass',
    row: 'pass',
    col: 0,
    details: {
      title: 'Block ready',
      kind: 'start',
      description: `A block whose dependencies have landed takes a free slot and is dispatched into ${spine.start}.`,
      facts: [],
      words: [],
      transitions: [],
    },
  });
  let col = 1;
  for (const name of pass) col = placePhase(byName.get(name)!, 'pass', col);

  const active = pass.map((n) => byName.get(n)!).filter((p) => !p.terminal && WORKER_ROLES.some((r) => (p.words[r] ?? []).length > 0));
  for (const p of active) {
    const host = nodes.find((n) => n.id === phaseId(p.name))!;
    nodes.push({
      id: boundaryId(p.name),
      kind: 'boundary',
      name: 'trouble',
      lane: 'pass',
      row: 'pass',
      col: host.col,
      attachedTo: host.id,
      details: boundaryDetails(p),
    });
  }
  const hosts = active.map((p) => nodes.find((n) => n.id === phaseId(p.name))!.col);
  const troubleCol = hosts.length > 0 ? hosts[Math.floor((hosts.length - 1) / 2)]! : 1;
  nodes.push({
    id: TROUBLE_GATEWAY,
    kind: 'gateway',
    lane: 'exception',
    row: 'trouble',
    col: troubleCol,
    details: troubleGatewayDetails(),
  });

  const { order, first, pairs } = handlerOrder();
  col = 1;
  for (const h of order) {
    nodes.push({
      id: handlerId(h),
      kind: 'task',
      name: h[0]!.toUpperCase() + h.slice(1),
      lane: 'exception',
      row: 'exception',
      col: col++,
      details: handlerDetails(h, spine),
    });
    if (h === CHOOSER) {
      nodes.push({ id: CHOICE_GATEWAY, kind: 'gateway', lane: 'exception', row: 'exception', col: col++, details: choiceDetails() });
    }
  }
  for (const name of exceptional) col = placePhase(byName.get(name)!, 'exception', col);

  // Flows, in a fixed order: pass spine, escalation, handlers, outcomes.
  edge(`Flow_start_${spine.start}`, 'StartEvent_block', phaseId(spine.start), nodes[0]!.details);
  for (const phase of spine.phases) {
    const gated = phase.transitions.length > 1;
    const from = gated ? gatewayId(phase.name) : phaseId(phase.name);
    if (gated) edge(`Flow_${phase.name}_gate`, phaseId(phase.name), from, gatewayDetails(phase));
    for (const t of phase.transitions) {
      edge(`Flow_${phase.name}_${t.on}_${t.to}`, from, phaseId(t.to), transitionDetails(phase, t.on, t.to, t.when), t.on);
    }
  }
  for (const p of active) edge(`Flow_trouble_from_${p.name}`, boundaryId(p.name), TROUBLE_GATEWAY, boundaryDetails(p));
  for (const h of order) {
    const troubles = first.get(h);
    if (!troubles) continue;
    const d = troubleGatewayDetails();
    edge(
      `Flow_trouble_${h}`,
      TROUBLE_GATEWAY,
      handlerId(h),
      { ...d, title: `First to ${h}`, facts: d.facts.filter(([t]) => troubles.includes(t as Trouble)) },
      troubles.join(', '),
    );
  }
  for (const [a, b] of pairs) {
    const d = handlerDetails(a, spine);
    edge(
      `Flow_${a}_${b}`,
      handlerId(a),
      handlerId(b),
      { ...d, title: `${a} → ${b}`, description: `What ${a} cannot resolve passes to ${b}.` },
      'unresolved',
    );
  }
  if (order.includes(CHOOSER)) {
    edge(`Flow_${CHOOSER}_choice`, handlerId(CHOOSER), CHOICE_GATEWAY, choiceDetails());
    for (const [word, o] of Object.entries(OUTCOMES)) {
      const d = choiceDetails();
      edge(
        `Flow_choice_${word}_${o.to}`,
        CHOICE_GATEWAY,
        phaseId(o.to),
        { ...d, title: `${word} → ${o.to}`, description: o.effect, transitions: [] },
        word,
      );
    }
  }
  if (order.includes('operator')) {
    const d = handlerDetails('operator', spine);
    edge(
      `Flow_operator_${OUTCOMES.PAGE.to}`,
      handlerId('operator'),
      phaseId(OUTCOMES.PAGE.to),
      { ...d, title: `operator → ${OUTCOMES.PAGE.to}` },
      'paged',
    );
  }
  return { nodes, edges };
}
