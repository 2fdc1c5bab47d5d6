import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import { parseConfig } from '../project/config.ts';
import { configFile, makeProject, ofType, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { hrTime } from './trace-spans.ts';
import { tracesTarget } from './traces.ts';

let repo: TestRepo | undefined;
let receiver: Server | undefined;
afterEach(async () => {
  receiver?.closeAllConnections();
  await new Promise((r) => (receiver ? receiver.close(r) : r(undefined)));
  receiver = undefined;
  await repo?.cleanup();
  repo = undefined;
});

/** OTLP/JSON's shapes, as much of them as the tests read. */
interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values: OtlpValue[] };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: OtlpValue }[];
  links?: { traceId: string; spanId: string }[];
  events?: { name: string }[];
  status?: { code?: number };
}

/** A span with its attributes read into plain values. */
interface Span extends Omit<OtlpSpan, 'attributes'> {
  attrs: Record<string, unknown>;
}

function plain(v: OtlpValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return v.arrayValue.values.map(plain);
  return undefined;
}

/**
 * An OTLP/HTTP receiver on 127.0.0.1: takes POST /v1/traces with a JSON body (what the
 * official http exporter sends) and keeps every span; or, with `hang`, answers nothing.
 */
async function collector(
  opts: { hang?: boolean } = {},
): Promise<{ base: string; spans: Span[]; posts: string[]; resources: Record<string, unknown>[] }> {
  const spans: Span[] = [];
  const posts: string[] = [];
  const resources: Record<string, unknown>[] = [];
  receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      posts.push(`${req.method} ${req.url} ${req.headers['content-type']}`);
      if (opts.hang) return;
      const parsed = JSON.parse(body) as {
        resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const rs of parsed.resourceSpans) {
        resources.push(Object.fromEntries(rs.resource.attributes.map((a) => [a.key, plain(a.value)])));
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans) spans.push({ ...s, attrs: Object.fromEntries(s.attributes.map((a) => [a.key, plain(a.value)])) });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver!.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`, spans, posts, resources };
}

/** Builders that write, commit and answer DONE, reporting tokens and spend; the rest of each block's turns are the sim's defaults. */
function meteredSim(ids: string[]): string {
  return ids
    .map(
      (id) =>
        `[[blocks.${id}.builder]]\nwrite = { "${id}.txt" = "${id}\\n" }\ncommit = "${id}"\nreply = ">>DONE"\nusage = { input = 1200, output = 300, cost_usd = 0.0125 }\n`,
    )
    .join('\n');
}

const nanos = (ms: number) => String(BigInt(ms) * 1_000_000n);

describe('traces', () => {
  it('sends one root span per block, linked to the run, with a child per turn, gate, test run, landing and wrap, timed by the events', async () => {
    const otlp = await collector();
    repo = await makeProject({ blocks: { a: { title: 'Alpha' }, b: {} }, sim: meteredSim(['a', 'b']) });
    const run = await runTron(repo, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.base } });
    expect(run.exit).toBe(0);
    expect(otlp.posts.every((p) => p.startsWith('POST /v1/traces application/json'))).toBe(true);
    expect(otlp.resources[0]).toMatchObject({ 'service.name': 'tron', 'tron.repository': repo.dir.split('/').at(-1) });
    const { spans } = otlp;
    const named = (name: string) => spans.filter((s) => s.name === name);

    const [runSpan, ...moreRuns] = named('tron.run');
    expect(moreRuns).toEqual([]);
    const started = ofType(run.events, 'run.started')[0]!;
    const finished = ofType(run.events, 'run.finished')[0]!;
    expect(runSpan).toMatchObject({
      startTimeUnixNano: nanos(started.ts),
      endTimeUnixNano: nanos(finished.ts),
      attrs: { 'tron.run.id': started.run, 'tron.run.exit': 0, 'tron.run.reason': 'done', 'tron.run.landed': 2 },
    });
    expect(runSpan!.parentSpanId ?? '').toBe('');

    const blocks = named('tron.block');
    expect(blocks.map((s) => s.attrs['tron.block.id']).sort()).toEqual(['a', 'b']);
    for (const b of blocks) {
      expect(b.parentSpanId ?? '').toBe('');
      expect(b.traceId).not.toBe(runSpan!.traceId);
      expect(b.links).toEqual([expect.objectContaining({ traceId: runSpan!.traceId, spanId: runSpan!.spanId })]);
      expect(b.attrs).toMatchObject({ 'tron.run.id': started.run, 'tron.block.outcome': 'landed' });
    }
    expect(new Set(blocks.map((b) => b.traceId)).size).toBe(2);
    const blockOf = (id: string) => blocks.find((b) => b.attrs['tron.block.id'] === id)!;
    expect(blockOf('a').attrs['tron.block.title']).toBe('Alpha');

    // One turn span per dispatched turn, under its block's span, from dispatch to reply.
    const dispatched = ofType(run.events, 'block.dispatched');
    const turns = named('tron.turn');
    expect(turns).toHaveLength(dispatched.length);
    for (const d of dispatched) {
      const t = turns.find((s) => s.attrs['tron.turn.session'] === d.session && s.attrs['tron.turn.number'] === d.turn)!;
      const reply = ofType(run.events, 'reply.received').find((r) => r.session === d.session && r.turn === d.turn)!;
      expect(t).toMatchObject({
        traceId: blockOf(d.block).traceId,
        parentSpanId: blockOf(d.block).spanId,
        startTimeUnixNano: nanos(d.ts),
        endTimeUnixNano: nanos(reply.ts),
        attrs: { 'tron.block.id': d.block, 'tron.turn.role': d.role, 'tron.turn.kind': d.kind, 'tron.turn.ok': true },
      });
    }
    const builds = turns.filter((t) => t.attrs['tron.turn.kind'] === 'build');
    expect(builds).toHaveLength(2);
    for (const t of builds)
      expect(t.attrs).toMatchObject({
        'gen_ai.request.model': 'sim',
        'gen_ai.usage.input_tokens': 1200,
        'gen_ai.usage.output_tokens': 300,
        'tron.turn.cost_usd': 0.0125,
      });

    // The gate, the test run inside it, the landing and the wrap: one each per block, under it.
    for (const id of ['a', 'b']) {
      const block = blockOf(id);
      const under = (name: string) => spans.filter((s) => s.name === name && s.attrs['tron.block.id'] === id);
      const [gate] = under('tron.gate');
      expect(under('tron.gate')).toHaveLength(1);
      const passed = ofType(run.events, 'gate.passed').find((e) => e.block === id)!;
      const requested = ofType(run.events, 'facts.requested').find((e) => e.block === id)!;
      expect(gate).toMatchObject({
        parentSpanId: block.spanId,
        startTimeUnixNano: nanos(requested.ts),
        endTimeUnixNano: nanos(passed.ts),
        attrs: { 'tron.gate.verdict': 'passed', 'tron.gate.sha': passed.sha },
      });
      const gateTests = under('tron.tests').filter((s) => s.attrs['tron.tests.session'] === 'tests:gate');
      expect(gateTests).toHaveLength(1);
      expect(gateTests[0]).toMatchObject({ traceId: block.traceId, parentSpanId: gate!.spanId, attrs: { 'tron.tests.exit': 0 } });
      const landed = ofType(run.events, 'block.landed').find((e) => e.block === id)!;
      expect(under('tron.land')).toEqual([
        expect.objectContaining({
          parentSpanId: block.spanId,
          endTimeUnixNano: nanos(landed.ts),
          attrs: expect.objectContaining({ 'tron.land.top': landed.top }),
        }),
      ]);
      const wrapped = ofType(run.events, 'block.wrapped').find((e) => e.block === id)!;
      expect(under('tron.wrap')).toEqual([expect.objectContaining({ parentSpanId: block.spanId, endTimeUnixNano: nanos(wrapped.ts) })]);
      expect(block.endTimeUnixNano).toBe(nanos(wrapped.ts));
      // Every span of the block is in the block's trace and lies within it.
      for (const s of spans.filter((x) => x.attrs['tron.block.id'] === id && x !== block)) {
        expect(s.traceId).toBe(block.traceId);
        expect(BigInt(s.startTimeUnixNano) >= BigInt(block.startTimeUnixNano)).toBe(true);
        expect(BigInt(s.endTimeUnixNano) <= BigInt(block.endTimeUnixNano)).toBe(true);
      }
    }
  });

  it("gives each block of a stack its own lane test and landing span, and the stack's test run sits under its top block's", async () => {
    const otlp = await collector();
    repo = await makeProject({
      blocks: { a: {}, b: {} },
      sim: meteredSim(['a', 'b']),
      config: configFile({ extra: '\n[merge]\nbatch = 2\ngather = true\n' }),
    });
    const run = await runTron(repo, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.base } });
    expect(run.exit).toBe(0);
    const [candidate] = ofType(run.events, 'candidate.requested');
    expect(candidate?.blocks).toHaveLength(2);
    const tested = ofType(run.events, 'candidate.tested')[0]!;
    const lane = otlp.spans.filter((s) => s.name === 'tron.lane.test');
    expect(lane.map((s) => s.attrs['tron.block.id']).sort()).toEqual(['a', 'b']);
    for (const s of lane) {
      const block = otlp.spans.find((b) => b.name === 'tron.block' && b.attrs['tron.block.id'] === s.attrs['tron.block.id'])!;
      expect(s).toMatchObject({
        traceId: block.traceId,
        parentSpanId: block.spanId,
        startTimeUnixNano: nanos(candidate!.ts),
        endTimeUnixNano: nanos(tested.ts),
        attrs: { 'tron.stack.id': candidate!.stack, 'tron.stack.size': 2, 'tron.tests.ok': true },
      });
    }
    const laneRuns = otlp.spans.filter((s) => s.name === 'tron.tests' && s.attrs['tron.tests.session'] !== 'tests:gate');
    expect(laneRuns.length).toBeGreaterThan(0);
    for (const t of laneRuns) expect(lane.map((s) => s.spanId)).toContain(t.parentSpanId);
    expect(otlp.spans.filter((s) => s.name === 'tron.land').map((s) => s.attrs['tron.stack.id'])).toEqual([
      candidate!.stack,
      candidate!.stack,
    ]);
  });

  it('keeps a landed block open for the check of trunk after it ([merge] verify_trunk), with its test run under the check', async () => {
    const otlp = await collector();
    repo = await makeProject({
      blocks: { a: {} },
      sim: meteredSim(['a']),
      config: configFile({ extra: '\n[merge]\nverify_trunk = true\n' }),
    });
    const run = await runTron(repo, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.base } });
    expect(run.exit).toBe(0);
    const requested = ofType(run.events, 'test.requested')[0]!;
    const tested = ofType(run.events, 'trunk.tested')[0]!;
    const [block] = otlp.spans.filter((s) => s.name === 'tron.block');
    const [check] = otlp.spans.filter((s) => s.name === 'tron.trunk.check');
    expect(check).toMatchObject({
      parentSpanId: block!.spanId,
      startTimeUnixNano: nanos(requested.ts),
      endTimeUnixNano: nanos(tested.ts),
      attrs: { 'tron.trunk.sha': requested.sha, 'tron.tests.ok': true },
    });
    const trunkRuns = otlp.spans.filter((s) => s.name === 'tron.tests' && s.attrs['tron.tests.session'] === 'tests:trunk');
    expect(trunkRuns).toEqual([expect.objectContaining({ parentSpanId: check!.spanId })]);
    expect(BigInt(block!.endTimeUnixNano) >= BigInt(nanos(tested.ts))).toBe(true);
  });

  it("marks a red gate and its test run as errors, and ends a parked block at the run's end with its page on it", async () => {
    const otlp = await collector();
    repo = await makeProject({
      blocks: { liar: {} },
      sim: `[[blocks.liar.builder]]\nwrite = { "liar.js" = "exports.value = 1;\\n", "tests/liar.test.js" = "require('node:assert').strictEqual(require('../liar.js').value, 2);\\n" }\ncommit = "liar"\nreply = ">>DONE"\n`,
    });
    const run = await runTron(repo, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.base } });
    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'gate.failed');
    expect(failed.length).toBeGreaterThan(0);
    const gates = otlp.spans.filter((s) => s.name === 'tron.gate');
    expect(gates).toHaveLength(failed.length);
    for (const g of gates) {
      expect(g.status).toMatchObject({ code: 2, message: 'failed: tests' });
      expect(g.attrs).toMatchObject({ 'tron.gate.verdict': 'failed', 'tron.gate.failed_facts': ['tests'] });
      const tests = otlp.spans.filter((s) => s.name === 'tron.tests' && s.parentSpanId === g.spanId);
      expect(tests).toEqual([
        expect.objectContaining({ status: expect.objectContaining({ code: 2 }), attrs: expect.objectContaining({ 'tron.tests.exit': 1 }) }),
      ]);
    }
    const [block] = otlp.spans.filter((s) => s.name === 'tron.block');
    const finished = ofType(run.events, 'run.finished')[0]!;
    expect(block).toMatchObject({
      endTimeUnixNano: nanos(finished.ts),
      attrs: { 'tron.block.id': 'liar', 'tron.block.outcome': 'parked' },
    });
    expect(block!.events?.map((e) => e.name)).toEqual(expect.arrayContaining(['escalation', 'parked']));
  });

  it('never fails or holds up a run on a collector that never answers: the run lands every block and the wait at its end is bounded', async () => {
    const otlp = await collector({ hang: true });
    repo = await makeProject({
      blocks: { a: {} },
      sim: meteredSim(['a']),
      config: configFile({ extra: `\n[telemetry]\notlp_endpoint = "${otlp.base}/"\ntimeout = "400ms"\n` }),
    });
    const run = await runTron(repo);
    const returned = Date.now();
    expect(run.exit).toBe(0);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['a']);
    expect(otlp.posts[0]).toMatch(/^POST \/v1\/traces /);
    // From the run's last event to the start's return: the 400 ms bound, and the rest of the start's own closing.
    const finished = ofType(run.events, 'run.finished')[0]!;
    expect(returned - finished.ts).toBeLessThan(400 + 1500);
    expect(run.output.join('\n')).not.toMatch(/OTLP|telemetry|ECONN|timeout/i);
  });

  it('never fails a run on a collector that is not there (connection refused)', async () => {
    const otlp = await collector();
    const closed = otlp.base;
    receiver!.closeAllConnections();
    await new Promise((r) => receiver!.close(r));
    receiver = undefined;
    repo = await makeProject({ blocks: { a: {} }, sim: meteredSim(['a']) });
    const run = await runTron(repo, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: closed } });
    const returned = Date.now();
    expect(run.exit).toBe(0);
    // The exporter tries again on a refused connection; the end waits for it no longer than the default 5 s.
    expect(returned - ofType(run.events, 'run.finished')[0]!.ts).toBeLessThan(5000 + 1500);
    expect(ofType(run.events, 'block.landed').map((e) => e.block)).toEqual(['a']);
  });
});

describe('where traces go', () => {
  it('is off without [telemetry] otlp_endpoint or an OTLP variable', () => {
    expect(tracesTarget(undefined, {})).toBeUndefined();
    expect(tracesTarget({ timeoutMs: 1000 }, { OTEL_EXPORTER_OTLP_HEADERS: 'x=y' })).toBeUndefined();
  });

  it('takes the config key first, then the traces URL as it is, then the base URL with /v1/traces added', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318/', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom' };
    expect(tracesTarget({ otlpEndpoint: 'https://c.example', timeoutMs: 700 }, env)).toEqual({
      url: 'https://c.example/v1/traces',
      timeoutMs: 700,
    });
    expect(tracesTarget(undefined, env)).toEqual({ url: 'http://traces:4318/custom', timeoutMs: 5000 });
    expect(tracesTarget(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://base:4318/' })).toEqual({
      url: 'http://base:4318/v1/traces',
      timeoutMs: 5000,
    });
  });

  it('refuses an OTLP variable that is no http(s) URL, naming it and the fix', () => {
    let thrown: unknown;
    try {
      tracesTarget(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InputError);
    expect((thrown as InputError).problems).toEqual([
      expect.objectContaining({ code: 'TRON_USAGE', path: 'OTEL_EXPORTER_OTLP_ENDPOINT', message: expect.stringContaining('http(s) URL') }),
    ]);
  });

  it('is a checked table: an unknown key and an endpoint that is no URL are errors, and the timeout defaults to 5 s', () => {
    const typo = parseConfig(`${configFile()}\n[telemetry]\notlp_endpont = "http://127.0.0.1:4318"\n`, '.tron/config.toml');
    expect(typo.problems.map((p) => p.code)).toContain('TRON_CONFIG_UNKNOWN_KEY');
    const bad = parseConfig(`${configFile()}\n[telemetry]\notlp_endpoint = "127.0.0.1:4318"\n`, '.tron/config.toml');
    expect(bad.problems[0]).toMatchObject({ code: 'TRON_CONFIG_INVALID', path: expect.stringContaining('telemetry.otlp_endpoint') });
    const ok = parseConfig(`${configFile()}\n[telemetry]\notlp_endpoint = "http://127.0.0.1:4318"\n`, '.tron/config.toml');
    expect(ok.config?.telemetry).toEqual({ otlpEndpoint: 'http://127.0.0.1:4318', timeoutMs: 5000 });
  });

  it('gives an event time in ms as [seconds, nanoseconds]', () => {
    expect(hrTime(1_700_000_000_123)).toEqual([1_700_000_000, 123_000_000]);
    expect(hrTime(999)).toEqual([0, 999_000_000]);
  });
});
