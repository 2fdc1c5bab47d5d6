/**
 * Round trips grouped as the log's flushes are: the keys asked for in one turn of the
 * event loop go together (the effects of one decision start in the same turn: six blocks'
 * worktrees, six results read by one query), and those asked for while a round trip is in
 * flight go together in the next — one `git fetch` or `git push` (and one upload- or
 * receive-pack on the remote's host) for many blocks, instead of one each.
 */
export class Coalesced<K, R> {
  private readonly asked = new Map<K, Array<(r: R) => void>>();
  private inFlight = false;
  private scheduled = false;

  /** `all`: one round trip for `keys`, a result for each; `failed`: every key's result when it throws. */
  constructor(
    private readonly all: (keys: K[]) => Promise<Map<K, R>>,
    private readonly failed: (error: unknown) => R,
  ) {}

  /** `key`'s result, from the next round trip. */
  ask(key: K): Promise<R> {
    return new Promise((resolve) => {
      const waiting = this.asked.get(key) ?? [];
      waiting.push(resolve);
      this.asked.set(key, waiting);
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.next();
      });
    });
  }

  private next(): void {
    if (this.inFlight || this.asked.size === 0) return;
    const batch = new Map(this.asked);
    this.asked.clear();
    this.inFlight = true;
    void this.all([...batch.keys()])
      .then(
        (results) => {
          for (const [key, waiting] of batch) for (const resolve of waiting) resolve(results.get(key)!);
        },
        (error: unknown) => {
          const failed = this.failed(error);
          for (const waiting of batch.values()) for (const resolve of waiting) resolve(failed);
        },
      )
      .finally(() => {
        this.inFlight = false;
        this.next();
      });
  }
}
