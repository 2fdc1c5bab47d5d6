/**
 * Budgets stop a runaway block or run ([budgets] in config.toml, folded from
 * `usage.recorded`). A block past `block_usd` or `block_tokens` has its running turn
 * stopped and goes to the operator with its spend; past `run_usd`, no new turn starts,
 * running turns are stopped, and the run ends with exit 3 naming the budget. The sums
 * are the fold's (`spend`), the same the report prints.
 */
import type { EventOf } from '../events.ts';
import type { BlockState, Spend } from '../state.ts';
import { escalate } from './escalate.ts';
import { TERMINAL, type Step } from './step.ts';

const usd = (n: number): string => `$${n.toFixed(4)}`;
const tokens = (n: number): string => `${n.toLocaleString('en-US')} tokens`;

/** What the block spent since its budget stretch began. */
function stretch(b: BlockState): Spend {
  return {
    tokens: b.spend.tokens - b.budgetFrom.tokens,
    usd: b.spend.usd - b.budgetFrom.usd,
    unpricedTokens: b.spend.unpricedTokens - b.budgetFrom.unpricedTokens,
  };
}

/** The block budget crossed, if any: `block_usd = 0.5` style, as the user wrote it. */
function blockLimitCrossed(step: Step, spent: Spend): string | undefined {
  const { blockUsd, blockTokens } = step.s.budgets;
  if (blockUsd !== undefined && spent.usd > blockUsd) return `block_usd = ${blockUsd}`;
  if (blockTokens !== undefined && spent.tokens > blockTokens) return `block_tokens = ${blockTokens}`;
  return undefined;
}

/** After every usage record: is the block, or the run, past its budget? */
export function onUsage(step: Step, e: EventOf<'usage.recorded'>): void {
  const s = step.s;
  const { runUsd } = s.budgets;
  if (runUsd !== undefined && s.spend.usd > runUsd && s.stopping === undefined) {
    step.emit({
      type: 'budget.exceeded',
      scope: 'run',
      limit: `run_usd = ${runUsd}`,
      spent_usd: s.spend.usd,
      spent_tokens: s.spend.tokens,
    });
    return;
  }
  const b = s.blocks.get(e.block);
  // Only a block still at work can overspend: a parked one was already stopped.
  if (!b || TERMINAL.has(b.phase) || b.phase === 'parked') return;
  const spent = stretch(b);
  const limit = blockLimitCrossed(step, spent);
  if (!limit) return;
  step.emit({ type: 'budget.exceeded', scope: 'block', block: b.id, limit, spent_usd: spent.usd, spent_tokens: spent.tokens });
  const unpriced = spent.unpricedTokens > 0 ? `, ${tokens(spent.unpricedTokens)} of it unpriced` : '';
  escalate(
    step,
    b.id,
    'budget_exceeded',
    `spent ${usd(spent.usd)} (${tokens(spent.tokens)}${unpriced}), past its budget ${limit}; its running turn was stopped. Answer RETRY to give it a new budget of the same size, or ABANDON`,
  );
}
