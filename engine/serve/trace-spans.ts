/**
 * The spans of a run, from the events of its log (engine/serve/traces.ts sends them): which
 * event opens a span, which closes it, and what each carries. A span's start and end are
 * the times of those events (`ts`), never the clock: a trace is the run as its log tells
 * it. The tree (docs/serve.md, "Traces"):
 *
 *   tron.run                                  run.started → run.finished
 *   tron.block (a root of its own, linked to the run's span)
 *     tron.turn                               block.dispatched → reply.received
 *     tron.gate                               facts.requested → gate.passed / gate.failed
 *       tron.tests                            a test run's process (worker.spawned → worker.exited)
 *     tron.lane.test                          candidate.requested → candidate.tested
 *       tron.tests
 *     tron.trunk.check                        test.requested → trunk.tested (the block ends after it)
 *     tron.land                               land.intent → block.landed / land.refused
 *     tron.wrap                               wrap.requested → block.wrapped
 *
 * At the run's end every span still open ends at `run.finished`.
 */
import {
  type Attributes,
  type Context,
  type HrTime,
  type Span,
  SpanStatusCode,
  trace,
  ROOT_CONTEXT,
  type Tracer,
} from '@opentelemetry/api';
import type { EventOf, TronEvent } from '../core/events.ts';

/** An event's time as OpenTelemetry's [seconds, nanoseconds]. */
export function hrTime(ms: number): HrTime {
  const whole = Math.floor(ms);
  return [Math.floor(whole / 1000), (whole % 1000) * 1_000_000];
}

interface TurnSpan {
  span: Span;
  tokens: { input: number; cached: number; output: number; cost: number; priced: boolean };
}

/** Spans that belong to one block, by what opened them. */
interface BlockSpans {
  span: Span;
  ctx: Context;
  gate?: Span;
  laneTest?: Span;
  trunkCheck?: Span;
  land?: Span;
  wrap?: Span;
  /** Where the block stands now; set on its span when the span ends. */
  outcome: 'landed' | 'parked' | 'abandoned' | 'unfinished';
  /** Wrapped while the check of trunk after its landing still ran: the block's span ends with that check. */
  wrapped?: boolean;
  /** Test processes under way, by session and pid. */
  tests: Map<string, Span>;
}

/** Events that bring a block into the run's trace (later notes about a wrapped block do not). */
const BLOCK_STARTS = new Set<TronEvent['type']>([
  'worktree.requested',
  'block.recovered',
  'block.dispatched',
  'facts.requested',
  'merge.queued',
]);

/** Turns the events it is shown into spans of `tracer`; the SDK behind it exports them. */
export class SpanBook {
  private run?: Span;
  private runId = '';
  private lastTs = 0;
  private readonly titles = new Map<string, string>();
  private readonly blocks = new Map<string, BlockSpans>();
  private readonly turns = new Map<string, TurnSpan>();
  /** Blocks whose span ended (wrapped): later notes about them open nothing. */
  private readonly ended = new Set<string>();

  constructor(private readonly tracer: Tracer) {}

  /** Ends every span still open at the last event seen (a run whose end was not told). */
  close(): void {
    if (this.run) this.finish(this.lastTs, {});
  }

  see(e: TronEvent): void {
    this.lastTs = Math.max(this.lastTs, e.ts);
    const at = hrTime(e.ts);
    if (e.type === 'run.started') {
      this.runId = e.run;
      this.run = this.tracer.startSpan('tron.run', {
        root: true,
        startTime: at,
        attributes: { 'tron.run.id': e.run, 'tron.trunk': e.trunk, 'tron.trunk.sha': e.trunk_sha, 'tron.run.watch': e.watch },
      });
      return;
    }
    if (e.type === 'register.loaded') {
      for (const b of e.blocks) this.titles.set(b.id, b.title);
      return;
    }
    if (e.type === 'run.finished') {
      this.finish(e.ts, {
        'tron.run.exit': e.exit,
        'tron.run.reason': e.reason,
        'tron.run.landed': e.landed.length,
        'tron.run.parked': e.parked.length,
        'tron.run.abandoned': e.abandoned.length,
      });
      return;
    }
    if (e.type === 'candidate.requested' || e.type === 'candidate.tested' || e.type === 'land.intent' || e.type === 'land.refused') {
      this.stack(e);
      return;
    }
    if (!('block' in e) || typeof e.block !== 'string') return;
    const b = this.block(e.block, e);
    if (b) this.onBlock(e.block, b, e, at);
  }

  /** The block's spans, opened by an event that starts work on it. */
  private block(id: string, e: TronEvent): BlockSpans | undefined {
    const known = this.blocks.get(id);
    if (known || this.ended.has(id) || !BLOCK_STARTS.has(e.type)) return known;
    const title = this.titles.get(id);
    const span = this.tracer.startSpan('tron.block', {
      root: true,
      startTime: hrTime(e.ts),
      attributes: { 'tron.block.id': id, 'tron.run.id': this.runId, ...(title !== undefined && { 'tron.block.title': title }) },
      ...(this.run && { links: [{ context: this.run.spanContext(), attributes: { 'tron.link': 'run' } }] }),
    });
    const b: BlockSpans = { span, ctx: trace.setSpan(ROOT_CONTEXT, span), tests: new Map(), outcome: 'unfinished' };
    this.blocks.set(id, b);
    return b;
  }

