import { afterEach, describe, expect, it } from 'vitest';
import { copyFileSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { makeProject, runTron } from '../testing/project.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
import { snapshot } from '../testing/snapshot.ts';
import { ManualClock, systemClock } from '../os/clock.ts';
import { acquireLock } from '../log/lockfile.ts';
import { tronPath } from '../root.ts';
import { cleanCommand, type CleanOptions } from './clean.ts';

const BIN = tronPath('bin', 'tron.js');
const DAY = 86_400_000;

let repo: TestRepo | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

/**
 * A repository after a real run — `done` landed, `stuck` parked with its worktree — plus
 * what runs leave behind: a worktree of the landed block, one of a block no longer in the
 * register, a review checkout, an orphan branch preserved 30 days ago and one preserved
 * now, and three older run directories.
 */
async function leftovers(): Promise<{ repo: TestRepo; latest: string }> {
  const r = await makeProject({
    blocks: { done: {}, stuck: {} },
    sim: `[[blocks.done.builder]]\nwrite = { "done.txt" = "ok\\n" }\ncommit = "done"\nreply = ">>DONE"\n\n[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
  });
  const run = await runTron(r);
  expect(run.exit).toBe(3);
  expect(existsSync(join(r.dir, '.tron', 'worktrees', 'stuck'))).toBe(true);
  const head = await r.git('rev-parse', 'main');
  for (const name of ['done', 'ghost', 'stuck.review']) await r.git('worktree', 'add', '--detach', `.tron/worktrees/${name}`, head);
  const orphan = async (branch: string, date: string) =>
    execa('git', ['update-ref', '-m', 'preserve', `refs/heads/${branch}`, head, ''], {
      cwd: r.dir,
      env: { ...GIT_IDENTITY_ENV, GIT_COMMITTER_DATE: date },
    });
  await orphan('orphan/done-1', new Date(Date.now() - 30 * DAY).toISOString());
  await orphan('orphan/stuck-1', new Date().toISOString());
  for (const id of ['20200101-000000-001', '20200102-000000-001', '20200103-000000-001']) {
    mkdirSync(join(r.dir, '.tron', 'runs', id));
    copyFileSync(join(run.runDir, 'events.jsonl'), join(r.dir, '.tron', 'runs', id, 'events.jsonl'));
  }
  return { repo: r, latest: run.runDir };
}

async function clean(r: TestRepo, o: Partial<CleanOptions> = {}): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await cleanCommand({ repo: r.dir, dryRun: false, all: false, clock: systemClock, print: (l) => lines.push(l), ...o });
  return { code, lines };
}

const worktrees = (r: TestRepo) => readdirSync(join(r.dir, '.tron', 'worktrees')).sort();
const runs = (r: TestRepo) => readdirSync(join(r.dir, '.tron', 'runs')).sort();
const branches = async (r: TestRepo) => (await r.git('branch', '--format=%(refname:short)')).split('\n').sort();

describe('tron clean', () => {
  it('lists with --dry-run exactly what it would remove, and changes nothing', async () => {
    const made = await leftovers();
    repo = made.repo;
    const before = snapshot(repo.dir);
    const branchesBefore = await branches(repo);
    const { code, lines } = await clean(repo, { dryRun: true, keep: 2 });
    expect(code).toBe(0);
    expect(lines).toContain('tron clean: would remove worktree .tron/worktrees/done (block done is landed)');
    expect(lines).toContain('tron clean: would remove worktree .tron/worktrees/ghost (no block ghost in the latest run)');
    expect(lines.some((l) => l.startsWith('tron clean: would remove worktree .tron/worktrees/stuck.review'))).toBe(true);
    expect(lines.some((l) => l.startsWith('tron clean: would remove branch orphan/done-1 (preserved 30 days ago'))).toBe(true);
    expect(lines.filter((l) => l.includes('run directory'))).toEqual([
      'tron clean: would remove run directory .tron/runs/20200101-000000-001 (older than the newest 2)',
      'tron clean: would remove run directory .tron/runs/20200102-000000-001 (older than the newest 2)',
    ]);
    expect(lines.at(-1)).toBe('tron clean: would remove 3 worktrees, 1 orphan branch, 2 run directories; nothing was changed');
    expect(lines.join('\n')).not.toMatch(/worktrees\/stuck \(|orphan\/stuck-1/);
    expect(snapshot(repo.dir)).toEqual(before);
    expect(await branches(repo)).toEqual(branchesBefore);
  });

  it('removes stale worktrees, old orphans and old runs, and keeps the parked block’s worktree, recent orphans and the latest run', async () => {
    const made = await leftovers();
    repo = made.repo;
    const { code, lines } = await clean(repo, { keep: 1 });
    expect(code).toBe(0);
    expect(lines.at(-1)).toBe('tron clean: removed 3 worktrees, 1 orphan branch, 3 run directories');
    expect(worktrees(repo)).toEqual(['stuck']);
    expect(await repo.git('worktree', 'list')).not.toMatch(/done|ghost|review/);
    expect(await branches(repo)).toEqual(['main', 'orphan/stuck-1', 'tron/stuck']);
    expect(runs(repo)).toEqual([made.latest.split('/').at(-1)]);
    // What the next start needs is all there: it recovers the parked block as it was.
    const status = await execa('node', [BIN, 'status', '--repo', repo.dir], { reject: false, stdin: 'ignore' });
    expect(status.stdout).toMatch(/^stuck\s+parked/m);
    expect((await clean(repo)).lines).toEqual(['tron clean: nothing to clean']);
  });

  it('removes every orphan branch with --all, however recent', async () => {
    const made = await leftovers();
    repo = made.repo;
    const { lines } = await clean(repo, { all: true, clock: new ManualClock(Date.now()) });
    expect(lines.some((l) => l.startsWith('tron clean: removed branch orphan/stuck-1 (--all'))).toBe(true);
    expect((await branches(repo)).filter((b) => b.startsWith('orphan/'))).toEqual([]);
  });

  it('refuses with TRON_LOCKED while an engine holds the repository, also for a dry run, changing nothing', async () => {
    const made = await leftovers();
    repo = made.repo;
    const lock = acquireLock(join(repo.dir, '.tron', 'engine.lock'), { purpose: 'a test engine', command: 'tron start' });
    try {
      const before = snapshot(repo.dir);
      for (const args of [[], ['--dry-run']]) {
        const result = await execa('node', [BIN, 'clean', '--repo', repo.dir, ...args], { reject: false, stdin: 'ignore' });
        expect(result.exitCode).toBe(2);
        expect(result.stderr).toMatch(/^TRON_LOCKED: .*engine\.lock: held by pid \d+ `tron start`/);
        expect(result.stdout).toBe('');
      }
      expect(snapshot(repo.dir)).toEqual(before);
    } finally {
      lock.release();
    }
  });

  it('is wired into the command line: --keep must be a whole number of at least 1', async () => {
    const made = await leftovers();
    repo = made.repo;
    const zero = await execa('node', [BIN, 'clean', '--repo', repo.dir, '--keep', '0'], { reject: false, stdin: 'ignore' });
    expect(zero.exitCode).toBe(2);
    expect(zero.stderr).toMatch(/^TRON_USAGE: --keep: "0"/);
    const dry = await execa('node', [BIN, 'clean', '--repo', repo.dir, '--dry-run', '--keep', '3'], { reject: false, stdin: 'ignore' });
    expect(dry.exitCode).toBe(0);
    expect(dry.stdout).toContain('would remove 3 worktrees, 1 orphan branch, 1 run directory; nothing was changed');
  });
});
