import { BpmnModdle, type ModdleElement } from 'bpmn-moddle';
import { describe, expect, it } from 'vitest';
import { buildGraph } from './bpmn-graph.ts';
import { BPMN_BANNER, renderBpmn } from './bpmn.ts';
import { ESCALATION, HANDLERS, OUTCOMES, type Spine } from '../spine/spine.ts';
import { loadSpine } from '../spine/load.ts';

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface Parsed {
  warnings: string[];
  byId: Record<string, ModdleElement>;
  shapes: Map<string, Box>;
  labels: Map<string, Box>;
  edges: Map<string, { x: number; y: number }[]>;
}

async function parse(xml: string): Promise<Parsed> {
  const { rootElement, warnings, elementsById } = await new BpmnModdle().fromXML(xml);
  const diagrams = rootElement.diagrams as ModdleElement[];
  const plane = diagrams[0]!.plane as ModdleElement;
  const shapes = new Map<string, Box>();
  const labels = new Map<string, Box>();
  const edges = new Map<string, { x: number; y: number }[]>();
  for (const di of plane.planeElement as ModdleElement[]) {
    const id = (di.bpmnElement as ModdleElement).id!;
    const label = di.label as ModdleElement | undefined;
    if (label) labels.set(id, label.bounds as Box);
    if (di.$type === 'bpmndi:BPMNShape') shapes.set(id, di.bounds as Box);
    else
      edges.set(
        id,
        (di.waypoint as { x: number; y: number }[]).map((p) => ({ x: p.x, y: p.y })),
      );
  }
  return { warnings: warnings.map((w) => w.message), byId: elementsById, shapes, labels, edges };
}

const overlap = (a: Box, b: Box): boolean => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const inside = (p: { x: number; y: number }, b: Box): boolean => p.x >= b.x && p.x <= b.x + b.width && p.y >= b.y && p.y <= b.y + b.height;
const sanitize = (s: string): string => s.replace(/[^A-Za-z0-9_]/g, '_');

/** Flow nodes' shapes (not the pool or lanes) that overlap, boundary events excepting their host. */
function overlappingShapes(p: Parsed): string[] {
  const nodes = [...p.shapes].filter(([id]) => !/^(Participant|Lane)_/.test(id));
  const found: string[] = [];
  for (let i = 0; i < nodes.length; i++) {
    for (let j = i + 1; j < nodes.length; j++) {
      const [a, ba] = nodes[i]!;
      const [b, bb] = nodes[j]!;
      const host = (id: string): string | undefined => (p.byId[id]!.attachedToRef as ModdleElement | undefined)?.id;
      if (host(a) === b || host(b) === a) continue;
      if (overlap(ba, bb)) found.push(`${a} × ${b}`);
    }
  }
  return found;
}

/** Labels that overlap a flow node's shape or another label. */
function overlappingLabels(p: Parsed): string[] {
  const nodes = [...p.shapes].filter(([id]) => !/^(Participant|Lane)_/.test(id));
  const labels = [...p.labels];
  const found: string[] = [];
  for (const [id, box] of labels) for (const [n, nb] of nodes) if (overlap(box, nb)) found.push(`label ${id} × ${n}`);
  for (let i = 0; i < labels.length; i++)
    for (let j = i + 1; j < labels.length; j++)
      if (overlap(labels[i]![1], labels[j]![1])) found.push(`label ${labels[i]![0]} × label ${labels[j]![0]}`);
  return found;
}

/** Pairs of edges whose segments properly cross (not merely meet at a shared point). */
function crossings(p: Parsed): string[] {
  const segs = [...p.edges].flatMap(([id, pts]) => pts.slice(1).map((q, i) => ({ id, a: pts[i]!, b: q })));
  const found = new Set<string>();
  for (const h of segs.filter((s) => s.a.y === s.b.y)) {
    for (const v of segs.filter((s) => s.a.x === s.b.x && s.id !== h.id)) {
      const [x1, x2] = [Math.min(h.a.x, h.b.x), Math.max(h.a.x, h.b.x)];
      const [y1, y2] = [Math.min(v.a.y, v.b.y), Math.max(v.a.y, v.b.y)];
      if (v.a.x > x1 && v.a.x < x2 && h.a.y > y1 && h.a.y < y2) found.add([h.id, v.id].sort().join(' × '));
    }
  }
  return [...found];
}

