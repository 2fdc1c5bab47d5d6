/**
 * What a start with nothing to do says (runtime/start-reads.ts decides it): the summary,
 * each blocked block and what it waits on, each parked block with its answer, and the
 * blocks an earlier run abandoned with the way out.
 */
import { blockerWords } from '../core/blocked.ts';
import type { Block } from '../project/register.ts';
import type { Idle } from '../runtime/start-reads.ts';
import { abandonedEarlierLine } from './abandoned-earlier.ts';

export function idleLines(idle: Idle, o: { previous: string; repoArg: string; blocks: readonly Block[] }): string[] {
  const lines = [`tron: nothing to do — ${idle.summary}; no new run (the latest: ${o.previous})`];
  // A block parked because its dependency was abandoned waits on that: no answer is offered for it.
  for (const { block, blocker } of idle.blocked) lines.push(`tron: ${block} is blocked: it ${blockerWords(blocker)}`);
  for (const r of idle.parked)
    lines.push(
      `tron: ${r.block} is parked: ${r.reason ?? ''}\n  answer: tron answer --repo ${o.repoArg} ${r.block} '>>RETRY {"guidance":"…"}'`,
    );
  const earlier = abandonedEarlierLine(
    idle.abandoned.map((r) => ({ block: r.block, reason: r.reason, file: o.blocks.find((b) => b.id === r.block)?.file })),
  );
  if (earlier) lines.push(earlier);
  return lines;
}
