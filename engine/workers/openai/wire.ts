/**
 * The two wire formats the built-in agent speaks: Chat Completions (`api = "chat"`, the
 * widest-supported) and the Responses API (`api = "responses"`, where codex-family models
 * are served). The conversation is stored one way — as Chat Completions messages
 * (session-store.ts) — and each model call translates it for the wire and its answer
 * back, so the turn loop, the tools, confinement, retries, probes and saved sessions are
 * the same code for both, and a session continues if `api` changes between runs.
 *
 * The Responses API is called statelessly (`store: false`, the whole conversation as
 * input items every call), as Chat Completions is: no server-side state to lose, and it
 * works with servers that do not store responses. Reasoning items are not carried back;
 * the model's messages and function calls are.
 */
import type OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionFunctionTool,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions';
import type { FunctionTool, Response, ResponseInputItem } from 'openai/resources/responses/responses';
import type { Usage } from '../adapter.ts';
import type { OpenAISettings } from '../../project/worker-settings.ts';
import { MalformedResponseError } from './retry.ts';

/** One model answer, whichever wire it came over. */
export interface ModelAnswer {
  /** The model the server says answered. */
  model: string;
  usage: Usage;
  /** Its text (the reply, when it calls no tool). */
  content: string | null;
  /** Its tool calls, as Chat Completions tool calls (how the conversation stores them). */
  toolCalls: ChatCompletionMessageToolCall[];
}

export interface WireCall {
  client: OpenAI;
  settings: OpenAISettings;
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionFunctionTool[];
  signal: AbortSignal;
}

/** One model call over the wire `settings.api` names. Throws what the client throws. */
export function callWire(call: WireCall): Promise<ModelAnswer> {
  return call.settings.api === 'responses' ? callResponses(call) : callChat(call);
}

async function callChat({ client, settings, messages, tools, signal }: WireCall): Promise<ModelAnswer> {
  const completion = await client.chat.completions.create(
    {
      model: settings.model,
      messages,
      tools,
      ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
    },
    { signal },
  );
  const checked = checkCompletion(completion);
  const message = checked.choices[0]!.message;
  const usage = checked.usage;
  const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    model: checked.model || settings.model,
    usage: {
      model: checked.model || settings.model,
      inputTokens: Math.max(0, (usage?.prompt_tokens ?? 0) - cached),
      cachedTokens: cached,
      outputTokens: usage?.completion_tokens ?? 0,
    },
    content: message.content ?? null,
    toolCalls: message.tool_calls ?? [],
  };
}

/** A 200 answer that is not a chat completion is treated as a garbled response, and retried. */
function checkCompletion(value: unknown): ChatCompletion {
  const completion = value as ChatCompletion;
  if (typeof value !== 'object' || value === null || !Array.isArray(completion.choices)) {
    throw new MalformedResponseError(`expected a chat completion, got ${JSON.stringify(value)?.slice(0, 200)}`);
  }
  if (!completion.choices[0]?.message) throw new MalformedResponseError('the completion has no message');
  return completion;
}

async function callResponses({ client, settings, messages, tools, signal }: WireCall): Promise<ModelAnswer> {
  const { instructions, input } = toResponsesInput(messages);
  const response = await client.responses.create(
    {
      model: settings.model,
      input,
      ...(instructions ? { instructions } : {}),
      tools: tools.map(toResponsesTool),
      store: false,
      ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
    },
    { signal },
  );
  return fromResponse(checkResponse(response), settings.model);
}

/** The stored conversation as Responses input: system messages become the instructions. */
export function toResponsesInput(messages: readonly ChatCompletionMessageParam[]): {
  instructions: string;
  input: ResponseInputItem[];
} {
  const instructions: string[] = [];
  const input: ResponseInputItem[] = [];
  for (const m of messages) {
    if (m.role === 'system' || m.role === 'developer') instructions.push(textOf(m.content));
    else if (m.role === 'user') input.push({ role: 'user', content: textOf(m.content) });
    else if (m.role === 'assistant') {
      const text = textOf(m.content ?? '');
      if (text) input.push({ role: 'assistant', content: text });
      for (const call of m.tool_calls ?? []) {
        if (call.type === 'function') {
          input.push({ type: 'function_call', call_id: call.id, name: call.function.name, arguments: call.function.arguments });
        }
      }
    } else if (m.role === 'tool') input.push({ type: 'function_call_output', call_id: m.tool_call_id, output: textOf(m.content) });
  }
  return { instructions: instructions.join('\n\n'), input };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
  return '';
}

function toResponsesTool(tool: ChatCompletionFunctionTool): FunctionTool {
  const f = tool.function;
  return {
    type: 'function',
    name: f.name,
    ...(f.description !== undefined ? { description: f.description } : {}),
    parameters: (f.parameters ?? null) as FunctionTool['parameters'],
    strict: false,
  };
}

/** A 200 answer that is not a response object is garbled, and retried. */
function checkResponse(value: unknown): Response {
  const response = value as Response;
  if (typeof value !== 'object' || value === null || !Array.isArray(response.output)) {
    throw new MalformedResponseError(`expected a response, got ${JSON.stringify(value)?.slice(0, 200)}`);
  }
  return response;
}

/** The answer in a response: its message text, its function calls, its usage. */
export function fromResponse(response: Response, fallbackModel: string): ModelAnswer {
  const texts: string[] = [];
  const toolCalls: ChatCompletionMessageFunctionToolCall[] = [];
  for (const item of response.output) {
    if (item.type === 'message') {
      for (const part of item.content) if (part.type === 'output_text') texts.push(part.text);
    } else if (item.type === 'function_call') {
      toolCalls.push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
    }
  }
  const usage = response.usage;
  const cached = usage?.input_tokens_details?.cached_tokens ?? 0;
  const model = response.model || fallbackModel;
  return {
    model,
    usage: {
      model,
      inputTokens: Math.max(0, (usage?.input_tokens ?? 0) - cached),
      cachedTokens: cached,
      outputTokens: usage?.output_tokens ?? 0,
    },
    content: texts.length > 0 ? texts.join('\n') : null,
    toolCalls,
  };
}
