/**
 * Damage to the object store is noticed, never believed (docs/SECURITY.md, "The object
 * store"). With the sandbox on no worker can remove an object that existed before its
 * turn; without it (or after a disk fault, or a user's `git gc` gone wrong) trunk may
 * point at a commit that is no longer there. tron then stops — exit 1, TRON_STORE_DAMAGED,
 * naming what is missing and how to get it back — rather than build on, land on, or
 * report success over a history that is gone.
 *
 * The checks are cheap, so they run every time: at start, trunk and every
 * `refs/tron/landed/*` must resolve to commits whose root trees are there (two processes);
 * before a landing, everything the landing is about to put on trunk must be there and
 * connected (`rev-list --objects`, which reads every new commit and tree and checks that
 * every blob exists). A full `git fsck` is the user's, when the message says so.
 */
import { GitFailure, gitOut, runGit, type Sha } from './run.ts';
import { LANDED_PREFIX } from './refs.ts';
import { lookUpObject } from './resolver.ts';

/** A ref whose commit, or whose commit's tree, is not in the object store. */
interface Missing {
  ref: string;
  sha: Sha;
  what: 'commit' | 'tree';
}

/**
 * Checks that trunk and every landed ref resolve to commits that are there, with their
 * root trees; a GitFailure TRON_STORE_DAMAGED naming each that is not. A trunk branch
 * that does not exist is not this check's to report.
 */
export async function checkStore(repo: string, trunk: string): Promise<void> {
  const listed = await gitOut(repo, ['for-each-ref', '--format=%(objectname) %(refname)', `refs/heads/${trunk}`, LANDED_PREFIX]);
  const refs = listed
    .split('\n')
    .filter(Boolean)
    .map((line) => ({ sha: line.slice(0, line.indexOf(' ')), ref: line.slice(line.indexOf(' ') + 1) }));
  if (refs.length === 0) return;
  const asked = refs.flatMap((r) => [`${r.sha}`, `${r.sha}^{tree}`]);
  const answer = await runGit(repo, ['cat-file', '--batch-check'], `${asked.join('\n')}\n`);
  // A corrupt object (not merely a missing one) can make git give up on the listing.
  if (answer.exitCode !== 0) throw await damaged(repo, trunk, answer.stderr.trim().split('\n')[0] ?? `cat-file exit ${answer.exitCode}`);
  const lines = answer.stdout.split('\n');
  const missing: Missing[] = [];
  refs.forEach((r, i) => {
    if (/ missing$/.test(lines[2 * i] ?? ' missing')) missing.push({ ...r, what: 'commit' });
    else if (/ missing$/.test(lines[2 * i + 1] ?? ' missing')) missing.push({ ...r, what: 'tree' });
  });
  if (missing.length === 0) return;
  const named = missing.map((m) => (m.what === 'commit' ? `${m.ref} → commit ${m.sha}` : `${m.ref} → the tree of commit ${m.sha}`));
  throw await damaged(repo, trunk, `${named.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing`);
}

/**
 * Checks that everything a landing moves trunk over — the commits from `from` (exclusive)
 * to `top`, their trees and blobs — is in the object store and connected, and that
 * `from` itself is there; a GitFailure TRON_STORE_DAMAGED otherwise.
 */
export async function checkLanding(repo: string, trunk: string, from: Sha, top: Sha): Promise<void> {
  const walk = await runGit(repo, ['rev-list', '--objects', '--quiet', top, `^${from}`]);
  if (walk.exitCode === 0 && (await treeThere(repo, from))) return;
  const said = walk.exitCode === 0 ? `the tree of trunk's commit ${from} is missing` : walk.stderr.trim().split('\n')[0];
  throw await damaged(repo, trunk, `landing ${from.slice(0, 12)}..${top.slice(0, 12)} found: ${said}`);
}

/** Whether commit `from`'s root tree is in the store: by the repository's long-lived resolver, or a process when it cannot say. */
async function treeThere(repo: string, from: Sha): Promise<boolean> {
  const known = await lookUpObject(repo, `${from}^{tree}`);
  if (known === 'missing') return false;
  if (known !== 'unsure') return known.type === 'tree';
  const probe = await runGit(repo, ['cat-file', '--batch-check'], `${from}^{tree}\n`);
  return probe.exitCode === 0 && !/ missing$/.test(probe.stdout);
}

/**
 * `err`, or, when it is a failed git command and the store turns out damaged, the
 * TRON_STORE_DAMAGED that explains it: a commit gone from under a worktree makes git say
 * "Needed a single revision", which is no help. Costs the check only on a failure.
 */
export async function explainFailure(repo: string, trunk: string, err: Error): Promise<Error> {
  if (!(err instanceof GitFailure) || err.code !== 'TRON_GIT_FAILED') return err;
  try {
    await checkStore(repo, trunk);
    return err;
  } catch (damage) {
    if (!(damage instanceof GitFailure) || damage.code !== 'TRON_STORE_DAMAGED') return err;
    const said = damage.message.replace(/^TRON_STORE_DAMAGED: /, '');
    return new GitFailure('TRON_STORE_DAMAGED', `${said} (found when ${err.message.replace(/^TRON_GIT_FAILED: /, '')})`);
  }
}

/** The coded failure, with the way back: the remote's copy where there is a remote, else a backup. */
async function damaged(repo: string, trunk: string, what: string): Promise<GitFailure> {
  const remotes = (await runGit(repo, ['remote'])).stdout.split('\n').filter(Boolean);
  const remote = remotes.includes('origin') ? 'origin' : remotes[0];
  const recover =
    remote !== undefined
      ? `\`git fetch ${remote}\` brings back what ${remote} has; if ${trunk}'s commit is still missing, \`git update-ref refs/heads/${trunk} ${remote}/${trunk}\` puts it back at ${remote}'s (work only here is lost unless a backup has it); then \`git fsck\` shows what is still missing`
      : `no remote holds a copy: restore .git/objects from a backup, or look for what is left with \`git fsck --lost-found\`; \`git fsck\` shows what is missing`;
  return new GitFailure(
    'TRON_STORE_DAMAGED',
    `the object store of ${repo} is damaged: ${what}. tron stops: nothing is built, landed or reported done over a history that is not there. To recover: ${recover}; then run tron again`,
  );
}
