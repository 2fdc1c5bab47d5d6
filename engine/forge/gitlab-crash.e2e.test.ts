/**
 * Killed at every GitLab write: `tron start` (its own process, `land = "pr"`, an issue to
 * land and a malformed one) is killed with SIGKILL right after GitLab answered its n-th
 * write — a note posted, a merge request opened or updated, an issue closed: the instant
 * after GitLab acted and before tron could record it — and started again. Whatever n, the
 * block lands once, through one merge request, and no note is posted twice. The same
 * after its first and its last read (every one with `TRON_CRASH_SWEEP=full`; GitHub's file
 * kills the intake and progress both forges share after a spread of four).
 */
import type { ResultPromise } from 'execa';
import { expect } from 'vitest';
import { type After, type KillOutcome, killSweeps, startUntilUnkilled } from '../testing/forge-crash.ts';
import { type GitLabProject, gitlabProject } from '../testing/gitlab/project.ts';
import type { Seen } from '../testing/gitlab/server.ts';

const BUILDER = () => `#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"greeting.txt says hello"}}'; exit 0 ;;
esac
echo hello > greeting.txt; git add -A; git commit -qm "$TRON_BLOCK: greeting"
echo ">>DONE"
`;

/** A call of tron's that changes something on GitLab (the external CI's commit statuses are not tron's). */
const tronWrite = (s: Seen) => s.method !== 'GET' && !s.path.includes('/statuses/') && s.status < 400;
/** A call of tron's that reads GitLab. */
const tronRead = (s: Seen) => s.method === 'GET' && s.status < 400;

interface Outcome extends KillOutcome {
  p: GitLabProject;
}

async function scenario(killAt: number | undefined, after: After = 'write'): Promise<Outcome> {
  let child: ResultPromise | undefined;
  let writes = 0;
  let reads = 0;
  const p = await gitlabProject({
    builder: BUILDER,
    forge: 'land = "pr"\n',
    onServed: (s) => {
      if (tronRead(s) && ++reads === killAt && after === 'read') child?.kill('SIGKILL');
      if (tronWrite(s) && ++writes === killAt && after === 'write') child?.kill('SIGKILL');
    },
  });
  await p.ci('test', 'test "$(cat greeting.txt)" = hello');
  p.gl.openIssue({ title: 'Add a greeting', description: '- [ ] greeting.txt says hello', labels: ['tron'] });
  p.gl.openIssue({ title: 'Vague wish', description: 'Make it nice.', labels: ['tron'] });
  const exits = await startUntilUnkilled(p.repo.dir, p.env, (c) => {
    child = c;
  });
  return {
    p,
    writes,
    reads,
    exits,
    landedGreeting: () => p.bare.git('show', 'main:greeting.txt'),
    cleanup: () => p.cleanup(),
  };
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
