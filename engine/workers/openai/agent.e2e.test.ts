/**
 * The built-in `openai` worker, end to end: real `tron start` on a real repository, the
 * real `openai` client, a scripted model on a real HTTP server. The scripted model works
 * only through the adapter's tools — it writes files, runs the tests and commits with
 * `git` through `run` — so a block that lands here was built by the tool loop itself.
 */
import { readFileSync } from 'node:fs';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { startModelServer, toolCall, type ModelServer, type ReplyStep, type ScriptStep } from '../../testing/model-server.ts';
import { reportCommand } from '../../commands/report.ts';
import { renderReport } from '../../render/report.ts';
import { configFile, project as tronProject, ofType, readRunFile, runTron } from '../../testing/project.ts';
import type { TestRepo } from '../../testing/repo.ts';
import { turnOf, usageOf, type TurnView } from '../../testing/openai-script.ts';
import { sessionFile } from './session-store.ts';

const KEY_ENV = 'TRON_E2E_MODEL_KEY';
const KEY = 'sk-e2e-not-a-real-key';
const CRITERION = 'greet(name) returns "Hello, <name>!"';
const MODULE = 'exports.greet = (name) => `Hello, ${name}!`;\n';
const TEST = "const assert = require('node:assert');\nassert.strictEqual(require('../greet.js').greet('Ada'), 'Hello, Ada!');\n";

const servers: ModelServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** The builder's model: every call costs 100 tokens. */
function builderModel(view: TurnView): ScriptStep {
  const say = (step: Omit<ReplyStep, 'usage'>): ReplyStep => ({ ...step, usage: usageOf(100) });
  if (view.kind === 'build') {
    switch (view.step) {
      case 0: // two writes in one step: they run concurrently
        return say({
          tool_calls: [
            toolCall('write_file', { path: 'greet.js', content: MODULE }, 'w-module'),
            toolCall('write_file', { path: 'tests/greet.test.js', content: TEST }, 'w-test'),
          ],
        });
      case 1:
        return say({ tool_calls: [toolCall('run', { argv: ['node', 'test.js'] }, 'r-test')] });
      case 2:
        return say({ tool_calls: [toolCall('run', { shell: 'git add -A && git commit -q -m "Add greet"' }, 'r-commit')] });
      default:
        return say({
          content: 'Wrote greet.js and tests/greet.test.js; node test.js exits 0; committed.\n>>DONE {"summary":"greet added"}',
        });
    }
  }
  if (view.kind === 'challenge') {
    return say({
      content: `>>CONFIRMED ${JSON.stringify({ evidence: { c1: 'greet.js exports greet; tests/greet.test.js asserts greet("Ada")' } })}`,
    });
  }
  return { status: 400, message: `the scripted builder has no ${view.kind} turn` };
}

/** The reviewer's model: reads the module, tries to change it, then approves. 10 tokens a call. */
function reviewerModel(view: TurnView): ScriptStep {
  const say = (step: Omit<ReplyStep, 'usage'>): ReplyStep => ({ ...step, usage: usageOf(10) });
  if (view.kind !== 'review') return { status: 400, message: `the scripted reviewer has no ${view.kind} turn` };
  switch (view.step) {
    case 0:
      return say({ tool_calls: [toolCall('read_file', { path: 'greet.js' }, 'rv-read')] });
    case 1:
      return say({
        tool_calls: [toolCall('write_file', { path: 'greet.js', content: 'exports.greet = () => "hijacked";\n' }, 'rv-write')],
      });
    default:
      return say({ content: '>>APPROVE {"notes":"greet.js does what the criterion says; its test covers it"}' });
  }
}

/** One server for every role; the role is told by the model name its config asks for. `faults` answer the first calls. */
async function modelServer(faults: ScriptStep[] = []): Promise<ModelServer> {
  const server = await startModelServer((request, index) => {
    if (index < faults.length) return faults[index]!;
    const view = turnOf(request);
    if (request.body.model === 'builder-model') return builderModel(view);
    if (request.body.model === 'reviewer-model') return reviewerModel(view);
    return { status: 404, message: `no model ${request.body.model}` };
  });
  servers.push(server);
  return server;
}

