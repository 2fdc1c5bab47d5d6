/**
 * Killed at every GitLab write: `tron start` (its own process, `land = "pr"`, an issue to
 * land and a malformed one) is killed with SIGKILL right after GitLab answered its n-th
 * write — a note posted, a merge request opened or updated, an issue closed: the instant
 * after GitLab acted and before tron could record it — and started again. Whatever n, the
 * block lands once, through one merge request, and no note is posted twice. The same
 * after its first and its last read (every one with `TRON_CRASH_SWEEP=full`; GitHub's file
 * kills the intake and progress both forges share after a spread of four).
 */
import { expect } from 'vitest';
import { type After, type KillOutcome, killedRun, killSweeps } from '../testing/forge-crash.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import type { Seen } from '../testing/gitlab/server.ts';
import { greetingBuilder } from '../testing/workers.ts';

/** A call of tron's that changes something on GitLab (the external CI's commit statuses are not tron's). */
const tronWrite = (s: Seen) => s.method !== 'GET' && !s.path.includes('/statuses/') && s.status < 400;
/** A call of tron's that reads GitLab. */
const tronRead = (s: Seen) => s.method === 'GET' && s.status < 400;

type Outcome = KillOutcome & { p: GitLabProject };

function scenario(killAt: number | undefined, after: After = 'write'): Promise<Outcome> {
  const calls = { write: tronWrite, read: tronRead };
  return killedRun(
    killAt,
    after,
    calls,
    (onServed) => gitlabProject({ builder: greetingBuilder, forge: 'land = "pr"\n', onServed }),
    async (p) => {
      await p.ci('test', 'test "$(cat greeting.txt)" = hello');
      p.gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
      p.gl.openIssue({ title: 'Vague wish', description: 'Make it nice.', labels: ['tron'] });
    },
  );
}

/** Each note's tron marker; a marker seen twice is a note posted twice. */
function markers(p: GitLabProject, issue: number): string[] {
  return p.gl.notes(issue).flatMap((n) => /<!-- tron:[^>]*-->/.exec(n.body)?.[0] ?? []);
}

function expectOnce(o: Outcome, n?: number, after: After = 'write'): void {
  const { p } = o;
  const where =
    n === undefined
      ? 'not killed'
      : `killed after ${after} ${n}: ${p.gl.seen
          .filter(after === 'write' ? tronWrite : tronRead)
          .map((s) => `${s.method} ${s.path}`)
          .join(', ')}`;
  expect(o.exits.at(-1), `${where} ${JSON.stringify(o.exits)}`).toBe(0);
  expect(p.gl.issue(1)!.state, where).toBe('closed');
  expect(p.gl.mergeRequests(), where).toHaveLength(1);
  expect(p.gl.mergeRequests()[0]!.source).toBe('tron/gl-1-add-a-greeting');
  for (const i of [1, 2]) {
    const m = markers(p, i);
    expect(new Set(m).size, `${where}; issue #${i}: ${m.join(', ')}`).toBe(m.length);
  }
  expect(p.gl.notes(2).filter((x) => !x.system)).toHaveLength(1);
  expect(markers(p, 1).filter((m) => m.includes(':landed'))).toHaveLength(1);
}

killSweeps({
  title: 'killed at every GitLab write',
  change: 'merge request',
  comment: 'note',
  forge: 'GitLab',
  readPoints: 2,
  scenario,
  expectOnce,
});
