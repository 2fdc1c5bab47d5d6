/**
 * An engine that leads from a clone of its own — a standby on another host, or any new
 * clone of a repository whose log is in the database — through the CLI, against a real
 * PostgreSQL and a served remote. It has none of the leader's files: its key, its landed
 * refs, its worktrees. It takes the key from the database (pg-keys.ts), the landings and
 * the verified work from the remote (runtime/remote-recovery.ts), and builds nothing the
 * run already did.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import type { TronEvent } from '../core/events.ts';
import { readLog } from '../log/eventlog.ts';
import { keyPath } from '../log/keys.ts';
import { clusterHosts } from '../testing/cluster-hosts.ts';
import { skipWithoutPostgres, useTestDatabase } from '../testing/postgres.ts';
import type { RemoteProject } from '../testing/remote-project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';
import { writeBuilder } from '../testing/workers.ts';

const IDS = ['alpha', 'beta', 'gamma'];

describe.skipIf(skipWithoutPostgres('an engine in a clone of its own'))('an engine in a clone of its own', () => {
  const db = useTestDatabase();
  const hosts = clusterHosts();
  afterEach(() => hosts.end());

  /** The crash project on a served remote, its log in the database under `repository`, and a second clone of the remote made now. */
  async function twoHosts(repository: string, settings: { remote?: string; reviewer?: string } = {}) {
    const p = await hosts.servedProject({ database: db.url, repository, lease: '1s' }, (config) => {
      if (settings.remote) config = config.replace('[remote]\n', `[remote]\n${settings.remote}\n`);
      if (settings.reviewer) config = config.replace(/(\[workers\.reviewer\][^[]*command = ).*\n/, `$1["${settings.reviewer}"]\n`);
      return config;
    });
    const second = await hosts.cloneOf(p.repo, 'repo');
    const env = { ...GIT_IDENTITY_ENV, ...p.env, TRON_DATABASE_URL: '' };
    const start = (dir: string, ...extra: string[]) => hosts.cli(['start', '--repo', dir, '--plain', ...extra], { env: p.env });
    const git = async (dir: string, ...args: string[]) => (await execa('git', args, { cwd: dir, env })).stdout.trim();
    return { p, second, start, git };
  }

  /** Every block landed once on the remote's trunk, and the clone's trunk and landed refs are the remote's. */
  async function landedOnce(p: RemoteProject, clone: string, git: (dir: string, ...args: string[]) => Promise<string>) {
    const subjects = (await p.bare.git('log', '--format=%s', 'main')).split('\n');
    for (const id of IDS)
      expect(
        subjects.filter((s) => s === `Build ${id}`),
        `${id} on the remote's trunk`,
      ).toHaveLength(1);
    expect(await git(clone, 'rev-parse', 'main')).toBe(await p.bare.git('rev-parse', 'main'));
    for (const id of IDS)
      expect(await git(clone, 'rev-parse', `refs/tron/landed/${id}`), id).toBe(await p.bare.git('rev-parse', `refs/tron/landed/${id}`));
  }

  /** The events of a clone's runs, oldest first (each run's copy of its lines). */
  function runsOf(clone: string): TronEvent[][] {
    const runs = join(clone, '.tron', 'runs');
    return readdirSync(runs)
      .sort()
      .filter((id) => existsSync(join(runs, id, 'events.jsonl')))
      .map((id) => readLog(join(runs, id, 'events.jsonl')).events);
  }

  it('takes the key and the landings of a finished run: nothing is built again, nothing pushed', async () => {
    const { p, second, start, git } = await twoHosts('after-a-run');
    const first = await start(p.repo.dir);
    expect(first.exitCode, first.stdout).toBe(0);
    const remoteBefore = await p.bare.git('for-each-ref', '--format=%(refname) %(objectname)');

    const again = await start(second);
    expect(again.exitCode, `${again.stdout}\n${again.stderr}`).toBe(0);
    expect(again.stdout).toContain('nothing to do — 3 landed');
    expect(again.stdout).toMatch(/main fast-forwarded [0-9a-f]{12} → [0-9a-f]{12}; the landed refs of alpha, beta, gamma made local/);
    expect(`${again.stdout}\n${again.stderr}`).not.toContain('set aside');
    // The database's key, kept where this host keeps keys: it checked the leader's lines with it.
    expect(readFileSync(keyPath(second), 'utf8')).toBe(readFileSync(keyPath(p.repo.dir), 'utf8'));
    expect(await p.bare.git('for-each-ref', '--format=%(refname) %(objectname)')).toBe(remoteBefore);
    await landedOnce(p, second, git);
    // Its checkout of trunk followed.
    expect(await git(second, 'status', '--porcelain', '--untracked-files=no')).toBe('');
    expect(existsSync(join(second, 'gamma.txt'))).toBe(true);
  }, 180_000);

  it('stops with TRON_TRUNK_DIVERGED, building nothing and moving nothing, when its trunk has commits the remote lacks', async () => {
    const { p, second, start, git } = await twoHosts('diverged');
    expect((await start(p.repo.dir)).exitCode).toBe(0);
    writeFileSync(join(second, 'local.txt'), 'only here\n');
    await git(second, 'add', 'local.txt');
    await git(second, '-c', 'user.name=Dev', '-c', 'user.email=dev@example.invalid', 'commit', '-qm', 'A commit only this clone has');
    const head = await git(second, 'rev-parse', 'main');

    const refused = await start(second);
    expect(refused.exitCode, `${refused.stdout}\n${refused.stderr}`).toBe(2);
    expect(refused.stderr).toContain('TRON_TRUNK_DIVERGED');
    expect(refused.stderr).toContain('lacks the landings of alpha, beta, gamma');
    expect(`${refused.stdout}\n${refused.stderr}`).not.toMatch(/\n\s+at /);
    expect(await git(second, 'rev-parse', 'main')).toBe(head);
    expect(await git(second, 'for-each-ref', 'refs/tron/landed/')).toBe('');
  }, 180_000);

  it('takes over from a SIGKILLed leader as a standby: verified work, kept on the remote, resumes there; every block lands once', async () => {
    const workers = hosts.folder('tron-second-host-workers-');
    const held = join(workers, 'beta.held');
    // beta's first review hangs (its pid in `held`) until the leader is gone; every other review approves.
    const reviewer = writeBuilder(
      workers,
      `#!/bin/sh
cat > /dev/null
if [ "$TRON_BLOCK" = beta ] && [ ! -e "${held}" ]; then
  echo $$ > "${held}.tmp" && mv "${held}.tmp" "${held}"
  exec sleep 120
fi
echo '>>APPROVE'
`,
    );
    const { p, second, start, git } = await twoHosts('handover', { reviewer });
    // Made (migrated) before the leader starts, so the lease can be watched from the first instant.
    const watch = await db.open();
    const leader = start(p.repo.dir);
    while ((await watch.client.query(`select 1 from tron_lease where repository = 'handover'`)).rows.length === 0) {
      expect(leader.exitCode, 'the leader ended before it took the lease').toBeNull();
      await new Promise((r) => setTimeout(r, 20));
    }
    const standby = start(second, '--standby');
    // beta is under review, its verified work kept on the remote (refs/tron/work/beta): then its leader's host is lost.
    const deadline = Date.now() + 60_000;
    while (!existsSync(held) || (await p.bare.git('for-each-ref', 'refs/tron/work/beta')) === '') {
      expect(leader.exitCode, `the leader ended early: ${leader.stdout}`).toBeNull();
      expect(Date.now() < deadline, "beta's review hung, its work on the remote (refs/tron/work/beta), within a minute").toBe(true);
      await new Promise((r) => setTimeout(r, 50));
    }
    leader.kill('SIGKILL');
    process.kill(Number(readFileSync(held, 'utf8')), 'SIGKILL');
    expect((await leader).signal).toBe('SIGKILL');

    const done = await standby;
    expect(done.exitCode, `${done.stdout}\n${done.stderr}`).toBe(0);
    await landedOnce(p, second, git);
    // The standby's run: after the leader's, which it brought from the database.
    const took = runsOf(second).at(-1);
    const restored = took!.find((e) => e.type === 'work.restored');
    expect(restored, done.stdout).toMatchObject({ blocks: expect.arrayContaining([{ block: 'beta', sha: expect.any(String) }]) });
    // It resumed at review where the leader left it, not built again.
    const beta = took!.find((e) => e.type === 'block.recovered' && e.block === 'beta');
    expect(beta).toMatchObject({ phase: 'review' });
    expect(took!.filter((e) => e.type === 'block.dispatched' && e.block === 'beta' && e.role === 'builder')).toEqual([]);
    expect(took!.some((e) => e.type === 'log.foreign')).toBe(false);
    // The work refs went with the landings.
    expect(await p.bare.git('for-each-ref', 'refs/tron/work/')).toBe('');
  }, 180_000);
});
