import { describe, expect, it } from 'vitest';
import { failureCause, lastMeaningfulLine, modelFromArgv, readOutput } from './output.ts';
import { costOf, priceFor } from './prices.ts';
import { envEntryMatches, minimalEnv } from './env.ts';

describe('the last meaningful line of a CLI', () => {
  it('skips blank lines, punctuation and terminal escapes', () => {
    expect(lastMeaningfulLine('Working…\n\x1b[31mAPI Error: Unable to connect to API (ConnectionRefused)\x1b[0m\n\n───\n')).toBe(
      'API Error: Unable to connect to API (ConnectionRefused)',
    );
    expect(lastMeaningfulLine('\n  \n---\n')).toBeUndefined();
  });
});

describe('failure causes from what CLIs print', () => {
  it.each([
    ['Not logged in · Please run /login', 'auth'],
    ['API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}', 'auth'],
    ['unexpected status 401 Unauthorized: Incorrect API key provided: sk-x', 'auth'],
    ["API Error: Can't reach the API server", 'network'],
    ['API Error: Unable to connect to API (ConnectionRefused)', 'network'],
    ['stream disconnected before completion: failed to lookup address information: Name does not resolve', 'network'],
    ['Claude AI usage limit reached|1764547200', 'quota'],
    ['You exceeded your current quota, please check your plan and billing details', 'quota'],
  ] as const)('%s → %s', (text, cause) => {
    expect(failureCause(text)).toBe(cause);
  });

  it('names no cause for an ordinary failure', () => {
    expect(failureCause('TypeError: undefined is not a function')).toBeUndefined();
    expect(failureCause('exited with 2')).toBeUndefined();
  });
});

describe('reading output formats', () => {
  it('takes text as it is, with no usage', () => {
    expect(readOutput('text', 'hi\n>>DONE\n', [])).toEqual({ reply: 'hi\n>>DONE\n', usage: [], structured: false });
  });

  it('finds the Claude result after a warning line, and falls back to the top-level usage with the --model argument', () => {
    const result = JSON.stringify({
      type: 'result',
      is_error: false,
      result: '>>DONE',
      total_cost_usd: 0.5,
      usage: { input_tokens: 10, cache_read_input_tokens: 5, cache_creation_input_tokens: 1, output_tokens: 2 },
    });
    expect(readOutput('claude-json', `warning: something\n${result}\n`, ['claude', '--model', 'sonnet'])).toEqual({
      reply: '>>DONE',
      usage: [{ model: 'sonnet', inputTokens: 11, cachedTokens: 5, outputTokens: 2, costUsd: 0.5 }],
      structured: true,
    });
  });

  it('reads a Claude error subtype without a result as a failure naming it', () => {
    const out = JSON.stringify({ type: 'result', subtype: 'error_max_turns', is_error: true, modelUsage: {} });
    expect(readOutput('claude-json', out, [])).toMatchObject({ reply: '', error: 'error_max_turns' });
  });

  it('sums Codex usage over turns and names the model from -m', () => {
    const lines = [
      { type: 'turn.completed', usage: { input_tokens: 100, cached_input_tokens: 20, output_tokens: 5 } },
      { type: 'item.completed', item: { type: 'agent_message', text: '>>DONE' } },
      { type: 'turn.completed', usage: { input_tokens: 50, cached_input_tokens: 50, output_tokens: 5 } },
    ].map((e) => JSON.stringify(e));
    expect(readOutput('codex-jsonl', lines.join('\n'), ['codex', 'exec', '-m', 'o4'])).toEqual({
      reply: '>>DONE',
      usage: [{ model: 'o4', inputTokens: 80, cachedTokens: 70, outputTokens: 10 }],
      structured: true,
    });
  });

  it('takes the last error event as the reason when Codex ends without a message or turn.failed', () => {
    const lines = [{ type: 'turn.started' }, { type: 'error', message: 'Reconnecting... waiting for network' }].map((e) =>
      JSON.stringify(e),
    );
    expect(readOutput('codex-jsonl', lines.join('\n'), [])).toMatchObject({ reply: '', error: 'Reconnecting... waiting for network' });
  });

  it('reads the model from -m, --model and --model=', () => {
    expect(modelFromArgv(['codex', 'exec', '-m', 'a'])).toBe('a');
    expect(modelFromArgv(['claude', '--model', 'b'])).toBe('b');
    expect(modelFromArgv(['x', '--model=c'])).toBe('c');
    expect(modelFromArgv(['x', '-m'])).toBeUndefined();
  });
});

describe('pricing usage', () => {
  const prices = { 'gpt-5.1': { input: 1.25, cached: 0.125, output: 10 }, 'claude-*': { input: 3, cached: 0.3, output: 15 } };

  it('prices tokens per million by the exact model, else the first pattern', () => {
    expect(priceFor('gpt-5.1', prices)).toBe(prices['gpt-5.1']);
    expect(priceFor('claude-sonnet-4-5', prices)).toBe(prices['claude-*']);
    expect(priceFor('gpt-5.1-codex', prices)).toBeUndefined();
    expect(costOf({ model: 'gpt-5.1', inputTokens: 1_000_000, cachedTokens: 2_000_000, outputTokens: 100_000 }, prices)).toEqual({
      costUsd: 1.25 + 0.25 + 1,
      by: 'prices',
    });
  });

  it('keeps a cost the worker reported, and knows none where nothing says', () => {
    expect(costOf({ model: 'gpt-5.1', inputTokens: 1, cachedTokens: 0, outputTokens: 1, costUsd: 0.42 }, prices)).toEqual({
      costUsd: 0.42,
      by: 'worker',
    });
    expect(costOf({ model: 'mystery', inputTokens: 1, cachedTokens: 0, outputTokens: 1 }, prices)).toBeUndefined();
  });
});

describe('env patterns', () => {
  it('match names by *, never TRON_* by a pattern, and leave unset variables unset', () => {
    expect(envEntryMatches('ANTHROPIC_*', 'ANTHROPIC_BASE_URL')).toBe(true);
    expect(envEntryMatches('ANTHROPIC_*', 'XANTHROPIC_X')).toBe(false);
    expect(envEntryMatches('*', 'TRON_ROLE')).toBe(false);
    expect(envEntryMatches('TRON_*', 'TRON_ROLE')).toBe(false);
    expect(envEntryMatches('TRON_ROLE', 'TRON_ROLE')).toBe(true);
    expect(minimalEnv({ PATH: '/bin', A_1: 'x', A_2: undefined, B: 'y' }, ['A_*', 'C'])).toEqual({ PATH: '/bin', A_1: 'x' });
  });
});
