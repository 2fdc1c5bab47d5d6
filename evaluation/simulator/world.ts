/**
 * The simulated world's git: commits (each with its parent, its patch, and whether its own
 * change breaks the tests), trunk, branches, worktrees and the landed refs. It is what a
 * real start would read from the repository, and what the invariants are checked against:
 * git is the record of what landed, not the engine's log.
 */

/** One commit, and whether the tests pass on the tree it makes. */
export interface Commit {
  parent?: string;
  /** The patch id of the change it carries over its base (kept by a clean replay). */
  patch: string;
  /** The tests fail on its tree: a builder's red work (a later honest commit fixes it), or a clash in a stack. */
  red: boolean;
  /** It changes .tron/ (a worker writing the engine's files). */
  engine: boolean;
}

export class Git {
  readonly commits = new Map<string, Commit>();
  trunk: string;
  /** Trunk's first-parent history, every sha trunk ever was at. */
  readonly onTrunk = new Set<string>();
  readonly landed = new Map<string, string>();
  readonly branches = new Map<string, string>();
  readonly worktrees = new Map<string, { dirty: boolean }>();
  /** Shas a test run (gate, lane or trunk check) reported green: the only tops trunk may move to. */
  readonly green = new Set<string>();
  /**
   * The team's remote ([remote]), when the run has one: the source of truth for trunk and
   * the landed refs. Local trunk follows it (a fetch, a refused lease, a landing the
   * remote accepted); teammates push to it, never to local trunk.
   */
  remote: { trunk: string; landed: Map<string, string> } | undefined;
  /**
   * Blocks whose namespace holds something a worktree cannot be made over (a ref
   * `tron/<id>/x` planted beside the branch, a folder in the way): their worktree fails
   * until the operator clears it.
   */
  readonly planted = new Set<string>();
  /**
   * The forge, in a PR-mode run ([forge] land = "pr"): each block's one pull request (a
   * person may close it), the shas whose required hosted checks it reported green (the only
   * tops trunk may move to in PR mode), and the shas whose checks have not reported yet,
   * with how many more asks they stay missing, and the shas a person requested changes on
   * (the block whose pull request it was): a review stays on the head it was given on.
   */
  forge:
    | {
        pulls: Map<string, { number: number; closed?: string }>;
        green: Set<string>;
        missing: Map<string, number>;
        changes: Map<string, string>;
        next: number;
      }
    | undefined;
  private n = 0;

  constructor() {
    this.trunk = this.commit({ patch: 'root', red: false, engine: false });
    this.onTrunk.add(this.trunk);
  }

  commit(c: Commit): string {
    this.n += 1;
    const sha = this.n.toString(16).padStart(40, '0');
    this.commits.set(sha, c);
    return sha;
  }

  /** Whether `ancestor` is on the first-parent chain of `sha` (or is it). */
  isAncestor(ancestor: string, sha: string): boolean {
    for (let at: string | undefined = sha; at !== undefined; at = this.commits.get(at)?.parent) if (at === ancestor) return true;
    return false;
  }

  /** The tree at `sha` passes the tests. */
  greenTree(sha: string): boolean {
    return !this.commits.get(sha)!.red;
  }

  /** Whether a commit between trunk and `sha` changes .tron/. */
  touchesEngine(sha: string): boolean {
    for (let at: string | undefined = sha; at !== undefined && !this.onTrunk.has(at); at = this.commits.get(at)?.parent) {
      if (this.commits.get(at)!.engine) return true;
    }
    return false;
  }

  /** Commits from `base` (exclusive) to `head`. */
  commitsOver(base: string, head: string): number {
    let n = 0;
    for (let at: string | undefined = head; at !== undefined && at !== base; at = this.commits.get(at)?.parent) n += 1;
    return n;
  }

  /** Trunk moves (a landing or someone's push): its first-parent history grows. */
  moveTrunk(to: string): void {
    for (let at: string | undefined = to; at !== undefined && !this.onTrunk.has(at); at = this.commits.get(at)?.parent) {
      this.onTrunk.add(at);
    }
    this.trunk = to;
  }
}
