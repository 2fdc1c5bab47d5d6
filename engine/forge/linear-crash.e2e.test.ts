/**
 * Killed at every Linear write: `tron start` (its own process, Linear's intake, landing on
 * a served remote; an issue to land and a malformed one) is killed with SIGKILL as Linear
 * serves its n-th mutation — a comment posted, the issue moved to Done: the instant Linear
 * acted and before tron could record it — and started again. Whatever n, the block lands
 * once, the issue ends in Done, and no comment is posted twice. The same after its first
 * and its last query (every one with `TRON_CRASH_SWEEP=full`; GitHub's file kills the
 * intake and progress every source shares after a spread of four).
 */
import { expect } from 'vitest';
import { type After, type KillOutcome, killedRun, killSweeps } from '../testing/forge-crash.ts';
import { type LinearProject, linearProject } from '../testing/linear/project.ts';
import type { Seen } from '../testing/linear/server.ts';
import { greetingBuilder } from '../testing/workers.ts';

const tronWrite = (s: Seen) => s.kind === 'mutation' && s.status < 400;
const tronRead = (s: Seen) => s.kind === 'query' && s.status < 400;

type Outcome = KillOutcome & { p: LinearProject };

function scenario(killAt: number | undefined, after: After = 'write'): Promise<Outcome> {
  const calls = { write: tronWrite, read: tronRead };
  return killedRun(
    killAt,
    after,
    calls,
    (onServed) => linearProject({ builder: greetingBuilder, onServed }),
    (p) => {
      p.linear.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
      p.linear.openIssue({ title: 'Vague wish', description: 'Make it nice.', labels: ['tron'] });
    },
  );
}

/** Each of tron's comments' markers on an issue; a marker seen twice is a comment posted twice. */
function markers(p: LinearProject, issue: number): string[] {
  return p.linear.issue(issue)!.comments.flatMap((c) => (c.user === p.linear.viewer ? (/`tron:[^`]+`/.exec(c.body)?.[0] ?? []) : []));
}

function expectOnce(o: Outcome, n?: number, after: After = 'write'): void {
  const { p } = o;
  const where =
    n === undefined
      ? 'not killed'
      : `killed after ${after} ${n}: ${p.linear.seen
          .filter(after === 'write' ? tronWrite : tronRead)
          .map((s) => s.operation)
          .join(', ')}`;
  expect(o.exits.at(-1), `${where} ${JSON.stringify(o.exits)}`).toBe(0);
  expect(p.linear.issue(1)!.state.type, where).toBe('completed');
  expect(p.linear.invalid, where).toEqual([]);
  for (const i of [1, 2]) {
    const m = markers(p, i);
    expect(new Set(m).size, `${where}; ${p.linear.team}-${i}: ${m.join(', ')}`).toBe(m.length);
  }
  expect(markers(p, 2)).toHaveLength(1);
  expect(markers(p, 1).filter((m) => m.includes(':landed'))).toHaveLength(1);
}

killSweeps({
  title: 'killed at every Linear call',
  comment: 'comment',
  forge: 'Linear',
  // The malformed issue's comment, the started comment, the landed comment, the move to Done.
  writes: 4,
  reads: 6,
  readPoints: 2,
  scenario,
  expectOnce,
});
