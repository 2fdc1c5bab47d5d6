/**
 * The truth gate's facts, derived from what the engine itself observed (`facts.observed`).
 * Pure: the same observation always yields the same facts, so replay agrees with the run.
 */
import { runOutput } from './test-output.ts';
import type { EventOf, Fact } from './events.ts';

const short = (sha: string | null | undefined): string => (sha ? sha.slice(0, 12) : '(none)');

/** What the gate expects, from the engine's own record (the folded state). */
export interface Expected {
  trunkSha: string;
  mainStatus: string;
  testCommand?: string;
  trunkAllowed?: { includes(sha: string): boolean };
  /** The shared git directory as the attempt began (worktree.ready). */
  gitFiles?: Record<string, string>;
  /** The sha the reviewer last asked changes for: a head that brings nothing new fails `commits`. */
  rejected?: { sha: string; patchId?: string };
}

/** What differs between two path → digest maps, as `path (new|changed|removed)`, sorted. */
export function mapChanges(before: Record<string, string>, after: Record<string, string>): string[] {
  const changes: string[] = [];
  for (const path of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = before[path];
    const b = after[path];
    if (a === b) continue;
    changes.push(`${path} (${a === undefined ? 'new' : b === undefined ? 'removed' : 'changed'})`);
  }
  return changes.sort();
}

/** Every fact of the gate at the observed head, in a fixed order. */
export function deriveFacts(o: EventOf<'facts.observed'>, expected: Expected): Fact[] {
  const facts: Fact[] = [];
  if (o.worktree !== undefined) {
    // The worktree could not be read, or its HEAD left its branch: nothing else of it was observed.
    return [{ name: 'worktree', ok: false, evidence: o.worktree }];
  }
  // The engine may itself land another block while these facts are observed, so trunk
  // may be at any sha the engine put it at since the facts were requested.
  const trunkOk = o.trunk_sha !== null && (o.trunk_sha === expected.trunkSha || expected.trunkAllowed?.includes(o.trunk_sha) === true);
  facts.push(commitsFact(o, expected.rejected));
  facts.push({
    name: 'trunk_untouched',
    ok: trunkOk,
    evidence: trunkOk
      ? `trunk is at ${short(o.trunk_sha)}, where the engine left it`
      : `trunk moved from ${short(expected.trunkSha)} to ${short(o.trunk_sha)} by someone other than the engine: never commit to trunk`,
  });
  facts.push(mainCheckoutFact(o, expected.mainStatus));
  if (o.git_files && expected.gitFiles) {
    const changed = mapChanges(expected.gitFiles, o.git_files);
    facts.push({
      name: 'git_config_untouched',
      ok: changed.length === 0,
      evidence:
        changed.length === 0
          ? "the shared git directory's config, hooks and info files are as the attempt began"
          : `the shared git directory changed while the block was built: ${changed.join(', ')}; ` +
            'a worker never writes git config, hooks or info files: undo these changes',
    });
  }
  if (o.engine_diff) {
    const diff = o.engine_diff;
    facts.push({
      name: 'engine_files_untouched',
      ok: diff.length === 0,
      evidence:
        diff.length === 0
          ? 'the branch changes nothing under .tron/'
          : `the branch changes the engine's own files: ${diff.join(', ')}; only the operator may change .tron/`,
    });
  }
  facts.push({
    name: 'clean',
    ok: o.clean,
    evidence: o.clean
      ? 'the worktree is clean'
      : `uncommitted changes in the worktree (uncommitted work is not work): ${o.status.trim().split('\n').slice(0, 10).join('; ')}`,
  });
  if (o.purpose === 'merge') {
    facts.push({
      name: 'up_to_date',
      ok: o.fast_forward,
      evidence: o.fast_forward
        ? `head ${short(o.head)} contains trunk ${short(o.trunk_sha)}`
        : `head ${short(o.head)} does not contain trunk ${short(o.trunk_sha)}: rebase onto trunk`,
    });
  }
  const setup = o.setup;
  if (setup) {
    const ok = setup.exit === 0 && !setup.timed_out;
    facts.push({
      name: 'setup',
      ok,
      evidence: ok
        ? `setup exited 0 in a clean checkout of ${short(o.head)}`
        : setup.timed_out
          ? `setup timed out in a clean checkout of ${short(o.head)} (output: ${setup.log})`
          : `setup exited ${setup.exit} in a clean checkout of ${short(o.head)}; last lines:\n${setup.tail}`,
    });
  }
  const t = o.tests;
  if (t === null) {
    // Tests not run because an earlier fact failed are no fact either way; otherwise the
    // gate never passes without them.
    if (facts.some((f) => !f.ok)) return facts;
    facts.push({ name: 'tests', ok: false, evidence: `the engine did not run the test command at ${short(o.head)}` });
    return facts;
  }
  facts.push({
    name: 'tests',
    ok: t.exit === 0 && !t.timed_out,
    evidence: t.timed_out
      ? `the test command timed out at ${short(o.head)}, and every process it started was ended (output: ${t.log}); ${runOutput(t)}`
      : t.exit === 0
        ? `the test command exited 0 at ${short(o.head)}`
        : `the test command exited ${t.exit} in a clean checkout of ${short(o.head)} (only committed files count); ${runOutput(t)}`,
  });
  return facts;
}

