/**
 * A run laid over the workflow diagram: how many blocks took each flow of the spine and
 * reached each phase and handler, from the run's events alone. `tron view` draws these
 * counts on the diagram (engine/render/viewer-page.ts).
 *
 * Flows are found the way the diagram names them (engine/render/bpmn-graph.ts): a
 * `block.phase` is the flow `Flow_<from>_<on>_<to>` (and the flow into its phase's
 * gateway); an escalation enters the exception lane through its phase's boundary event,
 * then moves along its row of ESCALATION; the architect's choice takes a flow out of the
 * choice gateway. A node counts the blocks that arrived by any flow into it.
 */
import type { TronEvent } from '../core/events.ts';
import { ESCALATION, OUTCOMES, type Handler, type Trouble } from '../spine/spine.ts';
import { sanitizeId, type Graph } from './bpmn-graph.ts';

export interface Count {
  /** The blocks that took it, in the order they first did. */
  blocks: string[];
  /** How many times in all (a block may loop). */
  times: number;
}

export interface RunOverlay {
  run: string;
  edges: Record<string, Count>;
  nodes: Record<string, Count>;
  /** Where each block ended (its last phase in this run). */
  ended: Record<string, string>;
}

const CHOOSER: Handler = 'architect';

/** Counts per flow and node of `graph` for one run's events. */
export function runOverlay(events: readonly TronEvent[], graph: Graph, start: string): RunOverlay {
  const ids = new Set(graph.edges.map((e) => e.id));
  const targetOf = new Map(graph.edges.map((e) => [e.id, e.target]));
  const edges: Record<string, Count> = {};
  const take = (id: string, block: string): void => {
    if (!ids.has(id)) return;
    const c = edges[id] ?? { blocks: [], times: 0 };
    edges[id] = c;
    c.times++;
    if (!c.blocks.includes(block)) c.blocks.push(block);
  };
  const phase = new Map<string, string>();
  /** Per block, the trouble it is in and the furthest handler of its row it reached. */
  const chain = new Map<string, { trouble: Trouble; reached: number; paged?: boolean }>();
  const roleOf = new Map<string, string>();
  let run = '';

  for (const e of events) {
    switch (e.type) {
      case 'run.started':
        run = e.run;
        break;
      case 'worktree.requested':
        if (e.attempt === 1 && !phase.has(e.block)) take(sanitizeId(`Flow_start_${start}`), e.block);
        phase.set(e.block, start);
        break;
      case 'block.dispatched':
        roleOf.set(e.session, e.role);
        break;
      case 'block.phase':
        take(sanitizeId(`Flow_${e.from}_gate`), e.block);
        take(sanitizeId(`Flow_${e.from}_${e.on}_${e.to}`), e.block);
        phase.set(e.block, e.to);
        chain.delete(e.block);
        break;
      case 'escalation.raised': {
        const prev = chain.get(e.block);
        const row = ESCALATION[e.trouble].handlers as readonly Handler[];
        const at = row.indexOf(e.handler);
        if (prev?.trouble !== e.trouble) {
          // A new trouble: out of the phase through its boundary event, to its first handler.
          take(sanitizeId(`Flow_trouble_from_${phase.get(e.block) ?? start}`), e.block);
          take(`Flow_trouble_${e.handler}`, e.block);
          chain.set(e.block, { trouble: e.trouble, reached: at });
          break;
        }
        if (at <= prev.reached) break; // the same handler again (a probe after a re-issue): no new flow
        if (row[prev.reached] === CHOOSER) {
          // The architect's PAGE goes to the operator: the diagram takes it to parked through the choice gateway.
          chain.set(e.block, { trouble: e.trouble, reached: at, paged: true });
          break;
        }
        for (let i = prev.reached; i < at; i++) take(`Flow_${row[i]}_${row[i + 1]}`, e.block);
        chain.set(e.block, { trouble: e.trouble, reached: at });
        break;
      }
      case 'reply.accepted': {
        if (roleOf.get(e.session) !== 'architect' || !(e.word in OUTCOMES)) break;
        take(`Flow_${CHOOSER}_choice`, e.block);
        take(sanitizeId(`Flow_choice_${e.word}_${OUTCOMES[e.word as keyof typeof OUTCOMES].to}`), e.block);
        if (e.word === 'RETRY') {
          phase.set(e.block, OUTCOMES.RETRY.to);
          chain.delete(e.block);
        }
        break;
      }
      case 'block.parked': {
        const c = chain.get(e.block);
        const handler = c && (ESCALATION[c.trouble].handlers as readonly Handler[])[c.reached];
        if (handler === 'operator' && !c?.paged) take(sanitizeId(`Flow_operator_${OUTCOMES.PAGE.to}`), e.block);
        phase.set(e.block, 'parked');
        break;
      }
      case 'block.abandoned':
        phase.set(e.block, 'abandoned');
        break;
    }
  }

  // A node counts the blocks that arrived by its flows; the start event those that set out.
  const nodes: Record<string, Count> = {};
  for (const [id, c] of Object.entries(edges)) {
    const target = targetOf.get(id)!;
    const n = nodes[target] ?? { blocks: [], times: 0 };
    nodes[target] = n;
    n.times += c.times;
    for (const b of c.blocks) if (!n.blocks.includes(b)) n.blocks.push(b);
  }
  const setOut = edges[sanitizeId(`Flow_start_${start}`)];
  if (setOut) nodes.StartEvent_block = { blocks: [...setOut.blocks], times: setOut.blocks.length };
  return { run, edges, nodes, ended: Object.fromEntries(phase) };
}
