/**
 * The truth gate's facts, derived from what the engine itself observed (`facts.observed`).
 * Pure: the same observation always yields the same facts, so replay agrees with the run.
 */
import type { EventOf, Fact } from './events.ts';

const short = (sha: string | null | undefined): string => (sha ? sha.slice(0, 12) : '(none)');

/** Every fact of the gate at the observed head, in a fixed order. */
export function deriveFacts(
  o: EventOf<'facts.observed'>,
  expected: { trunkSha: string; mainStatus: string; testCommand?: string; trunkAllowed?: { includes(sha: string): boolean } },
): Fact[] {
  const facts: Fact[] = [];
  // The engine may itself land another block while these facts are observed, so trunk
  // may be at any sha the engine put it at since the facts were requested.
  const trunkOk = o.trunk_sha !== null && (o.trunk_sha === expected.trunkSha || expected.trunkAllowed?.includes(o.trunk_sha) === true);
  facts.push({
    name: 'commits',
    ok: o.commits > 0,
    evidence:
      o.commits > 0
        ? `${o.commits} new commit(s) over base ${short(o.base)}`
        : `the branch has no commits over its base ${short(o.base)}: commit your work on this branch`,
  });
  facts.push({
    name: 'trunk_untouched',
    ok: trunkOk,
    evidence: trunkOk
      ? `trunk is at ${short(o.trunk_sha)}, where the engine left it`
      : `trunk moved from ${short(expected.trunkSha)} to ${short(o.trunk_sha)} by someone other than the engine: never commit to trunk`,
  });
  facts.push({
    name: 'main_checkout_untouched',
    ok: o.main_status === expected.mainStatus,
    evidence:
      o.main_status === expected.mainStatus
        ? 'the main checkout is as the engine found it'
        : `the main checkout changed while the block was built: ${o.main_status.trim() || '(clean now)'}; work only in your own worktree`,
  });
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
      ? `the test command timed out at ${short(o.head)} (output: ${t.log})`
      : t.exit === 0
        ? `the test command exited 0 at ${short(o.head)}`
        : `the test command exited ${t.exit} in a clean checkout of ${short(o.head)} (only committed files count); last lines:\n${t.tail}`,
  });
  return facts;
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
