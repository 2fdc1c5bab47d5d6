import { describe, expect, it } from 'vitest';
import { blockedBy, blockerWords } from './blocked.ts';
import type { EventBody, TronEvent } from './events.ts';
import { apply, initialState } from './state.ts';

/** A register of blocks (id → its dependencies), folded with the events after it. */
function fold(register: Record<string, string[]>, bodies: EventBody[]) {
  const blocks = Object.entries(register).map(([id, depends_on]) => ({
    id,
    title: id,
    depends_on,
    priority: 0,
    criteria: ['c'],
    digest: id,
  }));
  const events = [{ type: 'register.loaded', blocks } as EventBody, ...bodies].map(
    (b, i) => ({ v: 2, seq: i + 1, ts: i, ...b }) as TronEvent,
  );
  return events.reduce(apply, initialState());
}

describe('blockedBy', () => {
  it('names the parked dependency of a pending block, and nothing while the dependency is still under way', () => {
    const register = { subtract: [], multiply: ['subtract'] };
    expect(blockedBy(fold(register, []), 'multiply')).toBeUndefined();
    const s = fold(register, [{ type: 'block.parked', block: 'subtract', reason: 'gate_budget: …' }]);
    expect(blockedBy(s, 'multiply')).toEqual({ dependency: 'subtract', is: 'parked' });
    expect(blockedBy(s, 'subtract')).toBeUndefined();
  });

  it('names the abandoned dependency of a block parked because of it, and a dependency blocked in turn', () => {
    const s = fold({ core: [], app: ['core'], docs: ['app'] }, [
      { type: 'block.abandoned', block: 'core', reason: 'out of scope' },
      { type: 'block.parked', block: 'app', reason: 'it depends on core, which was abandoned: out of scope' },
    ]);
    expect(blockedBy(s, 'app')).toEqual({ dependency: 'core', is: 'abandoned' });
    expect(blockedBy(s, 'docs')).toEqual({ dependency: 'app', is: 'blocked' });
    expect(blockerWords(blockedBy(s, 'docs')!)).toBe('waits on app, which is blocked in turn');
  });

  it('leaves a block parked for its own trouble to the operator', () => {
    const s = fold({ solo: [] }, [{ type: 'block.parked', block: 'solo', reason: 'blocked: no access' }]);
    expect(blockedBy(s, 'solo')).toBeUndefined();
  });
});
