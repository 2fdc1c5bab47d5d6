import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type Script } from '../../testing/model-server.ts';
import type { TurnObserver, TurnRequest, Usage } from '../adapter.ts';
import { createOpenAIWorker } from './agent.ts';
import { BACKOFF_CAP_MS, RETRY_AFTER_CAP_MS, retryAfterMs, retryDelayMs } from './retry.ts';
import { openaiSettings, type OpenAISettings } from '../../project/worker-settings.ts';
import { sessionFile } from './session-store.ts';

let base: string;
let worktree: string;
let runDir: string;
let server: ModelServer | undefined;

beforeEach(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), 'tron-openai-'));
  worktree = path.join(base, 'worktree');
  runDir = path.join(base, 'run');
  await mkdir(worktree);
  await mkdir(runDir);
  await writeFile(path.join(base, 'secret.txt'), 'top secret');
});

afterEach(async () => {
  await server?.close();
  server = undefined;
  await rm(base, { recursive: true, force: true });
});

const usage = (total: number) => ({ prompt_tokens: total - 5, completion_tokens: 5, total_tokens: total });

interface Recorder extends TurnObserver {
  events: string[];
  usages: Usage[];
  retries: { attempt: number; status?: number; delayMs: number; error: string }[];
}

function recorder(): Recorder {
  const r: Recorder = {
    events: [],
    usages: [],
    retries: [],
    spawned: () => r.events.push('spawned'),
    exited: (info) => r.events.push(`exited ${info.code}`),
    usage: (u) => r.usages.push(u),
    retry: (info) => r.retries.push(info),
  };
  return r;
}

async function setup(script: Script, overrides: Partial<OpenAISettings> = {}, env: Record<string, string | undefined> = {}) {
  server = await startModelServer(script);
  const settings = openaiSettings.parse({
    adapter: 'openai',
    model: 'test-model',
    base_url: server.url,
    api_key_env: 'TEST_KEY',
    ...overrides,
  });
  const slept: number[] = [];
  const deps = {
    env: { PATH: process.env.PATH, HOME: base, TEST_KEY: 'sk-test', ...env },
    sleep: async (ms: number) => {
      slept.push(ms);
    },
  };
  return { worker: createOpenAIWorker(settings, deps), settings, deps, slept, server };
}

