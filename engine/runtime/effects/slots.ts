/**
 * The engine's serial lanes for effects: `Slots` (at most n at once, first come first
 * served) and the `Queues` every effect of one engine shares. A leaf: the context
 * (context.ts) and the checkouts (checkouts.ts) both use it.
 */

/**
 * At most `n` runs at once; the others wait their turn, first come first served.
 */
export class Slots {
  private readonly waiting: Array<() => void> = [];
  constructor(private free: number) {}
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free += 1;
    }
  }
}

/**
 * The queues effects share within one engine. git's worktree administration (add,
 * prune, remove) is not safe to run concurrently in one repository: every such call
 * goes through `worktrees`. Landings move trunk and your checkout of it; reads of that
 * checkout go through `main`, so a fact never sees it half moved (a landing takes
 * `worktrees` only inside `main`, never the other way round). Checks of trunk share the
 * `_trunk` checkout: one at a time.
 */
export class Queues {
  readonly worktrees = new Slots(1);
  readonly main = new Slots(1);
  readonly trunkChecks = new Slots(1);
  private readonly checkouts = new Map<string, Slots>();
  /**
   * One at a time for the engine's checkout `name` (`_lane`, `_check-<n>`): two effects
   * never move one checkout at once — the lane's first stack and the warming of `_lane` at
   * start did, and one saw the other's half-made checkout removed under it. Taken outside
   * `worktrees`, never inside it.
   */
  checkout(name: string): Slots {
    const slots = this.checkouts.get(name) ?? new Slots(1);
    this.checkouts.set(name, slots);
    return slots;
  }
  /** `worktrees.run`, as a function to hand to the git layer. */
  readonly serialWorktrees = <T>(work: () => Promise<T>): Promise<T> => this.worktrees.run(work);
}
