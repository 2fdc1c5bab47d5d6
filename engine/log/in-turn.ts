/**
 * One query at a time on a shared connection: the engine's connection (appends, lease
 * renewals, reads) and the watchers' (timers, notifications) get queries at any moment, and
 * pg warns on stderr of a query sent while another runs (pg 9 will refuse it).
 */

/** `send`, each call waiting for the one before it to settle (a failure stops nothing after it). */
export function inTurn(send: (...args: unknown[]) => Promise<unknown>): (...args: unknown[]) => Promise<unknown> {
  let last: Promise<unknown> = Promise.resolve();
  return (...args) => {
    const next = last.then(() => send(...args));
    last = next.catch(() => undefined);
    return next;
  };
}