function turn(overrides: Partial<TurnRequest> = {}): TurnRequest {
  return {
    role: 'builder',
    block: 'login',
    session: 'login-builder-1',
    turn: 1,
    phase: 'build',
    kind: 'build',
    prompt: 'Build the login endpoint.',
    cwd: worktree,
    runDir,
    timeoutMs: 60_000,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** The tool messages the client sent in request `index`. */
function toolMessages(index: number): string[] {
  return server!.requests[index]!.body.messages.filter((m: any) => m.role === 'tool').map((m: any) => m.content);
}

describe('the openai worker', () => {
  it('writes a file, runs a command and returns the final answer, reporting usage per call', async () => {
    const { worker } = await setup([
      { tool_calls: [toolCall('write_file', { path: 'hello.txt', content: 'hello world\n' })], usage: usage(100) },
      { tool_calls: [toolCall('run', { argv: ['cat', 'hello.txt'] })], usage: usage(150) },
      { content: 'All built.\n>>DONE {"summary": "hello"}', usage: usage(200) },
    ]);
    const observer = recorder();
    const outcome = await worker.runTurn(turn(), observer);
    expect(outcome).toEqual({ ok: true, reply: 'All built.\n>>DONE {"summary": "hello"}' });
    expect(await readFile(path.join(worktree, 'hello.txt'), 'utf8')).toBe('hello world\n');
    expect(observer.usages.map((u) => u.inputTokens + u.cachedTokens + u.outputTokens)).toEqual([100, 150, 200]);
    expect(observer.usages[0]).toEqual({ model: 'test-model', inputTokens: 95, cachedTokens: 0, outputTokens: 5 });
    expect(observer.events).toEqual(['spawned', 'exited 0']);
    const first = server!.requests[0]!.body;
    expect(first.model).toBe('test-model');
    expect(first.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
    expect(first.messages[1].content).toBe('Build the login endpoint.');
    expect(first.tools.map((t: any) => t.function.name)).toEqual(['read_file', 'list_dir', 'search', 'run', 'write_file', 'edit_file']);
    expect(toolMessages(1)).toEqual(['wrote hello.txt (12 characters)']);
    expect(toolMessages(2)[1]).toContain('exit code 0\nhello world');
  });

  it('continues the same conversation in a later turn of the session, even from a new adapter', async () => {
    const { worker, settings, deps } = await setup([
      { content: '>>DONE', usage: usage(10) },
      { content: '>>CONFIRMED {"evidence": {"c1": "test"}}', usage: usage(20) },
    ]);
    expect(await worker.runTurn(turn(), recorder())).toMatchObject({ ok: true });
    expect(existsSync(sessionFile(runDir, 'login-builder-1'))).toBe(true);
    const restarted = createOpenAIWorker(settings, deps);
    const second = await restarted.runTurn(turn({ turn: 2, kind: 'challenge', prompt: 'Prove each criterion.' }), recorder());
    expect(second).toMatchObject({ ok: true, reply: '>>CONFIRMED {"evidence": {"c1": "test"}}' });
    const messages = server!.requests[1]!.body.messages;
    expect(messages.map((m: any) => [m.role, m.content])).toEqual([
      ['system', expect.stringContaining('You are the builder')],
      ['user', 'Build the login endpoint.'],
      ['assistant', '>>DONE'],
      ['user', 'Prove each criterion.'],
    ]);
  });

  it('keeps sessions apart: another session starts a new conversation', async () => {
    const { worker } = await setup([{ content: 'one' }, { content: 'two' }]);
    await worker.runTurn(turn(), recorder());
    await worker.runTurn(turn({ session: 'other-session', prompt: 'Other.' }), recorder());
    expect(server!.requests[1]!.body.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
  });

  it('runs the tool calls of one step concurrently', async () => {
    // The command waits for a file the other call writes: run one after the other, it would fail.
    const wait = 'for i in $(seq 200); do [ -f b.flag ] && echo saw-b && exit 0; sleep 0.05; done; exit 1';
    const { worker } = await setup([
      { tool_calls: [toolCall('run', { shell: wait }), toolCall('write_file', { path: 'b.flag', content: 'b' })] },
      { content: '>>DONE' },
    ]);
    expect(await worker.runTurn(turn(), recorder())).toMatchObject({ ok: true });
    const [runResult, writeResult] = toolMessages(1);
    expect(runResult).toContain('exit code 0\nsaw-b');
    expect(writeResult).toContain('wrote b.flag');
  });

  it('offers a reviewer only read-only tools and refuses its write_file in a result the model receives', async () => {
    const { worker } = await setup([{ tool_calls: [toolCall('write_file', { path: 'x.txt', content: 'x' })] }, { content: '>>APPROVE' }]);
    const outcome = await worker.runTurn(turn({ role: 'reviewer', kind: 'review', session: 'login-reviewer-1' }), recorder());
    expect(outcome).toMatchObject({ ok: true, reply: '>>APPROVE' });
    expect(server!.requests[0]!.body.tools.map((t: any) => t.function.name)).toEqual(['read_file', 'list_dir', 'search', 'run']);
    expect(toolMessages(1)).toEqual(['error: write_file is not available to the reviewer: reviewers are read-only']);
    expect(existsSync(path.join(worktree, 'x.txt'))).toBe(false);
  });

  it('refuses a path escape and tells the model', async () => {
    const { worker } = await setup([
      { tool_calls: [toolCall('read_file', { path: '../secret.txt' }), toolCall('read_file', { path: path.join(base, 'secret.txt') })] },
      { content: '>>BLOCKED {"reason": "cannot read"}' },
    ]);
    await worker.runTurn(turn(), recorder());
    const [relative, absolute] = toolMessages(1);
    expect(relative).toMatch(/^error: refused \.\.\/secret\.txt: it leads outside the worktree/);
    expect(absolute).toMatch(/absolute paths are not allowed/);
    expect(JSON.stringify(server!.requests[1]!.body)).not.toContain('top secret');
  });

  it('gives commands a minimal environment without the API key', async () => {
    const { worker } = await setup([{ tool_calls: [toolCall('run', { shell: 'echo "key=${TEST_KEY:-unset}"' })] }, { content: '>>DONE' }]);
    await worker.runTurn(turn(), recorder());
    expect(toolMessages(1)[0]).toContain('key=unset');
  });
});

describe('failures of the model server', () => {
  it('retries a 429 (honouring Retry-After) and a 500, reporting each retry, then succeeds', async () => {
    const { worker, slept } = await setup([{ status: 429, retryAfter: '0' }, { status: 500 }, { content: '>>DONE' }]);
    const observer = recorder();
    expect(await worker.runTurn(turn(), observer)).toEqual({ ok: true, reply: '>>DONE' });
    expect(observer.retries.map(({ attempt, status, delayMs }) => ({ attempt, status, delayMs }))).toEqual([
      { attempt: 1, status: 429, delayMs: 0 },
      { attempt: 2, status: 500, delayMs: 2000 },
    ]);
    expect(observer.retries[1]!.error).toContain('500');
    expect(slept).toEqual([0, 2000]);
  });

  it('fails with api once the retries are used up', async () => {
    const { worker } = await setup([{ status: 503 }, { status: 503 }, { status: 503 }, { content: 'never' }], { max_retries: 2 });
    const observer = recorder();
    const outcome = await worker.runTurn(turn(), observer);
    expect(outcome).toMatchObject({ ok: false, failure: 'api' });
    expect(outcome.ok === false && outcome.detail).toMatch(
      /kept failing \(503\).*gave up after 2 retries \(max_retries in \[workers\.builder\]\)/,
    );
    expect(observer.retries).toHaveLength(2);
    expect(server!.requests).toHaveLength(3);
  });

  it('fails fast on a refused API key, naming api_key_env', async () => {
    const { worker } = await setup([{ status: 401, message: 'Incorrect API key' }, { content: 'never' }]);
    const observer = recorder();
    const outcome = await worker.runTurn(turn(), observer);
    expect(outcome).toMatchObject({ ok: false, failure: 'api' });
    const detail = outcome.ok ? '' : outcome.detail;
    expect(detail).toContain('the model server refused the API key from $TEST_KEY (401 Incorrect API key)');
    expect(detail).toContain('fix [workers.builder] api_key_env in .tron/config.toml');
    expect(observer.retries).toEqual([]);
    expect(server!.requests).toHaveLength(1);
  });

  it('fails fast on an unknown model, naming model and base_url', async () => {
    const { worker } = await setup([{ status: 404, message: 'The model does not exist' }]);
    const outcome = await worker.runTurn(turn({ role: 'architect', kind: 'architect' }), recorder());
    expect(outcome).toMatchObject({ ok: false, failure: 'api' });
    expect(outcome.ok === false && outcome.detail).toMatch(
      /404 The model does not exist.*model = "test-model" and base_url = "http:\/\/127\.0\.0\.1:\d+\/v1" in \[workers\.architect\]/,
    );
  });

  it('fails fast before any request when the API key variable is not set', async () => {
    const { worker } = await setup([{ content: 'never' }], {}, { TEST_KEY: undefined });
    const outcome = await worker.runTurn(turn(), recorder());
    expect(outcome).toMatchObject({ ok: false, failure: 'api' });
    expect(outcome.ok === false && outcome.detail).toMatch(/^\$TEST_KEY is not set: .*api_key_env in \[workers\.builder\]/);
    expect(server!.requests).toHaveLength(0);
  });

  it('retries a dropped connection and a malformed body', async () => {
    const { worker } = await setup([{ drop: true }, { malformed: true }, { content: '>>DONE' }]);
    const observer = recorder();
    expect(await worker.runTurn(turn(), observer)).toEqual({ ok: true, reply: '>>DONE' });
    expect(observer.retries.map((r) => [r.attempt, r.status, r.delayMs])).toEqual([
      [1, undefined, 1000],
      [2, undefined, 2000],
    ]);
    expect(observer.retries[1]!.error).toContain('malformed');
  });
});

describe('caps on a turn', () => {
  it('ends the turn with step_cap after max_steps model calls without a final answer', async () => {
    const { worker } = await setup(() => ({ tool_calls: [toolCall('list_dir', { path: '.' })] }), { max_steps: 3 });
    const outcome = await worker.runTurn(turn(), recorder());
    expect(outcome).toMatchObject({ ok: false, failure: 'step_cap' });
    expect(outcome.ok === false && outcome.detail).toContain('all 3 model calls (max_steps in [workers.builder])');
    expect(server!.requests).toHaveLength(3);
  });

  it('ends the turn with step_cap once the tokens used pass max_tokens_per_turn, leaving no tool call unanswered', async () => {
    const { worker } = await setup(
      [{ tool_calls: [toolCall('write_file', { path: 'x.txt', content: 'x' })], usage: usage(500) }, { content: 'after' }],
      { max_tokens_per_turn: 100 },
    );
    const outcome = await worker.runTurn(turn(), recorder());
    expect(outcome).toMatchObject({ ok: false, failure: 'step_cap' });
    expect(outcome.ok === false && outcome.detail).toContain('500 tokens, over max_tokens_per_turn = 100');
    expect(existsSync(path.join(worktree, 'x.txt'))).toBe(false);
    await worker.runTurn(turn({ turn: 2, prompt: 'Go on.' }), recorder());
    expect(server!.requests[1]!.body.messages.map((m: any) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
  });

  it('ends a turn that overruns its time budget with timeout', async () => {
    const { worker } = await setup([{ delayMs: 10_000, content: 'too late' }]);
    const outcome = await worker.runTurn(turn({ timeoutMs: 200 }), recorder());
    expect(outcome).toEqual({ ok: false, failure: 'timeout', detail: 'the turn ran past its budget of 200ms' });
  });

  it('ends a turn the engine aborts while a command runs, killing the command', async () => {
    const controller = new AbortController();
    const { worker } = await setup([{ tool_calls: [toolCall('run', { shell: 'sleep 30' })] }, { content: 'never' }]);
    const observer = recorder();
    const pending = worker.runTurn(turn({ signal: controller.signal }), observer);
    while (!observer.events.includes('spawned')) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    expect(await pending).toMatchObject({ ok: false, failure: 'aborted' });
    expect(observer.events).toEqual(['spawned', 'exited null']);
  });
});

describe('stored sessions', () => {
  it('closes tool calls a crashed turn left unanswered before the next call', async () => {
    const file = sessionFile(runDir, 'login-builder-1');
    await mkdir(path.dirname(file), { recursive: true });
    const crashed = {
      v: 1,
      session: 'login-builder-1',
      role: 'builder',
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'build' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'list_dir', arguments: '{}' } }] },
      ],
    };
    await writeFile(file, JSON.stringify(crashed));
    const { worker } = await setup([{ content: '>>WORKING' }]);
    await worker.runTurn(turn({ kind: 'probe', prompt: 'WORKING?' }), recorder());
    const messages = server!.requests[0]!.body.messages;
    expect(messages.map((m: any) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(messages[3]).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'error: not run: the turn ended before this tool ran' });
  });

  it('sets an unreadable session file aside and reports it, so the next turn starts afresh', async () => {
    const file = sessionFile(runDir, 'login-builder-1');
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, '{"v": 1, "messages": [');
    const { worker } = await setup([{ content: '>>DONE' }]);
    const outcome = await worker.runTurn(turn(), recorder());
    expect(outcome).toMatchObject({ ok: false, failure: 'crash' });
    expect(outcome.ok === false && outcome.detail).toContain('moved to');
    expect(existsSync(`${file}.unreadable`)).toBe(true);
    expect(await worker.runTurn(turn(), recorder())).toEqual({ ok: true, reply: '>>DONE' });
  });
});

describe('retry timing', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  it('reads Retry-After as seconds or an HTTP date, and prefers retry-after-ms', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '3' }), now)).toBe(3000);
    expect(retryAfterMs(new Headers({ 'retry-after': '0.5' }), now)).toBe(500);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:07 GMT' }), now)).toBe(7000);
    expect(retryAfterMs(new Headers({ 'retry-after': 'Tue, 31 Dec 2024 23:00:00 GMT' }), now)).toBe(0);
    expect(retryAfterMs(new Headers({ 'retry-after': '9', 'retry-after-ms': '250' }), now)).toBe(250);
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers(), now)).toBeUndefined();
  });

  it('backs off exponentially up to a cap unless the server names the wait', () => {
    expect([1, 2, 3, 4].map((a) => retryDelayMs(a, undefined))).toEqual([1000, 2000, 4000, 8000]);
    expect(retryDelayMs(20, undefined)).toBe(BACKOFF_CAP_MS);
    expect(retryDelayMs(5, 1500)).toBe(1500);
    expect(retryDelayMs(1, 10 * RETRY_AFTER_CAP_MS)).toBe(RETRY_AFTER_CAP_MS);
  });
});