/** New commits over the base and, after a review asked for changes, a change unlike the one rejected. */
function commitsFact(o: EventOf<'facts.observed'>, rejected: Expected['rejected']): Fact {
  if (o.commits === 0) {
    return {
      name: 'commits',
      ok: false,
      evidence: `the branch has no commits over its base ${short(o.base)}: commit your work on this branch`,
    };
  }
  if (rejected && o.purpose === 'gate') {
    const same = o.head === rejected.sha || (rejected.patchId !== undefined && rejected.patchId !== '' && o.patch_id === rejected.patchId);
    if (same) {
      return {
        name: 'commits',
        ok: false,
        evidence:
          o.head === rejected.sha
            ? `no new commit since the reviewer asked for changes at ${short(rejected.sha)}: make the changes and commit them`
            : `head ${short(o.head)} holds the same change the reviewer rejected at ${short(rejected.sha)}: make the changes and commit them`,
      };
    }
  }
  return { name: 'commits', ok: true, evidence: `${o.commits} new commit(s) over base ${short(o.base)}` };
}

/** The main checkout as the engine found it: status, index flags that hide edits, and the engine's own files. */
function mainCheckoutFact(o: EventOf<'facts.observed'>, mainStatus: string): Fact {
  const problems: string[] = [];
  if (o.main_status !== mainStatus)
    problems.push(`the main checkout changed while the block was built: ${o.main_status.trim() || '(clean now)'}`);
  if (o.engine_files && o.engine_files.length > 0) problems.push(`the engine's own files changed: ${o.engine_files.join(', ')}`);
  return {
    name: 'main_checkout_untouched',
    ok: problems.length === 0,
    evidence:
      problems.length === 0 ? 'the main checkout is as the engine found it' : `${problems.join('; ')}; work only in your own worktree`,
  };
}

/** Why CONFIRMED evidence does not answer every criterion, or undefined when it does. */
export function evidenceProblem(evidence: Record<string, string>, criteria: readonly string[]): string | undefined {
  const missing: string[] = [];
  for (let i = 1; i <= criteria.length; i += 1) {
    const entry = evidence[`c${i}`];
    if (typeof entry !== 'string' || entry.trim() === '') missing.push(`c${i}`);
  }
  const extra = Object.keys(evidence).filter((k) => {
    const n = Number(k.slice(1));
    return !(n >= 1 && n <= criteria.length);
  });
  const parts: string[] = [];
  if (missing.length > 0) parts.push(`no evidence for ${missing.join(', ')}`);
  if (extra.length > 0) parts.push(`evidence for criteria that do not exist: ${extra.join(', ')} (there are ${criteria.length})`);
  return parts.length > 0 ? parts.join('; ') : undefined;
}
