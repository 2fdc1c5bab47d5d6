import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import type { EventBody, TronEvent } from '../core/events.ts';
import { SpanBook } from './trace-spans.ts';

/** The SDK's own provider, its spans kept in memory: what SpanBook makes of a run's events. */
function book() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { book: new SpanBook(provider.getTracer('test')), spans: () => exporter.getFinishedSpans() };
}

const SHA = 'a'.repeat(40);
const dispatch = (turn: number): EventBody => ({
  type: 'block.dispatched',
  block: 'a',
  role: 'builder',
  session: 'a.1.builder',
  turn,
  kind: 'build',
  phase: 'build',
  attempt: 1,
  expect: ['DONE'],
});

function feed(b: SpanBook, bodies: EventBody[]): void {
  for (const [i, body] of bodies.entries()) b.see({ v: 1, seq: i + 1, ts: 1_000 * (i + 1), ...body } as TronEvent);
}

describe('the spans of a run', () => {
  it('calls a block answered after its page and stopped at work unfinished, and ends its cut-short turn at the run’s end', () => {
    const { book: b, spans } = book();
    feed(b, [
      { type: 'worktree.requested', block: 'a', attempt: 1, base: SHA },
      dispatch(1),
      { type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 1, ok: true, reply: '>>BLOCKED' },
      { type: 'block.parked', block: 'a', reason: 'BLOCKED' },
      dispatch(2),
      { type: 'run.finished', reason: 'signal', exit: 143, landed: [], parked: ['a'], abandoned: [] },
    ]);
    const block = spans().find((s) => s.name === 'tron.block')!;
    expect(block.attributes['tron.block.outcome']).toBe('unfinished');
    expect(block.endTime).toEqual([6, 0]);
    expect(block.events.map((e) => e.name)).toEqual(['parked']);
    const turns = spans().filter((s) => s.name === 'tron.turn');
    expect(turns.map((t) => [t.attributes['tron.turn.number'], t.attributes['tron.turn.unfinished'] ?? false, t.endTime])).toEqual([
      [1, false, [3, 0]],
      [2, true, [6, 0]],
    ]);
  });

  it('calls a block parked when the run ends with it waiting for an answer', () => {
    const { book: b, spans } = book();
    feed(b, [
      { type: 'worktree.requested', block: 'a', attempt: 1, base: SHA },
      dispatch(1),
      { type: 'reply.received', block: 'a', role: 'builder', session: 'a.1.builder', turn: 1, ok: true, reply: '>>BLOCKED' },
      { type: 'block.parked', block: 'a', reason: 'BLOCKED' },
      { type: 'run.finished', reason: 'done', exit: 3, landed: [], parked: ['a'], abandoned: [] },
    ]);
    expect(spans().find((s) => s.name === 'tron.block')!.attributes['tron.block.outcome']).toBe('parked');
  });

  it('opens nothing for notes about a block after it was wrapped', () => {
    const { book: b, spans } = book();
    feed(b, [
      { type: 'worktree.requested', block: 'a', attempt: 1, base: SHA },
      { type: 'wrap.requested', block: 'a', summary: 's' },
      { type: 'block.wrapped', block: 'a', summary: 's' },
      { type: 'forge.commented', block: 'a', issue: 1, about: 'landed', posted: true },
      { type: 'worktree.requested', block: 'a', attempt: 1, base: SHA },
      { type: 'run.finished', reason: 'done', exit: 0, landed: ['a'], parked: [], abandoned: [] },
    ]);
    expect(spans().map((s) => s.name)).toEqual(['tron.wrap', 'tron.block']);
  });
});