  private child(b: BlockSpans, name: string, at: HrTime, attributes: Attributes, parent?: Span): Span {
    return this.tracer.startSpan(name, { startTime: at, attributes }, parent ? trace.setSpan(ROOT_CONTEXT, parent) : b.ctx);
  }

  private onBlock(id: string, b: BlockSpans, e: TronEvent, at: HrTime): void {
    const block = { 'tron.block.id': id };
    switch (e.type) {
      case 'block.dispatched': {
        // At work again (an answered page, a retry): no longer parked.
        if (b.outcome === 'parked') b.outcome = 'unfinished';
        const span = this.child(b, 'tron.turn', at, {
          ...block,
          'tron.turn.role': e.role,
          'tron.turn.kind': e.kind,
          'tron.turn.phase': e.phase,
          'tron.turn.session': e.session,
          'tron.turn.number': e.turn,
          'tron.turn.attempt': e.attempt,
        });
        this.turns.set(`${e.session}#${e.turn}`, { span, tokens: { input: 0, cached: 0, output: 0, cost: 0, priced: false } });
        return;
      }
      case 'usage.recorded': {
        const t = this.turns.get(`${e.session}#${e.turn}`);
        if (!t) return;
        t.span.setAttribute('gen_ai.request.model', e.model);
        t.tokens.input += e.input_tokens;
        t.tokens.cached += e.cached_tokens;
        t.tokens.output += e.output_tokens;
        if (e.cost_usd !== undefined) {
          t.tokens.cost += e.cost_usd;
          t.tokens.priced = true;
        }
        return;
      }
      case 'reply.received':
        this.endTurn(
          `${e.session}#${e.turn}`,
          at,
          { 'tron.turn.ok': e.ok, ...(e.failure !== undefined && { 'tron.turn.failure': e.failure }) },
          e.ok ? undefined : (e.failure ?? 'failed'),
        );
        return;
      case 'turn.reissued':
        this.endTurn(`${e.session}#${e.turn}`, at, { 'tron.turn.reissued': true }, `reissued: ${e.reason}`);
        return;
      case 'facts.requested':
        b.gate ??= this.child(b, 'tron.gate', at, { ...block, 'tron.gate.purpose': e.purpose, 'tron.gate.base': e.base });
        return;
      case 'facts.observed':
        b.gate?.setAttributes({ 'tron.gate.head': e.head, 'tron.gate.commits': e.commits, 'tron.gate.clean': e.clean });
        return;
      case 'gate.passed':
      case 'gate.failed': {
        const failed = e.facts.filter((f) => !f.ok).map((f) => f.name);
        const span =
          b.gate ?? this.child(b, 'tron.gate', at, { ...block, 'tron.gate.purpose': e.type === 'gate.failed' ? e.purpose : 'gate' });
        b.gate = undefined;
        span.setAttributes({
          'tron.gate.verdict': e.type === 'gate.passed' ? 'passed' : 'failed',
          ...(e.sha && { 'tron.gate.sha': e.sha }),
        });
        if (failed.length > 0) span.setAttribute('tron.gate.failed_facts', failed);
        if (e.type === 'gate.failed') span.setStatus({ code: SpanStatusCode.ERROR, message: `failed: ${failed.join(', ')}` });
        span.end(at);
        return;
      }
      case 'worker.spawned': {
        if (!e.session.startsWith('tests:')) return;
        const parent = (e.session === 'tests:gate' ? b.gate : undefined) ?? b.laneTest ?? b.trunkCheck ?? b.gate;
        b.tests.set(`${e.session}#${e.pid}`, this.child(b, 'tron.tests', at, { ...block, 'tron.tests.session': e.session }, parent));
        return;
      }
      case 'worker.exited': {
        const span = b.tests.get(`${e.session}#${e.pid}`);
        if (!span) return;
        b.tests.delete(`${e.session}#${e.pid}`);
        span.setAttributes({ 'tron.tests.exit': e.code ?? -1, ...(e.signal && { 'tron.tests.signal': e.signal }) });
        if (e.code !== 0) span.setStatus({ code: SpanStatusCode.ERROR, message: e.signal ?? `exit ${e.code}` });
        span.end(at);
        return;
      }
      case 'test.requested':
        b.trunkCheck ??= this.child(b, 'tron.trunk.check', at, { ...block, 'tron.trunk.sha': e.sha });
        return;
      case 'trunk.tested':
        if (b.trunkCheck) {
          b.trunkCheck.setAttribute('tron.tests.ok', e.ok);
          if (!e.ok) b.trunkCheck.setStatus({ code: SpanStatusCode.ERROR, message: 'trunk is red' });
          b.trunkCheck.end(at);
          b.trunkCheck = undefined;
        }
        // A red trunk pages about the block: its span stays open for that, and ends with the run.
        if (b.wrapped && e.ok) this.endBlock(id, b, at);
        return;
      case 'block.landed':
        b.outcome = 'landed';
        b.span.setAttribute('tron.block.sha', e.sha);
        if (b.land) {
          b.land.setAttributes({ 'tron.land.top': e.top });
          b.land.end(at);
          b.land = undefined;
        }
        return;
      case 'wrap.requested':
        b.wrap ??= this.child(b, 'tron.wrap', at, block);
        return;
      case 'block.wrapped': {
        b.wrap?.setAttributes({
          ...(e.orphan && { 'tron.wrap.orphan': e.orphan }),
          ...(e.leftover && { 'tron.wrap.leftover': e.leftover }),
        });
        b.wrap?.end(at);
        b.wrap = undefined;
        // [merge] verify_trunk: the check of trunk after the landing may end after the wrap.
        if (b.trunkCheck) b.wrapped = true;
        else this.endBlock(id, b, at);
        return;
      }
      case 'block.parked':
        b.outcome = 'parked';
        b.span.addEvent('parked', { 'tron.reason': e.reason }, at);
        return;
      case 'block.abandoned':
        b.outcome = 'abandoned';
        b.span.addEvent('abandoned', { 'tron.reason': e.reason }, at);
        return;
      case 'escalation.raised':
        b.span.addEvent('escalation', { 'tron.trouble': e.trouble, 'tron.handler': e.handler }, at);
        return;
      case 'operator.answered':
        b.span.addEvent('answered', { 'tron.word': e.word }, at);
        return;
      default:
        return;
    }
  }

