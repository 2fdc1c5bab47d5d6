/**
 * Coordinates for the workflow diagram: a fixed grid, orthogonal edges, integer
 * coordinates, nothing random, so the same graph always gives the same picture.
 *
 * Rows: the pass row (top lane); the trouble gateway just inside the exception lane;
 * the exception row. Edges between neighbours on a row are straight; other edges of the
 * pass row arch above it, nested by span so inner arches sit lower; boundary events drop
 * into the trouble gateway, which fans out to the first handlers through channels above
 * the exception row; other exception-row edges run in channels below it; and edges from
 * the exception lane back into the pass lane climb a gutter on the right and reach their
 * target through a corridor above every arch. Where several edges meet one side of a
 * shape, their attachment points are ordered so that nested edges do not cross.
 */
import type { Graph, GraphEdge, GraphNode } from './bpmn-graph.ts';
import { TROUBLE_GATEWAY } from './bpmn-graph.ts';
import { assignLevels, labelSize, LINE, type Bounds, type Point } from './bpmn-geometry.ts';

export interface Layout {
  shapes: Map<string, Bounds>;
  /** External labels of events, named gateways and flows. */
  labels: Map<string, Bounds>;
  waypoints: Map<string, Point[]>;
  pool: Bounds;
  lanes: { pass: Bounds; exception: Bounds };
}

const COL = 215;
const LEVEL = 26;
/** Pool band (30) + lane band (30) + room for the start event and its label. */
const FIRST_COL_X = 120;
const POOL_BAND = 30;
const BOUNDARY_DX = -25;

type Route = 'straight' | 'arch' | 'drop' | 'fan' | 'channel' | 'corridor-above' | 'corridor-below';
type Side = 'top' | 'bottom';
interface Attachment {
  edge: string;
  exit: boolean;
  /** Direction of travel of the edge's long segment. */
  right: boolean;
  level: number;
}

const SIZE: Record<GraphNode['kind'], { w: number; h: number }> = {
  task: { w: 100, h: 80 },
  start: { w: 36, h: 36 },
  end: { w: 36, h: 36 },
  boundary: { w: 36, h: 36 },
  gateway: { w: 50, h: 50 },
};