function openaiTable(role: string, server: ModelServer, extra = ''): string {
  return `[workers.${role}]\nadapter = "openai"\nmodel = "${role}-model"\nbase_url = "${server.url}"\napi_key_env = "${KEY_ENV}"\n${extra}`;
}

function project(workers: string, extra = ''): Promise<TestRepo> {
  return tronProject({ blocks: { greet: { title: 'A greeting', criteria: [CRITERION] } }, config: configFile({ workers, extra }) });
}

const requestsOf = (server: ModelServer, model: string) => server.requests.filter((r) => r.body.model === model);

describe('the openai worker under tron start', () => {
  it('builds, tests and commits through its tools, confirms with evidence in the same conversation, and lands', async () => {
    const server = await modelServer();
    const repo = await project(`${openaiTable('builder', server)}\n[workers.reviewer]\nadapter = "sim"\n`);
    const trunkBefore = await repo.git('rev-parse', 'main');

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(0);
    const landed = ofType(run.events, 'block.landed');
    expect(landed.map((e) => e.block)).toEqual(['greet']);
    expect(await repo.git('rev-parse', 'refs/tron/landed/greet')).toBe(landed[0]!.sha);
    expect(await repo.git('rev-parse', 'main')).toBe(landed[0]!.sha);
    expect(await repo.git('rev-list', '--count', `${trunkBefore}..main`)).toBe('1');
    expect(await repo.git('log', '-1', '--format=%s', 'main')).toBe('Add greet');
    expect(await repo.git('show', 'main:greet.js')).toBe(MODULE.trimEnd());
    expect(await repo.git('show', 'main:tests/greet.test.js')).toBe(TEST.trimEnd());
    expect((await execa('node', ['test.js'], { cwd: repo.dir, reject: false })).exitCode).toBe(0);

    const builder = requestsOf(server, 'builder-model');
    expect(builder.every((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);
    expect(builder.map((r) => turnOf(r).kind)).toEqual(['build', 'build', 'build', 'build', 'challenge']);
    // The tools really ran: the model was told the files were written, the tests passed and the commit was made.
    expect(turnOf(builder[1]!).results).toEqual({
      'w-module': expect.stringMatching(/^wrote greet\.js/),
      'w-test': expect.stringMatching(/^wrote tests\/greet\.test\.js/),
    });
    expect(turnOf(builder[2]!).results['r-test']).toMatch(/^\$ \["node","test\.js"\]\nexit code 0/);
    expect(turnOf(builder[3]!).results['r-commit']).toMatch(/\nexit code 0\n/);

    // The challenge is a new user message in the build conversation, which the server saw whole.
    const challenge = builder[4]!.body.messages as Array<{ role: string; content: string | null }>;
    expect(challenge[0]!.role).toBe('system');
    expect(challenge[1]).toMatchObject({ role: 'user', content: expect.stringContaining('# Build block `greet`') });
    expect(challenge.filter((m) => m.role === 'user')).toHaveLength(2);
    expect(challenge.at(-2)).toMatchObject({ role: 'assistant', content: expect.stringContaining('>>DONE') });
    expect(challenge.at(-1)).toMatchObject({ role: 'user', content: expect.stringContaining(CRITERION) });
    expect(challenge.filter((m) => m.role === 'tool')).toHaveLength(4);

    const confirmed = ofType(run.events, 'reply.accepted').find((e) => e.word === 'CONFIRMED')!;
    expect(confirmed.payload).toEqual({ evidence: { c1: expect.stringContaining('greet.js') } });
    const [dispatchBuild, dispatchChallenge] = ofType(run.events, 'block.dispatched').filter((e) => e.role === 'builder');
    expect(dispatchChallenge!.session).toBe(dispatchBuild!.session);
    const stored = JSON.parse(readFileSync(sessionFile(run.runDir, dispatchBuild!.session), 'utf8'));
    expect(stored.messages.at(-1)).toMatchObject({ role: 'assistant', content: expect.stringContaining('>>CONFIRMED') });
  });

  it('lets a read-only openai reviewer read the work and approve, refuses its write, and records every token and retry', async () => {
    const server = await modelServer([
      { status: 429, retryAfter: '0', message: 'slow down' },
      { status: 503, retryAfter: '0', message: 'overloaded' },
    ]);
    // The builder's model has a price; the reviewer's has none, so its tokens stay unpriced.
    const prices = '\n[prices."builder-model"]\ninput = 2.0\noutput = 8.0\n';
    const repo = await project(`${openaiTable('builder', server)}\n${openaiTable('reviewer', server)}`, prices);

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['greet']);
    expect(await repo.git('show', 'main:greet.js')).toBe(MODULE.trimEnd());

    const reviewer = requestsOf(server, 'reviewer-model');
    expect(reviewer).toHaveLength(3);
    const offered = (reviewer[0]!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name).sort();
    expect(offered).toEqual(['list_dir', 'read_file', 'run', 'search']);
    expect(turnOf(reviewer[1]!).results['rv-read']).toBe(MODULE);
    expect(turnOf(reviewer[2]!).results['rv-write']).toBe('error: write_file is not available to the reviewer: reviewers are read-only');
    const attested = ofType(run.events, 'gate.passed')[0]!.sha;
    expect(reviewer[0]!.body.messages.at(-1).content).toContain(attested);
    const approve = ofType(run.events, 'reply.accepted').find((e) => e.word === 'APPROVE')!;
    expect(approve.payload.notes).toContain('greet.js');

    const usages = ofType(run.events, 'usage.recorded');
    expect(usages.every((e) => e.block === 'greet')).toBe(true);
    const total = (role: string) =>
      usages.filter((e) => e.role === role).reduce((sum, e) => sum + e.input_tokens + e.cached_tokens + e.output_tokens, 0);
    const builderUsage = usages.filter((e) => e.role === 'builder');
    expect(builderUsage.map((e) => e.model)).toEqual(Array(5).fill('builder-model'));
    expect(builderUsage.map((e) => e.turn)).toEqual([1, 1, 1, 1, 2]);
    // 90 input tokens at $2 and 10 output tokens at $8 per million, priced from [prices].
    expect(builderUsage.map((e) => [e.input_tokens, e.output_tokens, e.cost_usd, e.priced_by])).toEqual(
      Array(5).fill([90, 10, (90 * 2 + 10 * 8) / 1e6, 'prices']),
    );
    const reviewerUsage = usages.filter((e) => e.role === 'reviewer');
    expect(reviewerUsage.map((e) => [e.input_tokens, e.output_tokens, e.cost_usd])).toEqual(Array(3).fill([0, 10, undefined]));
    expect([total('builder'), total('reviewer')]).toEqual([500, 30]);

    const retries = ofType(run.events, 'worker.retry');
    expect(retries.map((e) => [e.block, e.role, e.attempt, e.status, e.delay_ms])).toEqual([
      ['greet', 'builder', 1, 429, 0],
      ['greet', 'builder', 2, 503, 0],
    ]);
    expect(retries[0]!.error).toContain('slow down');

    const row = /\| greet \| landed \|.*\| builder 500, reviewer 30 \|/;
    expect(renderReport(run.events)).toMatch(row);
    expect(readRunFile(run.runDir, 'report.md')).toMatch(row);
    const printed: string[] = [];
    expect(await reportCommand({ repo: repo.dir, run: undefined, json: false, print: (line) => printed.push(line) })).toBe(0);
    expect(printed.join('\n')).toMatch(row);
  });

  it('ends a turn at the step cap as a failed turn, restates once, then parks the block without landing', async () => {
    const server = await startModelServer(() => ({ tool_calls: [toolCall('list_dir', { path: '.' })], usage: usageOf(7) }));
    servers.push(server);
    const repo = await project(`${openaiTable('builder', server, 'max_steps = 2\n')}\n[workers.reviewer]\nadapter = "sim"\n`);
    const trunkBefore = await repo.git('rev-parse', 'main');

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'reply.received').filter((e) => e.role === 'builder');
    expect(failed.map((e) => [e.ok, e.failure])).toEqual([
      [false, 'step_cap'],
      [false, 'step_cap'],
    ]);
    expect(failed[0]!.detail).toContain('max_steps in [workers.builder]');
    const escalations = ofType(run.events, 'escalation.raised');
    expect(escalations.map((e) => [e.trouble, e.handler])).toEqual([
      ['turn_failed', 'restate'],
      ['turn_failed', 'operator'],
    ]);
    expect(ofType(run.events, 'block.parked').map((e) => e.block)).toEqual(['greet']);
    expect(ofType(run.events, 'page.sent')).toHaveLength(1);
    expect(run.output.join('\n')).toContain('tron: greet is parked');

    // Two model calls per turn, and the restate continued the same conversation.
    expect(server.requests.map((r) => turnOf(r).kind)).toEqual(['build', 'build', 'restate', 'restate']);
    const asked = (server.requests[2]!.body.messages as Array<{ role: string; content: string }>).filter((m) => m.role === 'user');
    expect(asked.map((m) => m.content.match(/^# .*/m)![0])).toEqual(['# Build block `greet`: A greeting', '# Restate your last reply']);
    expect(ofType(run.events, 'usage.recorded').filter((e) => e.role === 'builder')).toHaveLength(4);

    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(await repo.git('for-each-ref', 'refs/tron/landed/')).toBe('');
    expect(await repo.git('rev-parse', 'main')).toBe(trunkBefore);
    expect(readRunFile(run.runDir, 'transcript.md')).toContain('(turn failed: step_cap)');
  });
});

describe('the openai worker over the Responses API (api = "responses")', () => {
  it('builds with its tools, confirms, is reviewed read-only, retries, records usage, and lands', async () => {
    const server = await modelServer([{ status: 429, retryAfter: '0', message: 'slow down' }]);
    const prices = '\n[prices."builder-model"]\ninput = 2.0\ncached = 0.5\noutput = 8.0\n';
    const responses = (role: string) => openaiTable(role, server, 'api = "responses"\n');
    const repo = await project(`${responses('builder')}\n${responses('reviewer')}`, prices);

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['greet']);
    expect(await repo.git('show', 'main:greet.js')).toBe(MODULE.trimEnd());
    expect(await repo.git('show', 'main:tests/greet.test.js')).toBe(TEST.trimEnd());
    expect(await repo.git('log', '-1', '--format=%s', 'main')).toBe('Add greet');

    // Every call went to /v1/responses, in its wire format: instructions, input items, flat function tools, no server state.
    expect(server.requests.every((r) => r.path === '/v1/responses' && r.authorization === `Bearer ${KEY}`)).toBe(true);
    const builder = requestsOf(server, 'builder-model');
    expect(builder.map((r) => turnOf(r).kind)).toEqual(['build', 'build', 'build', 'build', 'build', 'challenge']);
    expect(builder[0]!.body).toMatchObject({ store: false, instructions: expect.stringContaining('You are the builder.') });
    expect(builder[0]!.body.messages).toBeUndefined();
    const tools = builder[0]!.body.tools as Array<{ type: string; name: string; parameters: unknown }>;
    expect(tools.map((t) => t.name).sort()).toEqual(['edit_file', 'list_dir', 'read_file', 'run', 'search', 'write_file']);
    expect(tools.every((t) => t.type === 'function' && typeof t.parameters === 'object')).toBe(true);
    // The tools ran and their results went back as function_call_output items, by call id.
    const input = builder[3]!.body.input as Array<{ type?: string; call_id?: string; output?: string; name?: string }>;
    expect(input.filter((i) => i.type === 'function_call').map((i) => [i.call_id, i.name])).toEqual([
      ['w-module', 'write_file'],
      ['w-test', 'write_file'],
      ['r-test', 'run'],
    ]);
    const outputs = Object.fromEntries(input.filter((i) => i.type === 'function_call_output').map((i) => [i.call_id, i.output]));
    expect(outputs['w-module']).toMatch(/^wrote greet\.js/);
    expect(outputs['r-test']).toMatch(/^\$ \["node","test\.js"\]\nexit code 0/);
    // The challenge continued the same conversation.
    expect(turnOf(builder[5]!).role).toBe('builder');
    expect((builder[5]!.body.input as Array<{ role?: string }>).filter((i) => i.role === 'user')).toHaveLength(2);

    // Confinement holds on this wire too: the reviewer's write was refused in its result.
    const reviewer = requestsOf(server, 'reviewer-model');
    expect((reviewer[0]!.body.tools as Array<{ name: string }>).map((t) => t.name).sort()).toEqual([
      'list_dir',
      'read_file',
      'run',
      'search',
    ]);
    expect(turnOf(reviewer[2]!).results['rv-write']).toBe('error: write_file is not available to the reviewer: reviewers are read-only');
    expect(ofType(run.events, 'reply.accepted').find((e) => e.word === 'APPROVE')!.payload.notes).toContain('greet.js');

    expect(ofType(run.events, 'worker.retry').map((e) => [e.role, e.attempt, e.status])).toEqual([['builder', 1, 429]]);
    const usage = ofType(run.events, 'usage.recorded');
    expect(usage.filter((e) => e.role === 'builder').map((e) => [e.model, e.input_tokens, e.output_tokens, e.cost_usd])).toEqual(
      Array(5).fill(['builder-model', 90, 10, (90 * 2 + 10 * 8) / 1e6]),
    );
    expect(usage.filter((e) => e.role === 'reviewer')).toHaveLength(3);
    expect(renderReport(run.events)).toMatch(
      /\| greet \| landed \|.*\| builder 500, reviewer 30 \| \$0\.0013 \(530 tokens, 30 unpriced\) \|/,
    );
  });

  it('splits cached input tokens from the rest, as the Responses API reports them', async () => {
    const server = await startModelServer((request) => {
      const view = turnOf(request);
      const usage = { prompt_tokens: 1000, completion_tokens: 20, total_tokens: 1020, prompt_tokens_details: { cached_tokens: 600 } };
      if (view.kind === 'build' && view.step === 0)
        return {
          usage,
          tool_calls: [toolCall('run', { shell: `printf '%s' '${MODULE}' > greet.js && git add -A && git commit -q -m "Add greet"` })],
        };
      if (view.kind === 'build') return { usage, content: '>>DONE' };
      return { usage, content: `>>CONFIRMED ${JSON.stringify({ evidence: { c1: 'greet.js' } })}` };
    });
    servers.push(server);
    const repo = await project(`${openaiTable('builder', server, 'api = "responses"\n')}\n[workers.reviewer]\nadapter = "sim"\n`);

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(0);
    const usage = ofType(run.events, 'usage.recorded');
    expect(usage.map((e) => [e.input_tokens, e.cached_tokens, e.output_tokens])).toEqual(Array(3).fill([400, 600, 20]));
  });

  it('fails at once, naming api = "responses", when the server has no Responses API', async () => {
    const server = await startModelServer([{ status: 404, message: 'Not Found: /v1/responses' }]);
    servers.push(server);
    const repo = await project(`${openaiTable('builder', server, 'api = "responses"\n')}\n[workers.reviewer]\nadapter = "sim"\n`);

    const run = await runTron(repo, { env: { [KEY_ENV]: KEY } });

    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'reply.received')[0]!;
    expect(failed).toMatchObject({ ok: false, failure: 'api' });
    expect(failed.detail).toContain('the server offers the Responses API (api = "responses"');
  });
});
