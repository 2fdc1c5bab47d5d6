import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { runOverlay } from './viewer-run.ts';
import { buildGraph } from './bpmn-graph.ts';
import { loadSpine } from '../spine/load.ts';
import { readLog } from '../log/eventlog.ts';

const spine = loadSpine();
const graph = buildGraph(spine);

/** `id: blocks/times` for every flow a recorded run took. */
function flows(run: string): Record<string, string> {
  const events = readLog(join(import.meta.dirname, '..', '..', 'runs', run, 'events.jsonl')).events;
  const o = runOverlay(events, graph, spine.start);
  return Object.fromEntries(Object.entries(o.edges).map(([id, c]) => [id, `${c.blocks.length}/${c.times}`]));
}

describe('runOverlay', () => {
  it('counts the blocks that took each flow of the pass spine, and how often a block looped', () => {
    expect(flows('review-changes')).toEqual({
      Flow_start_build: '1/1',
      Flow_build_gate: '1/3',
      Flow_build_CONFIRMED_review: '1/3',
      Flow_review_gate: '1/3',
      Flow_review_CHANGES_build: '1/2',
      Flow_review_APPROVE_merge: '1/1',
      Flow_merge_gate: '1/1',
      Flow_merge_landed_wrap: '1/1',
      Flow_wrap_wrapped_landed: '1/1',
    });
  });

  it('tells two blocks apart where they took different paths (one landed at once, one re-reviewed after its MERGED changed the patch)', () => {
    const f = flows('merge-conflict');
    expect(f).toMatchObject({
      Flow_start_build: '2/2',
      Flow_review_APPROVE_merge: '2/3',
      Flow_merge_patch_changed_review: '1/1',
      Flow_merge_landed_wrap: '2/2',
      Flow_wrap_wrapped_landed: '2/2',
    });
  });

  it('follows a trouble from its phase through the handlers of its row to the operator, once each', () => {
    // Probe, re-issue, probe again, operator: the second probe is no new flow.
    expect(flows('hang-paged')).toEqual({
      Flow_start_build: '1/1',
      Flow_trouble_from_build: '1/1',
      Flow_trouble_probe: '1/1',
      Flow_probe_reissue: '1/1',
      Flow_reissue_operator: '1/1',
      Flow_operator_parked: '1/1',
    });
  });

  it("takes the architect's choice out of the choice gateway: PAGE to parked, RETRY back to build, ABANDON", () => {
    expect(flows('architect-page')).toMatchObject({
      Flow_trouble_architect: '1/1',
      Flow_architect_choice: '1/1',
      Flow_choice_PAGE_parked: '1/1',
    });
    expect(flows('architect-page')).not.toHaveProperty('Flow_operator_parked');
    expect(flows('garbage-architect-retry')).toMatchObject({
      Flow_trouble_restate: '1/1',
      Flow_restate_architect: '1/1',
      Flow_choice_RETRY_build: '1/1',
      Flow_wrap_wrapped_landed: '1/1',
    });
    expect(flows('architect-abandon')).toMatchObject({ Flow_choice_ABANDON_abandoned: '1/1' });
  });

  it("counts a node's blocks from the flows into it, and says where each block ended", () => {
    const events = readLog(join(import.meta.dirname, '..', '..', 'runs', 'architect-abandon', 'events.jsonl')).events;
    const o = runOverlay(events, graph, spine.start);
    expect(o.nodes.Phase_abandoned).toEqual({ blocks: ['core'], times: 1 });
    expect(o.nodes.StartEvent_block?.blocks).toEqual(['core']);
    expect(o.ended).toEqual({ core: 'abandoned', app: 'parked' });
    for (const id of [...Object.keys(o.edges), ...Object.keys(o.nodes)]) {
      expect(graph.edges.some((e) => e.id === id) || graph.nodes.some((n) => n.id === id), id).toBe(true);
    }
  });
});
