/** Where the engine has put trunk in this run, as the fold keeps it. */
import { byString, SortedMap } from './sorted-map.ts';

/**
 * The shas the engine put trunk at, oldest first, as the last position of each: enough to
 * ask whether trunk is at a sha the engine left it at (since some earlier sha).
 */
export class TrunkHistory {
  private constructor(
    private readonly last: SortedMap<string, number>,
    readonly length: number,
  ) {}

  static empty(): TrunkHistory {
    return new TrunkHistory(SortedMap.empty(byString), 0);
  }

  push(sha: string): TrunkHistory {
    return new TrunkHistory(this.last.set(sha, this.length), this.length + 1);
  }

  lastIndexOf(sha: string): number {
    return this.last.get(sha) ?? -1;
  }

  includes(sha: string): boolean {
    return this.last.has(sha);
  }

  /** The shas from the last time trunk was at `sha` onwards; none when it never was. */
  since(sha: string | undefined): { includes(sha: string): boolean } {
    const from = sha === undefined ? -1 : this.lastIndexOf(sha);
    return { includes: (x) => from >= 0 && this.lastIndexOf(x) >= from };
  }
}
