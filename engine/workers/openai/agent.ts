/**
 * The built-in coding agent: a bounded reason–act loop on any OpenAI-compatible server,
 * over Chat Completions or, with `api = "responses"`, the Responses API (wire.ts). One turn appends the prompt to the session's conversation, then
 * alternates model calls and tool calls until the model answers without tools (the
 * reply), or a cap ends it: `max_steps` model calls or `max_tokens_per_turn` tokens
 * (failure `step_cap` — the turn's work budget, not an API fault), the turn's time
 * budget (`timeout`) or the engine's signal (`aborted`). runTurn never throws: every
 * failure is a TurnOutcome the engine can record and escalate.
 */
import { sleep, systemClock } from '../../os/clock.ts';
import OpenAI from 'openai';
import type { ChatCompletionAssistantMessageParam, ChatCompletionToolMessageParam } from 'openai/resources/chat/completions';
import { parseDuration } from '../../core/duration.ts';
import type { FailureCause, TurnObserver, TurnOutcome, TurnRequest, WorkerAdapter } from '../adapter.ts';
import { minimalEnv } from '../env.ts';
import { turnConfinement, type Sandbox } from '../sandbox.ts';
import { classifyFailure, retryDelayMs } from './retry.ts';
import { callWire, type ModelAnswer } from './wire.ts';
import { systemMessage } from './system.ts';
import { TurnBudget } from './turn.ts';
import type { OpenAISettings } from '../../project/worker-settings.ts';
import { loadConversation, saveConversation, type Conversation } from './session-store.ts';
import { describeCall, runTool, toolDefinitions, toolsForRole, type ToolContext } from './tools.ts';

export interface OpenAIWorkerDeps {
  /** Where the API key is read from (by `api_key_env`) and the base of `run` commands' environment. */
  env: Readonly<Record<string, string | undefined>>;
  /** Waits between retries; tests pass a fast one. */
  sleep?: (ms: number) => Promise<void>;
  /** The time, for Retry-After given as an HTTP date. */
  now?: () => number;
  /** Where `run` commands are confined; unconfined unless given. */
  sandbox?: Sandbox;
}

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** An adapter of kind 'openai' for one `[workers.<role>]` table. */
export function createOpenAIWorker(settings: OpenAISettings, deps: OpenAIWorkerDeps): WorkerAdapter {
  /** Liveness questions waiting to be asked between the steps of a running turn, by session. */
  const probes = new Map<string, string>();
  /** Sessions with a model call open, and their turn's observer: an open call within its timeout is alive. */
  const calling = new Map<string, TurnObserver>();
  /** The command a session's `run` tool is running now, for the probe's process signs (CPU). */
  const commands = new Map<string, { pid: number; startTime: string }>();
  return {
    kind: 'openai',
    async runTurn(request, observer) {
      try {
        return await runOpenAITurn(settings, deps, request, observer, { probes, calling, commands });
      } catch (error) {
        return { ok: false, failure: 'crash', detail: `the openai worker failed unexpectedly: ${describe(error)}` };
      } finally {
        probes.delete(request.session);
        calling.delete(request.session);
        commands.delete(request.session);
      }
    },
    running(session) {
      const command = commands.get(session);
      return command ? { ...command, outputBytes: 0 } : undefined;
    },
    probe(session, question) {
      probes.set(session, question);
      calling.get(session)?.progress?.('a model call is in flight');
    },
  };
}

/** The answer to a liveness question: exactly a `>>WORKING` line, optionally with a payload. */
const WORKING_LINE = /^>>WORKING(?:[ \t]+(\{.*\}))?[ \t]*$/m;

