/**
 * A job's result read by its kind (job-results.ts): a turn's carries its usage and one reply
 * of exactly its block, role, session and turn; anything else refuses the whole result.
 */
import { describe, expect, it } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { checkResult } from './job-results.ts';

const turn = {
  type: 'block.dispatched',
  seq: 7,
  block: 'alpha',
  role: 'builder',
  session: 'alpha.1.builder',
  turn: 2,
} as unknown as TronEvent;
const at = { block: 'alpha', role: 'builder', session: 'alpha.1.builder', turn: 2 };
const reply = { type: 'reply.received', ...at, ok: true, text: '>>DONE' };
const usage = { type: 'usage.recorded', ...at, model: 'm', input_tokens: 1, cached_tokens: 0, output_tokens: 1 };
const result = (inputs: unknown[]) => ({ ok: true as const, inputs, worker: 'agent h pid 1', attempt: 1 });

describe('a job’s result, read by its kind', () => {
  it('takes a turn’s usage and its one reply', () => {
    expect(checkResult(turn, result([usage, reply])).inputs).toEqual([usage, reply]);
    expect(checkResult(turn, result([reply])).inputs).toEqual([reply]);
  });

  it('refuses a turn’s result that carries an operator’s answer, another turn’s reply, a second reply or none', () => {
    const answered = { type: 'operator.answered', block: 'alpha', answer: 'approve' };
    expect(() => checkResult(turn, result([usage, answered, reply]))).toThrow(
      'the result of its job from agent h pid 1 (attempt 1) was refused: a turn reports its usage and its reply, and this result holds operator.answered',
    );
    expect(() => checkResult(turn, result([{ ...reply, block: 'beta' }]))).toThrow('its reply.received has block "beta", not "alpha"');
    expect(() => checkResult(turn, result([{ ...reply, turn: 3 }]))).toThrow('has turn 3, not 2');
    expect(() => checkResult(turn, result([{ ...usage, session: 'alpha.1.reviewer' }, reply]))).toThrow('its usage.recorded has session');
    expect(() => checkResult(turn, result([reply, reply]))).toThrow('a turn reports one reply, and this result holds 2');
    expect(() => checkResult(turn, result([usage]))).toThrow('holds 0');
    expect(() => checkResult(turn, result(['>>APPROVE']))).toThrow('its inputs are not a list of events');
    expect(() => checkResult(turn, { ok: true, inputs: 'x' as never })).toThrow('its inputs are not a list of events');
  });

  it('refuses a result for a decision that is no job of the queue', () => {
    const parked = { type: 'block.parked', seq: 3, block: 'alpha' } as unknown as TronEvent;
    expect(() => checkResult(parked, result([]))).toThrow('no job of kind block.parked is run on the queue');
  });
});
