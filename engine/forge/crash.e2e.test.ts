/**
 * Killed at every forge call: `tron start` (its own process, PR mode, an issue to land and
 * a malformed one) is killed with SIGKILL right after the forge answered its n-th write —
 * a comment posted, a pull request opened or updated, an issue closed: the instant after
 * the forge acted and before tron could record it — and started again. Whatever n, the
 * block lands once, through one pull request, and no comment is posted twice.
 *
 * The same after its n-th read — the issue list, a comment lookup before a post, the pull
 * request's lookup by branch, the checks and reviews: the instant tron learned something
 * and before it acted on it or wrote it down. Every read is one start's worth of work,
 * so by default a spread of reads is killed at (the first, the last, and two between);
 * `TRON_CRASH_SWEEP=full` kills after every one, as the cluster sweep does.
 */
import { expect } from 'vitest';
import { type After, type KillOutcome, killedRun, killSweeps } from '../testing/forge-crash.ts';
import { forgeProject, type ForgeProject } from '../testing/github/project.ts';
import type { Seen } from '../testing/github/server.ts';
import { greetingBuilder } from '../testing/workers.ts';

/** A call of tron's that changes something on the forge (the hosted CI's check runs are not tron's). */
const tronWrite = (s: Seen) => s.method !== 'GET' && !s.path.includes('/check-runs') && s.status < 400;
/** A call of tron's that reads the forge (a 304 too: tron learned that nothing changed). */
const tronRead = (s: Seen) => s.method === 'GET' && s.status < 400;

type Outcome = KillOutcome & { p: ForgeProject };

/** One scenario: killed after tron's `killAt`-th write or read (none: undefined), then started again until a run ends by itself. */
function scenario(killAt: number | undefined, after: After = 'write'): Promise<Outcome> {
  const calls = { write: tronWrite, read: tronRead };
  return killedRun(
    killAt,
    after,
    calls,
    (onServed) => forgeProject({ builder: greetingBuilder, forge: 'land = "pr"\n', onServed }),
    async (p) => {
      p.gh.protect('main', ['ci/test']);
      await p.ci('ci/test', 'test "$(cat greeting.txt)" = hello');
      p.gh.openIssue({ title: 'Add a greeting', body: '- [ ] greeting.txt says hello', labels: ['tron'] });
      p.gh.openIssue({ title: 'Vague wish', body: 'Make it nice.', labels: ['tron'] });
    },
  );
}

/** Each comment's tron marker; a marker seen twice is a comment posted twice. */
function markers(p: ForgeProject, issue: number): string[] {
  return p.gh.comments(issue).flatMap((c) => /<!-- tron:[^>]*-->/.exec(c.body)?.[0] ?? []);
}

function expectOnce(o: Outcome, n?: number, after: After = 'write'): void {
  const { p } = o;
  if (n !== undefined)
    expect(
      p.gh.issue(1)!.state,
      `killed after ${after} ${n}: ${p.gh.seen
        .filter(after === 'write' ? tronWrite : tronRead)
        .map((s) => `${s.method} ${s.path}`)
        .join(', ')}`,
    ).toBe('closed');
  expect(o.exits.at(-1), JSON.stringify(o.exits)).toBe(0);
  expect(p.gh.pulls().filter((x) => x.head.ref === 'tron/gh-1-add-a-greeting')).toHaveLength(1);
  expect(p.gh.pulls()).toHaveLength(1);
  for (const n of [1, 2]) {
    const m = markers(p, n);
    expect(new Set(m).size, `issue #${n}: ${m.join(', ')}`).toBe(m.length);
  }
  expect(p.gh.comments(2)).toHaveLength(1);
  expect(markers(p, 1).filter((m) => m.includes(':landed'))).toHaveLength(1);
  expect(p.gh.issue(1)!.state).toBe('closed');
}

killSweeps({ title: 'killed at every forge call', change: 'pull request', comment: 'comment', forge: 'the forge', scenario, expectOnce });