/** The real spine with one more phase, qa, between review and merge. */
function withQaPhase(): Spine {
  const spine = structuredClone(loadSpine());
  const review = spine.phases.find((p) => p.name === 'review')!;
  review.transitions.find((t) => t.on === 'APPROVE')!.to = 'qa';
  const at = spine.phases.indexOf(review) + 1;
  spine.phases.splice(at, 0, {
    name: 'qa',
    title: 'Quality check',
    description: 'A second reviewer checks the attested sha.',
    gate: 'review',
    terminal: false,
    attempts: 2,
    timeMs: 600_000,
    words: { reviewer: ['APPROVE', 'CHANGES'] },
    transitions: [
      { on: 'APPROVE', to: 'merge', when: 'the second reviewer accepts' },
      { on: 'CHANGES', to: 'build', when: 'the second reviewer asks for changes' },
    ],
  });
  return spine;
}

describe('renderBpmn', () => {
  it('writes BPMN 2.0 that bpmn-moddle re-imports without a single warning', async () => {
    const xml = await renderBpmn(loadSpine());
    expect(xml.startsWith(`<?xml version="1.0" encoding="UTF-8"?>\n${BPMN_BANNER}\n<bpmn:definitions`)).toBe(true);
    expect((await parse(xml)).warnings).toEqual([]);
  });

  it('gives every phase of the spine a shape with diagram interchange, terminal phases as end events', async () => {
    const spine = loadSpine();
    const p = await parse(await renderBpmn(spine));
    for (const phase of spine.phases) {
      const el = p.byId[`Phase_${phase.name}`];
      expect(el?.$type, phase.name).toBe(phase.terminal ? 'bpmn:EndEvent' : 'bpmn:Task');
      expect(el?.name).toBe(phase.title);
      expect(p.shapes.get(`Phase_${phase.name}`)?.width, phase.name).toBeGreaterThan(0);
    }
    expect(p.byId.Phase_landed?.$type).toBe('bpmn:EndEvent');
    expect(p.byId.Phase_abandoned?.$type).toBe('bpmn:EndEvent');
    const start = p.byId.StartEvent_block!;
    expect((start.outgoing as ModdleElement[]).map((f) => (f.targetRef as ModdleElement).id)).toEqual([`Phase_${spine.start}`]);
  });

  it('draws every transition as a named sequence flow whose edge runs from its phase to its target', async () => {
    const spine = loadSpine();
    const p = await parse(await renderBpmn(spine));
    for (const phase of spine.phases) {
      for (const t of phase.transitions) {
        const id = sanitize(`Flow_${phase.name}_${t.on}_${t.to}`);
        const flow = p.byId[id];
        expect(flow?.$type, id).toBe('bpmn:SequenceFlow');
        expect(flow!.name).toBe(t.on);
        const source = flow!.sourceRef as ModdleElement;
        expect([`Phase_${phase.name}`, `Gateway_${phase.name}`]).toContain(source.id);
        expect((flow!.targetRef as ModdleElement).id).toBe(`Phase_${t.to}`);
        const points = p.edges.get(id)!;
        expect(points.length, id).toBeGreaterThanOrEqual(2);
        expect(inside(points[0]!, p.shapes.get(source.id!)!), `${id} starts on its source`).toBe(true);
        expect(inside(points.at(-1)!, p.shapes.get(`Phase_${t.to}`)!), `${id} ends on its target`).toBe(true);
      }
    }
  });

  it('splits a phase with several transitions at an exclusive gateway and keeps incoming/outgoing consistent', async () => {
    const p = await parse(await renderBpmn(loadSpine()));
    expect(p.byId.Gateway_merge?.$type).toBe('bpmn:ExclusiveGateway');
    expect(((p.byId.Gateway_merge!.outgoing as ModdleElement[]) ?? []).map((f) => f.name)).toEqual([
      'landed',
      'patch.changed',
      'culprit',
      'gate.failed',
    ]);
    expect(p.byId.Gateway_wrap).toBeUndefined();
    for (const el of Object.values(p.byId).filter((e) => e.$type === 'bpmn:SequenceFlow')) {
      expect(((el.sourceRef as ModdleElement).outgoing as ModdleElement[]).includes(el), el.id).toBe(true);
      expect(((el.targetRef as ModdleElement).incoming as ModdleElement[]).includes(el), el.id).toBe(true);
    }
  });

  it('overlays the exception spine: boundary escalations on worker phases, every handler a task, the outcomes as flows', async () => {
    const p = await parse(await renderBpmn(loadSpine()));
    for (const phase of ['build', 'review', 'merge']) {
      const b = p.byId[`Boundary_${phase}`]!;
      expect(b.$type).toBe('bpmn:BoundaryEvent');
      expect((b.attachedToRef as ModdleElement).id).toBe(`Phase_${phase}`);
      expect((b.eventDefinitions as ModdleElement[])[0]!.$type).toBe('bpmn:EscalationEventDefinition');
    }
    expect(p.byId.Boundary_wrap).toBeUndefined();
    const lane = p.byId.Lane_exception!;
    expect(lane.name).toBe('Exception spine');
    const inLane = (lane.flowNodeRef as ModdleElement[]).map((e) => e.id);
    for (const h of Object.keys(HANDLERS)) expect(inLane, h).toContain(`Handler_${h}`);
    expect(inLane).toEqual(expect.arrayContaining(['Phase_parked', 'Phase_abandoned', 'Gateway_trouble']));
    for (const [word, o] of Object.entries(OUTCOMES)) {
      const flow = p.byId[`Flow_choice_${word}_${o.to}`]!;
      expect((flow.sourceRef as ModdleElement).id).toBe('Gateway_choice');
      expect((flow.targetRef as ModdleElement).id).toBe(`Phase_${o.to}`);
      expect(flow.name).toBe(word);
    }
    const firstHandlers = new Set(Object.values(ESCALATION).map((row) => row.handlers[0]));
    for (const h of firstHandlers) expect(p.byId[`Flow_trouble_${h}`]?.$type, h).toBe('bpmn:SequenceFlow');
  });

  it("documents each phase's legal words by role, gate, attempts and time budget, and each trouble's handler order", async () => {
    const p = await parse(await renderBpmn(loadSpine()));
    const doc = (id: string): string => (p.byId[id]!.documentation as ModdleElement[])[0]!.text as string;
    expect(doc('Phase_build')).toContain('- builder: DONE, CONFIRMED, BLOCKED, WORKING');
    expect(doc('Phase_build')).toContain('Gate: truth');
    expect(doc('Phase_build')).toContain('Attempts: 3');
    expect(doc('Phase_build')).toContain('Time budget: 1h');
    expect(doc('Phase_review')).toContain('- reviewer: APPROVE, CHANGES, WORKING');
    expect(doc('Phase_build')).toContain('- CONFIRMED → review: every fact held');
    expect(doc('Gateway_trouble')).toContain('uninterpretable: restate → architect → operator');
    expect(doc('Handler_architect')).toContain('Budget: 2 consultations per block');
  });

  it('lays shapes out without overlaps, labels clear of shapes and of each other, every edge orthogonal', async () => {
    for (const spine of [loadSpine(), withQaPhase()]) {
      const p = await parse(await renderBpmn(spine));
      expect(overlappingShapes(p)).toEqual([]);
      expect(overlappingLabels(p)).toEqual([]);
      for (const [id, pts] of p.edges) {
        for (const [i, q] of pts.slice(1).entries()) expect(q.x === pts[i]!.x || q.y === pts[i]!.y, id).toBe(true);
      }
      const pool = p.shapes.get('Participant_block')!;
      for (const [id, box] of p.shapes)
        expect(inside({ x: box.x, y: box.y }, pool) && inside({ x: box.x + box.width, y: box.y + box.height }, pool), id).toBe(true);
    }
  });

  it('keeps the real spine readable: at most one pair of edges crosses', async () => {
    const p = await parse(await renderBpmn(loadSpine()));
    expect(crossings(p).length).toBeLessThanOrEqual(1);
  });

  it('renders the same bytes every time', async () => {
    const [a, b] = [await renderBpmn(loadSpine()), await renderBpmn(loadSpine())];
    expect(a).toBe(b);
  });

  it('follows a changed spine: an extra phase and an extra transition show up as shapes, flows and a new gateway', async () => {
    const before = await renderBpmn(loadSpine());
    const spine = withQaPhase();
    spine.phases.find((ph) => ph.name === 'wrap')!.transitions.push({ on: 'gate.failed', to: 'wrap', when: 'retry the cleanup' });
    const xml = await renderBpmn(spine);
    expect(xml).not.toBe(before);
    const p = await parse(xml);
    expect(p.warnings).toEqual([]);
    expect(p.byId.Phase_qa?.name).toBe('Quality check');
    expect(p.shapes.has('Phase_qa')).toBe(true);
    expect(p.byId.Boundary_qa?.$type).toBe('bpmn:BoundaryEvent');
    expect(p.edges.has('Flow_review_APPROVE_qa')).toBe(true);
    expect(p.edges.has('Flow_qa_CHANGES_build')).toBe(true);
    expect(p.byId.Flow_review_APPROVE_merge).toBeUndefined();
    expect(p.byId.Gateway_wrap?.$type).toBe('bpmn:ExclusiveGateway');
    expect(p.edges.has('Flow_wrap_gate_failed_wrap')).toBe(true);
  });

  it('refuses a spine whose transition names a phase that does not exist', () => {
    const spine = structuredClone(loadSpine());
    spine.phases[0]!.transitions.push({ on: 'DONE', to: 'nowhere', when: 'never' });
    expect(() => buildGraph(spine)).toThrow(/"nowhere"/);
  });
});
