/**
 * Everything tron does with git, as async functions on `(repo, …)`. The parts live in
 * this folder (one concept each); this file is the one import for the engine.
 *
 * ## The main-checkout consistency rule
 *
 * tron lands a block by moving `refs/heads/<trunk>` (see `land`). If the user has trunk
 * checked out — normally in the repository's main working tree, the folder given as
 * `--repo` — moving only the ref would leave that checkout's index and files at the old
 * commit, and `git status` would show the landed work as staged reversals. So:
 *
 * 1. At start-up the engine calls `checkMainCheckout`. When the user's checkout of
 *    trunk has uncommitted changes to tracked files (staged or not), tron refuses to
 *    start — exit 2, TRON_DIRTY_TRUNK_CHECKOUT — and changes nothing. Untracked files
 *    do not count. A checkout on any other branch, or a detached HEAD, is never checked
 *    and never touched.
 * 2. Right after each landing, that checkout is moved from the old trunk commit to the
 *    new one with `git read-tree -m -u <old> <new>` (after refreshing the index, as
 *    `git checkout` does): the files the landing changed are updated, everything else
 *    is left exactly as it is, including untracked files and any edit made meanwhile
 *    to a file the landing did not touch.
 * 3. If the user edited, during the run, a file the landing also changed (or left an
 *    untracked file where the landing adds one), git refuses without touching the
 *    checkout. Trunk has still landed; `land` reports `checkout.state = 'failed'` with
 *    the command to finish by hand. Never is a user's change overwritten.
 *
 * Build and review worktrees live under `.tron/worktrees/`, which the engine owns; it
 * creates and deletes nothing outside it except the refs it names: `tron/<id>`,
 * `orphan/<id>-<n>` and `refs/tron/landed/<id>` (and `refs/tron/lane/replay`, which the
 * lane's bulk replay creates and deletes within one git process: replay.ts).
 *
 * Every git call runs non-interactively (no prompt, no pager, no editor) in a minimal
 * environment, and runs no program a repository, a worker or HOME configured: no hooks
 * (the user's included: `worktree add` runs no post-checkout hook, and moving the user's
 * checkout after a landing no post-index-change hook), no fsmonitor, no filters, no
 * external diff — the rule and its two gaps are in run.ts. Diffs used for patch ids
 * ignore the user's diff.* settings.
 */
export { DIFF_FLAGS, GitFailure, GitStateError, gitEnv, type Sha } from './run.ts';
export {
  allOnTrunk,
  branchOfHead,
  changesUnder,
  commitsOver,
  currentBranch,
  currentTrunkSha,
  diffStat,
  firstParentLog,
  firstParentShas,
  headAndTrunk,
  headOf,
  hiddenByIndex,
  isAncestor,
  isClean,
  mergeBase,
  patchId,
  revParse,
  topLevel,
} from './query.ts';
export { adminDigests, type AdminDigests } from './admin.ts';
export { checkLanding, checkStore, explainFailure } from './store.ts';
export { type Replayed, replayOnto } from './stack.ts';
export { replayInStore, type StackBlock, type StoreReplay } from './replay.ts';
export {
  LANDED_PREFIX,
  branchesOf,
  deleteBranch,
  landedRefs,
  orphanBranches,
  preserveOrphan,
  setAsideLanded,
  type Orphan,
} from './refs.ts';
export {
  WORKTREES_DIR,
  clearEngineRefLocks,
  checkoutAt,
  clearStaleLocks,
  engineCheckoutPath,
  pruneWorktrees,
  resetWorktree,
  reuseBuildWorktree,
  createReviewCheckout,
  createWorktree,
  removeWorktree,
  reviewPath,
  worktreePath,
} from './worktree.ts';
export {
  catchUpCheckout,
  checkMainCheckout,
  clearLandingLocks,
  land,
  followLandings,
  followTrunk,
  landStack,
  moveRefs,
  mainCheckout,
  type CheckoutSync,
  type LandResult,
  type MainCheckout,
} from './land.ts';
