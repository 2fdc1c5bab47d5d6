/**
 * The variables of each prompt, from the folded state and the dispatch event. The
 * prompt files decide the wording; this decides what facts go in.
 */
import type { EventOf, TronEvent } from '../../core/events.ts';
import type { EngineState } from '../../core/state.ts';
import type { Block } from '../../project/register.ts';
import { deriveFacts } from '../../core/facts.ts';
import type { PromptName } from './prompts.ts';

export function numbered(criteria: readonly string[]): string {
  return criteria.map((c, i) => `c${i + 1}. ${c}`).join('\n');
}

/** The prompt file and its variables for one dispatched turn. */
export function promptVars(
  s: EngineState,
  e: EventOf<'block.dispatched'>,
  block: Block | undefined,
  extra: { diffstat: string; history: readonly TronEvent[]; elapsed?: string },
): { name: PromptName; vars: Record<string, string> } {
  const b = s.blocks.get(e.block)!;
  const title = b.info.title;
  const criteria = numbered(b.info.criteria);
  const brief = block?.brief ?? '';
  switch (e.kind) {
    case 'build':
      return {
        name: 'build',
        vars: { block: e.block, title, brief, criteria, trunk: s.trunk, guidance: b.guidance, feedback: b.feedback },
      };
    case 'challenge': {
      const facts = b.observed
        ? deriveFacts(b.observed, { trunkSha: s.trunkSha!, mainStatus: s.mainStatus, trunkAllowed: s.trunkHistory })
        : [];
      return { name: 'challenge', vars: { block: e.block, criteria, facts: facts.map((f) => `- ${f.name}: ${f.evidence}`).join('\n') } };
    }
    case 'review':
      return { name: 'review', vars: { block: e.block, title, brief, criteria, sha: e.sha ?? b.attested ?? '', diffstat: extra.diffstat } };
    case 'merge':
      return {
        name: 'merge',
        vars: {
          block: e.block,
          trunk: s.trunk,
          trunk_sha: s.trunkSha ?? '',
          conflicts: (b.rebased?.files ?? []).map((f) => `- ${f}`).join('\n') || '- (git named no file)',
        },
      };
    case 'probe':
      return { name: 'probe', vars: { block: e.block, elapsed: extra.elapsed ?? '' } };
    case 'restate':
      return { name: 'restate', vars: { reason: b.trouble?.detail ?? 'the reply could not be read' } };
    case 'architect':
      return {
        name: 'architect',
        vars: {
          block: e.block,
          title,
          criteria,
          trouble: b.trouble?.trouble ?? 'unknown',
          detail: b.trouble?.detail ?? '',
          attempts: `attempt ${b.attempt}; gate failures ${b.rounds.build}; review rounds ${b.rounds.review}; merge turns ${b.rounds.merge}; architect consultations ${b.architectCalls}`,
          history: historyOf(extra.history, e.block),
        },
      };
  }
}

/** A compact tail of what happened to the block: the last replies and gate results. */
function historyOf(events: readonly TronEvent[], id: string): string {
  const lines: string[] = [];
  for (const ev of events) {
    if (!('block' in ev) || ev.block !== id) continue;
    if (ev.type === 'reply.received')
      lines.push(`- ${ev.role} turn ${ev.turn}: ${ev.ok ? clip(ev.reply ?? '') : `failed (${ev.failure}): ${clip(ev.detail ?? '')}`}`);
    else if (ev.type === 'gate.failed')
      lines.push(
        `- gate failed: ${ev.facts
          .filter((f) => !f.ok)
          .map((f) => `${f.name}: ${clip(f.evidence)}`)
          .join('; ')}`,
      );
    else if (ev.type === 'reply.refused') lines.push(`- reply refused (${ev.kind}): ${clip(ev.message)}`);
    else if (ev.type === 'block.phase') lines.push(`- ${ev.from} → ${ev.to} on ${ev.on}`);
  }
  return lines.slice(-12).join('\n') || '(nothing yet)';
}

function clip(text: string, max = 300): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max)}…` : one;
}