/** The diagram's coordinates; pure and deterministic. */
export function layoutGraph(graph: Graph): Layout {
  const node = new Map(graph.nodes.map((n) => [n.id, n]));
  const cx = (n: GraphNode): number => {
    if (n.kind === 'boundary') return FIRST_COL_X + n.col * COL + BOUNDARY_DX;
    if (n.id === TROUBLE_GATEWAY) {
      const boundaries = graph.edges.filter((e) => e.target === n.id).map((e) => node.get(e.source)!);
      const mid = boundaries[Math.floor((boundaries.length - 1) / 2)];
      if (mid) return FIRST_COL_X + mid.col * COL + BOUNDARY_DX;
    }
    return FIRST_COL_X + n.col * COL;
  };

  // 1. Route classes.
  const fanTargets = graph.edges.filter((e) => node.get(e.source)!.row === 'trouble').map((e) => node.get(e.target)!);
  const maxFanX = Math.max(-Infinity, ...fanTargets.map(cx));
  const route = new Map<string, Route>();
  const straightPairs = new Set<string>();
  for (const e of graph.edges) {
    const s = node.get(e.source)!;
    const t = node.get(e.target)!;
    const pair = `${s.id}>${t.id}`;
    let r: Route;
    if (s.kind === 'boundary') r = 'drop';
    else if (s.row === 'trouble') r = 'fan';
    else if (s.row === t.row && t.col === s.col + 1 && !straightPairs.has(pair)) {
      r = 'straight';
      straightPairs.add(pair);
    } else if (s.row === 'pass' && t.row === 'pass') r = 'arch';
    else if (s.row === 'exception' && t.row === 'pass') r = cx(s) > maxFanX ? 'corridor-above' : 'corridor-below';
    else r = 'channel';
    route.set(e.id, r);
  }
  const byRoute = (r: Route): GraphEdge[] => graph.edges.filter((e) => route.get(e.id) === r);

  // 2. Levels: arches over the pass row, channels under the exception row, corridors on top.
  const span = (e: GraphEdge, far = Infinity): { id: string; lo: number; hi: number } => {
    const a = cx(node.get(e.source)!);
    const b = route.get(e.id)!.startsWith('corridor') ? far : cx(node.get(e.target)!);
    return { id: e.id, lo: Math.min(a, b), hi: Math.max(a, b) };
  };
  const archLevel = assignLevels(byRoute('arch').map((e) => span(e)));
  const channelEdges = [...byRoute('channel'), ...byRoute('corridor-below')];
  const chanLevel = assignLevels(channelEdges.map((e) => span(e, 1e9)));
  const corridors = [
    ...byRoute('corridor-below').sort((a, b) => chanLevel.get(b.id)! - chanLevel.get(a.id)!),
    ...byRoute('corridor-above').sort((a, b) => cx(node.get(b.source)!) - cx(node.get(a.source)!)),
  ]; // outermost first
  const nArch = Math.max(0, ...[...archLevel.values()].map((l) => l + 1));
  const corridorLevel = new Map(corridors.map((e, j) => [e.id, nArch + corridors.length - 1 - j]));
  const maxRight = Math.max(...graph.nodes.map((n) => cx(n) + SIZE[n.kind].w / 2));
  const gutterX = new Map(corridors.map((e, j) => [e.id, maxRight + 50 + (corridors.length - 1 - j) * 20]));

  // 3. Rows (y of centres) and lanes.
  const totalLevels = nArch + corridors.length;
  const yPass = 60 + Math.max(0, totalLevels - 1) * LEVEL + 70;
  const levelY = (l: number): number => yPass - 70 - l * LEVEL;
  const passBottom = yPass + 110;
  const yTrouble = passBottom + 50;
  const fanSides = { left: 0, right: 0 };
  for (const t of fanTargets) {
    const gx = cx(node.get(TROUBLE_GATEWAY)!);
    if (cx(t) < gx) fanSides.left++;
    else if (cx(t) > gx) fanSides.right++;
  }
  const fanLevels = Math.max(1, fanSides.left, fanSides.right);
  const fanY = (i: number): number => yTrouble + 45 + i * LEVEL;
  const fanLabel = (e: GraphEdge): { width: number; height: number } => labelSize(e.name ?? '', 200);
  const fanLabelH = Math.max(0, ...byRoute('fan').map((e) => fanLabel(e).height));
  const rowTop = fanY(fanLevels - 1) + 20 + fanLabelH + 10;
  const yException = rowTop + 40;
  const chanY = (l: number): number => yException + 40 + 35 + l * LEVEL;
  const nChan = Math.max(0, ...[...chanLevel.values()].map((l) => l + 1));
  const poolBottom = (nChan > 0 ? chanY(nChan - 1) : yException + 60) + 40;
  const rowY = (n: GraphNode): number => {
    if (n.kind === 'boundary') return yPass + SIZE.task.h / 2;
    return n.row === 'pass' ? yPass : n.row === 'trouble' ? yTrouble : yException;
  };

  const shapes = new Map<string, Bounds>();
  for (const n of graph.nodes) {
    const { w, h } = SIZE[n.kind];
    shapes.set(n.id, { x: cx(n) - w / 2, y: rowY(n) - h / 2, width: w, height: h });
  }

  // 4. Attachment points on the top and bottom of shapes.
  const attach = new Map<string, Attachment[]>();
  const add = (id: string, side: Side, a: Attachment): void => {
    const key = `${id}|${side}`;
    attach.set(key, [...(attach.get(key) ?? []), a]);
  };
  for (const e of graph.edges) {
    const r = route.get(e.id)!;
    const sx = cx(node.get(e.source)!);
    const tx = cx(node.get(e.target)!);
    if (r === 'arch') {
      const l = archLevel.get(e.id)!;
      add(e.source, 'top', { edge: e.id, exit: true, right: tx > sx, level: l });
      add(e.target, 'top', { edge: e.id, exit: false, right: tx > sx, level: l });
    } else if (r === 'channel') {
      const l = chanLevel.get(e.id)!;
      add(e.source, 'bottom', { edge: e.id, exit: true, right: tx > sx, level: l });
      add(e.target, 'bottom', { edge: e.id, exit: false, right: tx > sx, level: l });
    } else if (r === 'corridor-below' || r === 'corridor-above') {
      const side: Side = r === 'corridor-below' ? 'bottom' : 'top';
      add(e.source, side, { edge: e.id, exit: true, right: true, level: chanLevel.get(e.id) ?? 0 });
      add(e.target, 'top', { edge: e.id, exit: false, right: false, level: corridorLevel.get(e.id)! });
    }
  }
  const points = new Map<string, Point>(); // `${edge}|exit` or `${edge}|entry`
  for (const [key, list] of attach) {
    const [id, side] = key.split('|') as [string, Side];
    const n = node.get(id)!;
    const by = (right: boolean, exit: boolean, outerFirst: boolean): Attachment[] =>
      list
        .filter((a) => a.right === right && a.exit === exit)
        .sort((a, b) => (outerFirst ? b.level - a.level : a.level - b.level) || (a.edge < b.edge ? -1 : 1));
    // Nested edges must not cross: inner ones attach nearer the side they come from.
    const ordered = [...by(true, false, false), ...by(false, true, false), ...by(true, true, true), ...by(false, false, true)];
    const spacing = n.kind === 'task' ? 16 : n.kind === 'gateway' ? 10 : 8;
    ordered.forEach((a, i) => {
      const dx = Math.round((i - (ordered.length - 1) / 2) * spacing);
      const b = shapes.get(id)!;
      const midY = b.y + b.height / 2;
      const half = b.height / 2;
      const reach = n.kind === 'task' ? half : n.kind === 'gateway' ? half - Math.abs(dx) : Math.round(Math.sqrt(half * half - dx * dx));
      points.set(`${a.edge}|${a.exit ? 'exit' : 'entry'}`, { x: cx(n) + dx, y: side === 'top' ? midY - reach : midY + reach });
    });
  }

  // 5. Waypoints.
  const waypoints = new Map<string, Point[]>();
  const labels = new Map<string, Bounds>();
  const labelAt = (id: string, text: string | undefined, x: number, y: number, anchor: 'above' | 'right', max = 170): void => {
    if (!text) return;
    const { width, height } = labelSize(text, max);
    const lx = anchor === 'above' ? Math.round(x - width / 2) : x;
    labels.set(id, { x: lx, y: anchor === 'above' ? y - 3 - height : y, width, height });
  };
  const gw = node.get(TROUBLE_GATEWAY);
  const fanOrder = { left: [] as GraphEdge[], right: [] as GraphEdge[] };
  for (const e of byRoute('fan')) {
    const tx = cx(node.get(e.target)!);
    if (gw && tx < cx(gw)) fanOrder.left.push(e);
    else if (gw && tx > cx(gw)) fanOrder.right.push(e);
  }
  const far = (e: GraphEdge): number => Math.abs(cx(node.get(e.target)!) - (gw ? cx(gw) : 0));
  fanOrder.left.sort((a, b) => far(b) - far(a));
  fanOrder.right.sort((a, b) => far(b) - far(a));

  for (const e of graph.edges) {
    const s = shapes.get(e.source)!;
    const t = shapes.get(e.target)!;
    const sc = { x: s.x + s.width / 2, y: s.y + s.height / 2 };
    const tc = { x: t.x + t.width / 2, y: t.y + t.height / 2 };
    const exit = points.get(`${e.id}|exit`);
    const entry = points.get(`${e.id}|entry`);
    let wp: Point[];
    switch (route.get(e.id)!) {
      case 'straight':
        wp = [
          { x: s.x + s.width, y: sc.y },
          { x: t.x, y: tc.y },
        ];
        labelAt(e.id, e.name, Math.round((s.x + s.width + t.x) / 2), sc.y, 'above');
        break;
      case 'arch': {
        const y = levelY(archLevel.get(e.id)!);
        wp = [exit!, { x: exit!.x, y }, { x: entry!.x, y }, entry!];
        labelAt(e.id, e.name, Math.round((exit!.x + entry!.x) / 2), y, 'above');
        break;
      }
      case 'drop': {
        const bottom = { x: sc.x, y: s.y + s.height };
        if (sc.x === tc.x) wp = [bottom, { x: tc.x, y: t.y }];
        else wp = [bottom, { x: sc.x, y: tc.y }, { x: sc.x < tc.x ? t.x : t.x + t.width, y: tc.y }];
        break;
      }
      case 'fan': {
        const top = { x: tc.x, y: t.y };
        const left = fanOrder.left.indexOf(e);
        const right = fanOrder.right.indexOf(e);
        if (left < 0 && right < 0) {
          wp = [{ x: sc.x, y: s.y + s.height }, top];
        } else {
          const [i, n, sign] = left >= 0 ? [left, fanOrder.left.length, -1] : [right, fanOrder.right.length, 1];
          const d = Math.round((s.width / 2) * ((i + 1) / (n + 1)));
          const from = { x: sc.x + sign * (s.width / 2 - d), y: sc.y + d };
          wp = [from, { x: from.x, y: fanY(i) }, { x: top.x, y: fanY(i) }, top];
        }
        if (e.name) {
          const { width, height } = fanLabel(e);
          labels.set(e.id, { x: top.x + 6, y: top.y - 6 - height, width, height });
        }
        break;
      }
      case 'channel': {
        const y = chanY(chanLevel.get(e.id)!);
        wp = [exit!, { x: exit!.x, y }, { x: entry!.x, y }, entry!];
        labelAt(e.id, e.name, Math.round((exit!.x + entry!.x) / 2), y, 'above');
        break;
      }
      case 'corridor-below':
      case 'corridor-above': {
        const below = route.get(e.id) === 'corridor-below';
        const y1 = below ? chanY(chanLevel.get(e.id)!) : rowTop - 20;
        const g = gutterX.get(e.id)!;
        const y2 = levelY(corridorLevel.get(e.id)!);
        wp = [exit!, { x: exit!.x, y: y1 }, { x: g, y: y1 }, { x: g, y: y2 }, { x: entry!.x, y: y2 }, entry!];
        labelAt(e.id, e.name, entry!.x + 10, y2 - 3 - LINE, 'right');
        break;
      }
    }
    waypoints.set(e.id, wp);
  }

  // 6. Labels of events and named gateways: below when that side is free, else above, else right.
  for (const n of graph.nodes) {
    if (!n.name || n.kind === 'task') continue;
    const b = shapes.get(n.id)!;
    const { width, height } = labelSize(n.name, 130);
    if (n.kind === 'boundary') {
      labels.set(n.id, { x: b.x + b.width + 4, y: b.y + b.height - 4, width, height });
      continue;
    }
    const used = (side: Side): boolean => (attach.get(`${n.id}|${side}`) ?? []).length > 0;
    const x = Math.round(b.x + b.width / 2 - width / 2);
    if (!used('bottom')) labels.set(n.id, { x, y: b.y + b.height + 4, width, height });
    else if (!used('top')) labels.set(n.id, { x, y: b.y - 4 - height, width, height });
    else labels.set(n.id, { x: b.x + b.width + 4, y: b.y, width, height });
  }

  const right = Math.max(maxRight, ...gutterX.values()) + 40;
  const pool = { x: 0, y: 0, width: right, height: poolBottom };
  const laneX = POOL_BAND;
  return {
    shapes,
    labels,
    waypoints,
    pool,
    lanes: {
      pass: { x: laneX, y: 0, width: right - laneX, height: passBottom },
      exception: { x: laneX, y: passBottom, width: right - laneX, height: poolBottom - passBottom },
    },
  };
}
