/**
 * Talk before you page, for a conversational worker: when the built-in agent's turn
 * overruns, the engine asks it in-session, between its steps, whether it is still
 * working; its `>>WORKING` answer is a sign of life, the turn is extended and goes on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type RecordedRequest, type ScriptStep } from '../../testing/model-server.ts';
import { configFile, makeProject, ofType, runTron } from '../../testing/project.ts';
import { messagesOf } from '../../testing/openai-script.ts';
import type { TestRepo } from '../../testing/repo.ts';

const KEY_ENV = 'TRON_E2E_MODEL_KEY';
let server: ModelServer | undefined;
let repo: TestRepo | undefined;
afterEach(async () => {
  await server?.close();
  await repo?.cleanup();
});

const text = (m: unknown): string => {
  const content = (m as { content?: unknown }).content;
  return typeof content === 'string' ? content : JSON.stringify(content ?? '');
};

/** A builder that commits, then runs `slow`, answers the probe whenever asked, and finishes. */
const builder =
  (slow: string) =>
  (request: RecordedRequest): ScriptStep => {
    const messages = messagesOf(request);
    const last = messages.at(-1)!;
    const say = (step: ScriptStep): ScriptStep => ({ ...step, delayMs: 200 }) as ScriptStep;
    if (last.role === 'user' && text(last).includes('# Evidence for block'))
      return say({ content: '>>CONFIRMED {"evidence":{"c1":"slow.txt is committed"}}' });
    if (last.role === 'user' && text(last).includes('are you still working?'))
      return say({ content: '>>WORKING {"progress":"waiting for a slow command"}' });
    const done = (id: string) => messages.some((m) => m.role === 'tool' && m.tool_call_id === id);
    if (!done('commit'))
      return say({ tool_calls: [toolCall('run', { shell: 'echo slow > slow.txt && git add -A && git commit -q -m slow' }, 'commit')] });
    if (!done('slow')) return say({ tool_calls: [toolCall('run', { shell: slow }, 'slow')] });
    return say({ content: '>>DONE' });
  };

async function run(slow: string, probeWait: string, api: 'chat' | 'responses' = 'chat') {
  server = await startModelServer(builder(slow));
  repo = await makeProject({
    blocks: { slow: { criteria: ['slow.txt is committed'] } },
    config: configFile({
      workers: `[workers.builder]\nadapter = "openai"\nmodel = "m"\nbase_url = "${server.url}"\napi_key_env = "${KEY_ENV}"\napi = "${api}"\n\n[workers.reviewer]\nadapter = "sim"\n`,
      extra: `[liveness]\nprobe_wait = "${probeWait}"\nextension = "2s"\nmax_extensions = 3\nreissues = 1\n`,
    }).replace('turn = "1m"', 'turn = "1s"'),
  });
  return runTron(repo, { env: { [KEY_ENV]: 'sk-test' } });
}

describe('liveness of the built-in agent', () => {
  it.each(['chat', 'responses'] as const)(
    'asks an overrunning turn WORKING? in-session between its steps, and extends it instead of re-issuing (api = "%s")',
    async (api) => {
      const result = await run('sleep 1.5', '2500ms', api);
      expect(result.exit).toBe(0);
      expect(server!.requests.every((r) => r.path === (api === 'chat' ? '/v1/chat/completions' : '/v1/responses'))).toBe(true);
      const asked = server!.requests.filter((r) => text(messagesOf(r).at(-1)).includes('are you still working?'));
      expect(asked.length, result.events.map((e) => e.type).join(', ')).toBeGreaterThanOrEqual(1);
      // The question came in the same conversation, after the turn's own tool results.
      const messages = messagesOf(asked[0]!);
      expect(messages.filter((m) => m.role === 'tool').length).toBeGreaterThanOrEqual(1);
      // It answered >>WORKING in the conversation, was told to go on, and finished its turn.
      const after = server!.requests.find((r) => text(messagesOf(r).at(-1)).includes('Go on with the turn'));
      const answer = messagesOf(after!).at(-2);
      expect(text(answer)).toMatch(/^>>WORKING/);
      expect(ofType(result.events, 'worker.overran')).toHaveLength(1);
      expect(ofType(result.events, 'turn.reissued')).toEqual([]);
      expect(ofType(result.events, 'reply.refused')).toEqual([]);
      expect(ofType(result.events, 'block.landed').map((e) => e.block)).toEqual(['slow']);
    },
  );

  it('counts a command of the agent that is busy on the CPU as a sign of life', async () => {
    const result = await run('node -e "const end = Date.now() + 2500; while (Date.now() < end);"', '800ms');
    expect(result.exit).toBe(0);
    expect(ofType(result.events, 'worker.probed')[0]).toMatchObject({ alive: true, signs: expect.arrayContaining(['cpu']) });
    expect(ofType(result.events, 'turn.reissued')).toEqual([]);
    expect(ofType(result.events, 'block.landed').map((e) => e.block)).toEqual(['slow']);
  });
});