  /** The lane's events name a stack: each of its blocks gets its own span, under its own block. */
  private stack(e: EventOf<'candidate.requested'> | EventOf<'candidate.tested'> | EventOf<'land.intent'> | EventOf<'land.refused'>): void {
    const at = hrTime(e.ts);
    const ids = e.type === 'land.intent' ? e.blocks.map((x) => x.block) : e.blocks;
    for (const id of ids) {
      const b = this.blocks.get(id);
      if (!b) continue;
      const attrs = { 'tron.block.id': id, 'tron.stack.id': e.stack, 'tron.stack.size': ids.length };
      if (e.type === 'candidate.requested') b.laneTest ??= this.child(b, 'tron.lane.test', at, { ...attrs, 'tron.stack.sha': e.sha });
      else if (e.type === 'candidate.tested' && b.laneTest) {
        b.laneTest.setAttribute('tron.tests.ok', e.ok);
        if (!e.ok) b.laneTest.setStatus({ code: SpanStatusCode.ERROR, message: 'the stack is red' });
        b.laneTest.end(at);
        b.laneTest = undefined;
      } else if (e.type === 'land.intent')
        b.land ??= this.child(b, 'tron.land', at, {
          ...attrs,
          'tron.land.from': e.from,
          'tron.land.sha': e.sha,
          'tron.land.tested': e.tested,
        });
      else if (e.type === 'land.refused' && b.land) {
        b.land.setStatus({ code: SpanStatusCode.ERROR, message: e.detail });
        b.land.end(at);
        b.land = undefined;
      }
    }
  }

  private endTurn(key: string, at: HrTime, attributes: Attributes, error?: string): void {
    const t = this.turns.get(key);
    if (!t) return;
    this.turns.delete(key);
    t.span.setAttributes({
      ...attributes,
      'gen_ai.usage.input_tokens': t.tokens.input + t.tokens.cached,
      'gen_ai.usage.output_tokens': t.tokens.output,
      'tron.turn.cached_tokens': t.tokens.cached,
      ...(t.tokens.priced && { 'tron.turn.cost_usd': t.tokens.cost }),
    });
    if (error) t.span.setStatus({ code: SpanStatusCode.ERROR, message: error });
    t.span.end(at);
  }

  private endBlock(id: string, b: BlockSpans, at: HrTime): void {
    for (const span of [b.gate, b.laneTest, b.trunkCheck, b.land, b.wrap, ...b.tests.values()]) span?.end(at);
    b.span.setAttribute('tron.block.outcome', b.outcome);
    b.span.end(at);
    this.blocks.delete(id);
    this.ended.add(id);
  }

  /** The run's end: every span still open ends here, the run's last. */
  private finish(ts: number, attributes: Attributes): void {
    const at = hrTime(ts);
    for (const key of [...this.turns.keys()]) this.endTurn(key, at, { 'tron.turn.unfinished': true });
    for (const [id, b] of [...this.blocks]) this.endBlock(id, b, at);
    this.run?.setAttributes(attributes);
    this.run?.end(at);
    this.run = undefined;
  }
}
