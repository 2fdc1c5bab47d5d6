/**
 * Pricing usage that came without a cost. Claude Code reports what a turn cost; Codex
 * and most OpenAI-compatible servers report only tokens. `[prices]` in config.toml gives
 * USD per million tokens per model, and the engine prices such usage when it records it,
 * so the event carries the cost and every later sum (report, budgets) is a plain fold.
 * A cost the worker reported is never replaced.
 */
import type { Price, Prices } from '../project/config.ts';
import type { Usage } from './adapter.ts';
import { globRegExp } from './env.ts';

/** The price row for a model: its exact name, else the first pattern (`*`) that matches it. */
export function priceFor(model: string, prices: Prices): Price | undefined {
  const exact = prices[model];
  if (exact) return exact;
  for (const [key, price] of Object.entries(prices)) if (key.includes('*') && globRegExp(key).test(model)) return price;
  return undefined;
}

/** The cost of `usage` and who said it: the worker, or `[prices]`; nothing when neither knows. */
export function costOf(usage: Usage, prices: Prices): { costUsd: number; by: 'worker' | 'prices' } | undefined {
  if (usage.costUsd !== undefined) return { costUsd: usage.costUsd, by: 'worker' };
  const price = priceFor(usage.model, prices);
  if (!price) return undefined;
  const usd = (usage.inputTokens * price.input + usage.cachedTokens * price.cached + usage.outputTokens * price.output) / 1_000_000;
  return { costUsd: usd, by: 'prices' };
}
