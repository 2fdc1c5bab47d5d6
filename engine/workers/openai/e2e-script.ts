/**
 * Test helper for the end-to-end tests of the `openai` worker: how a scripted model
 * tells, from one Chat Completions request, which turn the engine asked for, which role
 * is asking, and how far into the turn it is. A real model reads the same things from
 * the conversation; the script reads them from the prompts' headings (prompts/*.md).
 */
import type { RecordedRequest } from '../../testing/model-server.ts';
import type { TurnKind } from '../adapter.ts';

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

type Message = { role: string; content?: string | null; tool_call_id?: string };

/** Reads the turn a request belongs to. */
export function turnOf(request: RecordedRequest): TurnView {
  const messages: Message[] = request.body?.messages ?? [];
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
