import { describe, expect, it } from 'vitest';
import { OneLook } from './one-look.ts';

/** A look whose each run waits until the test ends it. */
function held() {
  const ends: Array<() => void> = [];
  let runs = 0;
  const look = new OneLook(
    () =>
      new Promise<void>((done) => {
        runs += 1;
        ends.push(done);
      }),
  );
  const endOne = async () => {
    ends.shift()!();
    for (let i = 0; i < 5; i += 1) await Promise.resolve();
  };
  return { look, endOne, runs: () => runs };
}

describe('one look at a time', () => {
  it('runs once more after the look under way however many times it was asked meanwhile, never two at once', async () => {
    const h = held();
    h.look.ask();
    h.look.ask();
    h.look.ask();
    expect(h.runs()).toBe(1);
    await h.endOne();
    expect(h.runs()).toBe(2);
    await h.endOne();
    expect(h.runs()).toBe(2);
    expect(h.look.current).toBeUndefined();
  });

  it('goes on after a look that failed, and looks not at all while told to skip', async () => {
    let fail = true;
    let skip = false;
    let runs = 0;
    const look = new OneLook(
      async () => {
        runs += 1;
        if (fail) throw new Error('the database went');
      },
      () => skip,
    );
    look.ask();
    await look.current;
    fail = false;
    look.ask();
    await look.current;
    expect(runs).toBe(2);
    skip = true;
    look.ask();
    expect(look.current).toBeUndefined();
    expect(runs).toBe(2);
  });
});