async function runOpenAITurn(
  settings: OpenAISettings,
  deps: OpenAIWorkerDeps,
  request: TurnRequest,
  observer: TurnObserver,
  live: {
    probes: Map<string, string>;
    calling: Map<string, TurnObserver>;
    commands: Map<string, { pid: number; startTime: string }>;
  },
): Promise<TurnOutcome> {
  const { probes, calling, commands } = live;
  const table = `[workers.${request.role}]`;
  const keyName = settings.api_key_env;
  const apiKey = deps.env[keyName];
  if (!apiKey) {
    return fail(
      'api',
      `$${keyName} is not set: the ${request.role}'s openai worker reads its API key from it (api_key_env in ${table} of .tron/config.toml); export ${keyName} before starting tron, or name another variable in api_key_env`,
    );
  }
  const baseURL = settings.base_url ?? DEFAULT_BASE_URL;
  const clock = request.clock ?? systemClock;
  // A retry's wait keeps the process alive, as the call it waits to make would.
  const budget = new TurnBudget(request.timeoutMs, request.signal, deps.sleep ?? ((ms) => sleep(clock, ms, { keepAlive: true })), clock);
  try {
    const loaded = await loadConversation(request.runDir, request.session);
    if (!loaded.ok) return fail('crash', loaded.error);
    const conversation: Conversation = loaded.conversation ?? {
      v: 1,
      session: request.session,
      role: request.role,
      messages: [{ role: 'system', content: systemMessage(request.role, toolsForRole(request.role)) }],
    };
    conversation.messages.push({ role: 'user', content: request.prompt });
    await saveConversation(request.runDir, conversation);

    // Every option that the client would otherwise read from process.env is given.
    const client = new OpenAI({
      apiKey,
      baseURL,
      organization: null,
      project: null,
      adminAPIKey: null,
      webhookSecret: null,
      maxRetries: 0,
      timeout: parseDuration(settings.request_timeout) ?? 300_000,
    });
    const tools = toolDefinitions(toolsForRole(request.role));
    const toolContext: ToolContext = {
      cwd: request.cwd,
      role: request.role,
      env: minimalEnv(deps.env, []),
      ...(deps.sandbox ? { sandbox: deps.sandbox, confinement: turnConfinement(request, [], deps.env) } : {}),
      toolTimeoutMs: parseDuration(settings.tool_timeout) ?? 300_000,
      signal: budget.signal,
      clock,
      onSpawn: (info) => {
        commands.set(request.session, info);
        observer.spawned(info);
      },
      onExit: (info) => {
        if (commands.get(request.session)?.pid === info.pid) commands.delete(request.session);
        observer.exited(info);
      },
    };
    let tokens = 0;
    let asked = false;

    for (let step = 1; step <= settings.max_steps; step++) {
      calling.set(request.session, observer);
      const call = await callModel(client, settings, conversation, tools, budget, observer, deps, { table, keyName, baseURL });
      calling.delete(request.session);
      if (!call.ok) return call.outcome;
      const answer = call.answer;
      tokens += answer.usage.inputTokens + answer.usage.cachedTokens + answer.usage.outputTokens;
      observer.usage(answer.usage);

      const message = { content: answer.content };
      const calls = answer.toolCalls;
      const assistant: ChatCompletionAssistantMessageParam = { role: 'assistant', content: message.content ?? null };
      if (calls.length > 0) assistant.tool_calls = calls;
      conversation.messages.push(assistant);
      await saveConversation(request.runDir, conversation);
      if (calls.length === 0 && asked && WORKING_LINE.test(message.content ?? '')) {
        // The answer to the liveness question: a sign of life; the turn goes on.
        asked = false;
        observer.progress?.(`working: ${(message.content ?? '').trim().slice(0, 200)}`);
        conversation.messages.push({
          role: 'user',
          content: 'Noted. Go on with the turn where you left off, and end it as the turn asks.',
        });
        await saveConversation(request.runDir, conversation);
        continue;
      }
      asked = false;
      if (calls.length === 0) return { ok: true, reply: message.content ?? '' };

      const cap = settings.max_tokens_per_turn;
      if (cap !== undefined && tokens > cap) {
        conversation.messages.push(...calls.map((c) => toolResult(c.id, 'error: not run: the turn used up its token budget')));
        await saveConversation(request.runDir, conversation);
        return fail(
          'step_cap',
          `the turn used ${tokens} tokens, over max_tokens_per_turn = ${cap} in ${table}, before the model gave a final answer`,
        );
      }

      observer.progress?.(
        `step ${step}: ${calls.map((c) => (c.type === 'function' ? describeCall(c.function.name, c.function.arguments) : c.type)).join('; ')}`,
      );
      const results = await Promise.all(
        calls.map((c) =>
          c.type === 'function'
            ? runTool(c.function.name, c.function.arguments, toolContext)
            : Promise.resolve('error: only function tools exist here'),
        ),
      );
      conversation.messages.push(...calls.map((c, i) => toolResult(c.id, results[i]!)));
      await saveConversation(request.runDir, conversation);
      // Each finished step is a sign of life for the liveness probe (usage counts too).
      observer.progress?.(`step ${step}: ${calls.length} tool call(s) done`);
      if (budget.ended) return budget.outcome();
      // Between steps: the engine's liveness question, if it asked one, in this same conversation.
      const question = probes.get(request.session);
      if (question !== undefined) {
        probes.delete(request.session);
        conversation.messages.push({ role: 'user', content: question });
        await saveConversation(request.runDir, conversation);
        asked = true;
      }
    }
    return fail('step_cap', `the turn used all ${settings.max_steps} model calls (max_steps in ${table}) without a final answer`);
  } finally {
    budget.dispose();
  }
}

