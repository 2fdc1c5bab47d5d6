/**
 * Test helper for the end-to-end tests of the `openai` worker: how a scripted model
 * tells, from one Chat Completions or Responses API request, which turn the engine asked
 * for, which role is asking, and how far into the turn it is. A real model reads the same things from
 * the conversation; the script reads them from the prompts' headings (prompts/*.md).
 */
import type { RecordedRequest } from './model-server.ts';
import type { TurnKind } from '../workers/adapter.ts';

export interface TurnView {
  kind: TurnKind | 'unknown';
  /** Model calls already made in this turn: assistant messages after the latest user message. */
  step: number;
  /** The tool results the model is answering now, by tool_call_id. */
  results: Record<string, string>;
  /** The role named by the session's system message. */
  role: 'builder' | 'reviewer' | 'architect' | 'unknown';
}

/** Each turn's prompt opens with one of these headings. */
const HEADINGS: Array<[RegExp, TurnKind]> = [
  [/^# Build block/m, 'build'],
  [/^# Evidence for block/m, 'challenge'],
  [/^# Review block/m, 'review'],
  [/^# Bring block/m, 'merge'],
  [/^# Restate your last reply/m, 'restate'],
  [/^# Block `[^`]+`: are you still working\?/m, 'probe'],
  [/^# Block `[^`]+` is stuck:/m, 'architect'],
];

export type Message = { role: string; content?: string | null; tool_call_id?: string };

/**
 * A Responses API request's instructions and input items as the Chat Completions
 * messages they stand for: one assistant message per model step (its text and function
 * calls), one tool message per function_call_output.
 */
export function messagesOf(request: RecordedRequest): Message[] {
  if (Array.isArray(request.body?.messages)) return request.body.messages;
  const items: Array<Record<string, unknown>> = Array.isArray(request.body?.input) ? request.body.input : [];
  const out: Message[] = [];
  if (typeof request.body?.instructions === 'string') out.push({ role: 'system', content: request.body.instructions });
  for (const item of items) {
    if (item.type === 'function_call_output') out.push({ role: 'tool', tool_call_id: String(item.call_id), content: String(item.output) });
    else if (item.type === 'function_call' || item.role === 'assistant') {
      const last = out.at(-1);
      if (last?.role === 'assistant') last.content = `${last.content ?? ''}${typeof item.content === 'string' ? item.content : ''}`;
      else out.push({ role: 'assistant', content: typeof item.content === 'string' ? item.content : null });
    } else if (item.role === 'user' || item.role === 'system') out.push({ role: String(item.role), content: String(item.content) });
  }
  return out;
}

/** Reads the turn a request belongs to. */
export function turnOf(request: RecordedRequest): TurnView {
  const messages: Message[] = messagesOf(request);
  const last = messages.findLastIndex((m) => m.role === 'user');
  const prompt = String(messages[last]?.content ?? '');
  const after = messages.slice(last + 1);
  const results: Record<string, string> = {};
  for (const m of after) if (m.role === 'tool') results[m.tool_call_id!] = String(m.content);
  const system = String(messages[0]?.role === 'system' ? messages[0].content : '');
  const role = (['builder', 'reviewer', 'architect'] as const).find((r) => system.includes(`You are the ${r}.`)) ?? 'unknown';
  return {
    kind: HEADINGS.find(([re]) => re.test(prompt))?.[1] ?? 'unknown',
    step: after.filter((m) => m.role === 'assistant').length,
    results,
    role,
  };
}

/** Usage of one scripted call: `total` tokens, 10 of them completion. */
export function usageOf(total: number): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return { prompt_tokens: total - 10, completion_tokens: 10, total_tokens: total };
}
