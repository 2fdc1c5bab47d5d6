/**
 * The engine's fetches of blocks' work from the remote (`refs/tron/work/<id>`, pushed by
 * `tron agent`s: engine/runtime/job-queue.ts adoptWork), grouped as the log's flushes are:
 * the first goes at once, and the blocks asked for while it is in flight go together in
 * the next — one round trip, one `git fetch` here and one upload-pack on the remote's
 * host, instead of one each. Six builders that finish together cost two or three fetches.
 */
import { type FetchResult, fetchRef, fetchRefs, type Remote } from '../git/remote.ts';

/** The ref a block's work travels in between agents and the engine, and where the engine keeps what it fetched of it. */
export const workRefs = (block: string): readonly [string, string] => [`refs/tron/work/${block}`, `refs/tron/fetched-work/${block}`];

export class WorkFetches {
  private readonly asked = new Map<string, Array<(r: FetchResult) => void>>();
  private inFlight = false;

  constructor(
    private readonly repo: string,
    private readonly remote: Remote,
  ) {}

  /** The block's work ref fetched (its sha; undefined when the remote has none), in the next round trip. */
  fetch(block: string): Promise<FetchResult> {
    return new Promise((resolve) => {
      const waiting = this.asked.get(block) ?? [];
      waiting.push(resolve);
      this.asked.set(block, waiting);
      this.next();
    });
  }

  private next(): void {
    if (this.inFlight || this.asked.size === 0) return;
    const batch = new Map(this.asked);
    this.asked.clear();
    this.inFlight = true;
    void this.fetchAll([...batch.keys()])
      .then(
        (results) => {
          for (const [block, waiting] of batch) for (const resolve of waiting) resolve(results.get(block)!);
        },
        (error: unknown) => {
          const failed: FetchResult = {
            ok: false,
            kind: 'transient',
            reason: 'failed',
            message: String((error as Error)?.message ?? error),
          };
          for (const waiting of batch.values()) for (const resolve of waiting) resolve(failed);
        },
      )
      .finally(() => {
        this.inFlight = false;
        this.next();
      });
  }

  private async fetchAll(blocks: string[]): Promise<Map<string, FetchResult>> {
    const alone = async () =>
      new Map(await Promise.all(blocks.map(async (b) => [b, await fetchRef(this.repo, this.remote, ...workRefs(b))] as const)));
    if (blocks.length === 1) return alone();
    const together = await fetchRefs(this.repo, this.remote, blocks.map(workRefs));
    // A ref the remote lacks fails the whole fetch (or the remote failed): each alone then says which.
    if (!together.ok) return alone();
    return new Map(blocks.map((b, i) => [b, { ok: true, sha: together.shas[i] }]));
  }
}
