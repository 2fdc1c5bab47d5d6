/**
 * The engine's fetches of blocks' work from the remote (`refs/tron/work/<id>`, pushed by
 * `tron agent`s: engine/queue/job-queue.ts adoptWork), grouped (effects/coalesce.ts):
 * six builders that finish together cost two or three fetches.
 */
import { type FetchResult, fetchRef, fetchRefs, type Remote } from '../git/remote.ts';
import { Coalesced } from '../runtime/effects/coalesce.ts';
import { workRefOf } from '../runtime/effects/work-ref.ts';

/** The ref a block's work travels in between agents and the engine, and where the engine keeps what it fetched of it. */
export const workRefs = (block: string): readonly [string, string] => [workRefOf(block), `refs/tron/fetched-work/${block}`];

export class WorkFetches {
  private readonly batches: Coalesced<string, FetchResult>;

  constructor(
    private readonly repo: string,
    private readonly remote: Remote,
  ) {
    this.batches = new Coalesced(
      (blocks) => this.fetchAll(blocks),
      (error): FetchResult => ({ ok: false, kind: 'transient', reason: 'failed', message: String((error as Error)?.message ?? error) }),
    );
  }

  /** The block's work ref fetched (its sha; undefined when the remote has none), in the next round trip. */
  fetch(block: string): Promise<FetchResult> {
    return this.batches.ask(block);
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