type Call = { ok: true; answer: ModelAnswer } | { ok: false; outcome: TurnOutcome };

/** One model call, with the transient failures retried and reported; configuration faults fail fast. */
async function callModel(
  client: OpenAI,
  settings: OpenAISettings,
  conversation: Conversation,
  tools: ReturnType<typeof toolDefinitions>,
  budget: TurnBudget,
  observer: TurnObserver,
  deps: OpenAIWorkerDeps,
  where: { table: string; keyName: string; baseURL: string },
): Promise<Call> {
  for (let attempt = 0; ; attempt++) {
    if (budget.ended) return { ok: false, outcome: budget.outcome() };
    let failure: ReturnType<typeof classifyFailure>;
    try {
      const answer = await callWire({ client, settings, messages: conversation.messages, tools, signal: budget.signal });
      return { ok: true, answer };
    } catch (error) {
      if (budget.ended) return { ok: false, outcome: budget.outcome() };
      failure = classifyFailure(error, (deps.now ?? Date.now)());
    }
    switch (failure.kind) {
      case 'aborted':
        return { ok: false, outcome: budget.outcome() };
      case 'unexpected':
        return { ok: false, outcome: fail('crash', `the model call failed unexpectedly: ${failure.message}`) };
      case 'auth':
        return {
          ok: false,
          outcome: fail(
            'api',
            `the model server refused the API key from $${where.keyName} (${failure.message}); set ${where.keyName} to a key valid for ${where.baseURL}, or fix ${where.table} api_key_env in .tron/config.toml`,
            'auth',
          ),
        };
      case 'request':
        return {
          ok: false,
          outcome: fail(
            'api',
            `the model server rejected the request (${failure.message}); check model = ${JSON.stringify(settings.model)} and base_url = ${JSON.stringify(where.baseURL)} in ${where.table} of .tron/config.toml${settings.api === 'responses' ? ', and that the server offers the Responses API (api = "responses"; remove it for Chat Completions)' : ''}`,
          ),
        };
      case 'transient': {
        const status = failure.status !== undefined ? ` (${failure.status})` : '';
        if (attempt >= settings.max_retries) {
          return {
            ok: false,
            outcome: fail(
              'api',
              `the model server at ${where.baseURL} kept failing${status}: ${failure.message}; gave up after ${settings.max_retries} retries (max_retries in ${where.table})`,
              // Unreachable or failing (no answer, 5xx) is the endpoint; a 429 that never clears is the account.
              failure.status === 429 ? 'quota' : 'network',
            ),
          };
        }
        const delayMs = retryDelayMs(attempt + 1, failure.retryAfterMs);
        observer.retry({ attempt: attempt + 1, status: failure.status, delayMs, error: failure.message });
        await budget.sleep(delayMs);
      }
    }
  }
}

function toolResult(id: string, content: string): ChatCompletionToolMessageParam {
  return { role: 'tool', tool_call_id: id, content };
}

function fail(failure: 'api' | 'crash' | 'step_cap', detail: string, cause?: FailureCause): TurnOutcome {
  return { ok: false, failure, detail, ...(cause ? { cause } : {}) };
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
