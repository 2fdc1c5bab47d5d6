import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type Script } from './model-server.ts';

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function clientFor(script: Script, options: { timeout?: number } = {}) {
  server = await startModelServer(script);
  return new OpenAI({ apiKey: 'sk-test', baseURL: server.url, maxRetries: 0, timeout: options.timeout ?? 10_000 });
}

const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };

describe('the scripted model server', () => {
  it('answers a JSON chat completion with the scripted content and usage, and records the request', async () => {
    const client = await clientFor([{ content: 'hello there', usage }]);
    const completion = await client.chat.completions.create({
      model: 'test-model',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'noop', parameters: { type: 'object', properties: {} } } }],
    });
    expect(completion.choices[0]!.message.content).toBe('hello there');
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage).toMatchObject(usage);
    expect(completion.model).toBe('test-model');
    expect(server!.requests).toHaveLength(1);
    expect(server!.requests[0]!.authorization).toBe('Bearer sk-test');
    expect(server!.requests[0]!.body.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(server!.requests[0]!.body.tools[0].function.name).toBe('noop');
  });

  it('plays tool calls with JSON-encoded arguments and steps in order', async () => {
    const client = await clientFor([
      { tool_calls: [toolCall('read_file', { path: 'a.txt' }, 'call_a'), toolCall('list_dir', { path: '.' })] },
      { content: 'second' },
    ]);
    const first = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: '1' }] });
    const calls = first.choices[0]!.message.tool_calls!;
    expect(first.choices[0]!.finish_reason).toBe('tool_calls');
    expect(calls.map((c) => c.type === 'function' && c.function.name)).toEqual(['read_file', 'list_dir']);
    expect(calls[0]!.id).toBe('call_a');
    expect(calls[0]!.type === 'function' && JSON.parse(calls[0]!.function.arguments)).toEqual({ path: 'a.txt' });
    expect(calls[1]!.id).toMatch(/^call_/);
    const second = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: '2' }] });
    expect(second.choices[0]!.message.content).toBe('second');
  });

  it('streams content and tool calls as SSE chunks that the client reassembles', async () => {
    const client = await clientFor([{ content: 'streamed reply', tool_calls: [toolCall('run', { argv: ['ls'] })], usage }]);
    const stream = client.chat.completions.stream({
      model: 'm',
      messages: [{ role: 'user', content: 'go' }],
      stream_options: { include_usage: true },
    });
    const completion = await stream.finalChatCompletion();
    const message = completion.choices[0]!.message;
    expect(message.content).toBe('streamed reply');
    const call = message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('run');
    expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual({ argv: ['ls'] });
    expect(completion.usage).toMatchObject(usage);
    expect(server!.requests[0]!.body.stream).toBe(true);
  });

  it('sends a 429 with the scripted Retry-After header', async () => {
    const client = await clientFor([{ status: 429, retryAfter: '0' }]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect(error.status).toBe(429);
    expect(error.headers.get('retry-after')).toBe('0');
  });

  it('sends a 500 as an internal server error', async () => {
    const client = await clientFor([{ status: 500 }]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error.status).toBe(500);
  });

  it('sends a 401 as an authentication error', async () => {
    const client = await clientFor([{ status: 401, message: 'bad key' }]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(error.message).toContain('bad key');
  });

  it('drops the connection without a response', async () => {
    const client = await clientFor([{ drop: true }, { content: 'after the drop' }]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.APIConnectionError);
    const next = await client.chat.completions.create({ model: 'm', messages: [] });
    expect(next.choices[0]!.message.content).toBe('after the drop');
  });

  it('answers 200 with a body that is not JSON when malformed', async () => {
    const client = await clientFor([{ malformed: true }]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(SyntaxError);
  });

  it('sends a malformed event when malformed while streaming', async () => {
    const client = await clientFor([{ malformed: true }]);
    const stream = client.chat.completions.stream({ model: 'm', messages: [] });
    const error = await stream.finalChatCompletion().catch((e) => e);
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toMatch(/JSON|parse/i);
  });

  it('streams a Responses API answer as events the client reassembles into messages, function calls and usage', async () => {
    const client = await clientFor([
      { content: 'streamed answer', tool_calls: [toolCall('exec_command', { cmd: 'ls' }, 'call_x')], usage },
    ]);
    const events: string[] = [];
    const stream = client.responses.stream({ model: 'm', input: 'hi' });
    stream.on('event', (e) => events.push(e.type));
    const response = await stream.finalResponse();
    expect(response.output_text).toBe('streamed answer');
    expect(response.output.find((item) => item.type === 'function_call')).toMatchObject({
      name: 'exec_command',
      call_id: 'call_x',
      arguments: '{"cmd":"ls"}',
    });
    expect(response.usage).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
    expect(events[0]).toBe('response.created');
    expect(events).toContain('response.output_text.delta');
    expect(events.at(-1)).toBe('response.completed');
    expect(server!.requests[0]!.body.stream).toBe(true);
  });

  it('sends a malformed event when malformed while streaming a Responses API answer', async () => {
    const client = await clientFor([{ malformed: true }]);
    const error = await client.responses
      .stream({ model: 'm', input: 'hi' })
      .finalResponse()
      .catch((e) => e);
    expect(String(error)).toMatch(/JSON|parse/i);
  });

  it('delays a slow response long enough for a client timeout to fire, and still answers a patient client', async () => {
    const client = await clientFor(
      [
        { delayMs: 5_000, content: 'too late' },
        { delayMs: 20, content: 'slow but fine' },
      ],
      {
        timeout: 200,
      },
    );
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.APIConnectionTimeoutError);
    const patient = await client.chat.completions.create({ model: 'm', messages: [] }, { timeout: 10_000 });
    expect(patient.choices[0]!.message.content).toBe('slow but fine');
  });

  it('takes its steps from a function of the request when given one', async () => {
    const client = await clientFor((request, index) => ({ content: `${index}:${request.body.messages.length}` }));
    const a = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    const b = await client.chat.completions.create({
      model: 'm',
      messages: [
        { role: 'user', content: 'x' },
        { role: 'user', content: 'y' },
      ],
    });
    expect([a.choices[0]!.message.content, b.choices[0]!.message.content]).toEqual(['0:1', '1:2']);
  });

  it('answers 400 naming the exhausted script when the steps run out', async () => {
    const client = await clientFor([]);
    const error = await client.chat.completions.create({ model: 'm', messages: [] }).catch((e) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.message).toContain('script exhausted');
  });
});
