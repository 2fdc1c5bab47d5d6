/**
 * The repository's history is not the worker's to delete (issue 26): real bwrap, real
 * git, each attack run inside the sandbox exactly as a worker's command runs. After each,
 * every file of the object store that existed before the turn is still there, byte for
 * byte, `git fsck` of the repository is clean, and the block's own work still lands.
 */
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as git from '../git/index.ts';
import { BWRAP, BWRAP_SKIP } from '../testing/bwrap.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { fsck, storeFiles, touched } from '../testing/store.ts';
import type { TurnRequest } from './adapter.ts';
import { STORES_DIR } from './private-store.ts';
import { bwrapSandbox, turnConfinement, type Confinement, type LeaveReport } from './sandbox.ts';
import { turnRequest } from '../testing/workers.ts';

describe.skipIf(BWRAP_SKIP !== undefined)('the object store, against a sandboxed worker', () => {
  const sandbox = bwrapSandbox(BWRAP ?? 'bwrap');
  let repo: TestRepo;
  let common: string;
  let objects: string;
  const wt = (id: string) => git.worktreePath(repo.dir, id);
  const env = () => ({ HOME: repo.dir, PATH: process.env.PATH });

  beforeAll(async () => {
    repo = await makeRepo({ 'README.md': '# app\n', '.tron/.gitignore': 'runs/\nworktrees/\n' });
    // Some history packed, some loose: an attack has both kinds of file to aim at.
    for (let i = 1; i <= 5; i++) {
      await repo.write(`src/f${i}.txt`, `${i}\n`.repeat(i * 10));
      await repo.commitAll(`f${i}`);
      if (i === 3) await repo.git('repack', '-adq');
    }
    common = join(repo.dir, '.git');
    objects = join(common, 'objects');
    mkdirSync(join(repo.dir, '.tron', 'runs', 'r1'), { recursive: true });
  });
  afterAll(async () => {
    await repo?.cleanup();
  });

  const request = (role: TurnRequest['role'], block: string, cwd: string): TurnRequest => turnRequest(repo.dir, role, block, cwd);

  /** Runs `script` by sh in the sandbox; what it printed and the leave report. */
  async function run(confinement: Confinement, script: string) {
    const entered = await sandbox.enter(['sh', '-c', script], confinement);
    const [file, ...args] = entered.argv;
    const result = await execa(file!, args, {
      cwd: confinement.cwd,
      env: { PATH: process.env.PATH ?? '', HOME: repo.dir, COMMON: common },
      extendEnv: false,
      reject: false,
    });
    const left: LeaveReport = await entered.leave();
    return { out: String(result.stdout), err: String(result.stderr), left };
  }

  async function builderTurn(block: string, script: string) {
    const base = await repo.git('rev-parse', 'main');
    if (!existsSync(wt(block))) await git.createWorktree(repo.dir, { id: block, base });
    const before = storeFiles(objects);
    const turn = await run(turnConfinement(request('builder', block, wt(block)), [], env()), script);
    return { ...turn, touched: touched(before, storeFiles(objects)) };
  }

  /** The block's branch lands on trunk, and the repository is whole. */
  async function landsWhole(block: string) {
    const trunk = await repo.git('rev-parse', 'main');
    const sha = await repo.git('rev-parse', `tron/${block}`);
    const landed = await git.land(repo.dir, { trunk: 'main', expectedOld: trunk, sha, id: block });
    expect(landed.ok).toBe(true);
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
    // The private stores went with their turns.
    expect(readdirSync(join(common, STORES_DIR))).toEqual([]);
  }

  const commit = (block: string, n = 1) =>
    Array.from({ length: n }, (_, i) => `echo ${block}${i} > ${block}.txt && git add ${block}.txt && git commit -qm "${block} ${i}"`).join(
      ' && ',
    );

  it('cannot remove, truncate or rewrite any object or pack of the repository, however it goes about it', async () => {
    const turn = await builderTurn(
      'rm',
      [
        commit('rm'),
        // Every object trunk reaches, by its name, wherever the worker can find a store.
        'for o in $(git rev-list --objects main | cut -d" " -f1); do',
        '  d=$(echo $o | cut -c1-2); f=$(echo $o | cut -c3-)',
        '  for s in "$COMMON/objects" $(cat "$COMMON/objects/info/alternates"); do rm -f "$s/$d/$f" 2>/dev/null && [ ! -e "$s/$d/$f" ] || echo "kept $o"; done',
        'done',
        'for s in $(cat "$COMMON/objects/info/alternates"); do',
        '  rm -rf "$s"/* 2>/dev/null; echo "rmall $?"',
        '  for p in "$s"/pack/*.pack "$s"/pack/*.idx; do (: > "$p") 2>/dev/null; echo "truncate $?"; done',
        '  for p in "$s"/pack/*.pack; do (printf x | dd of="$p" bs=1 seek=20 conv=notrunc) 2>/dev/null; echo "rewrite $?"; done',
        '  for p in "$s"/pack/*.pack; do mv "$p" "$p.gone" 2>/dev/null; echo "rename $?"; done',
        '  chmod -R u+w "$s" 2>/dev/null; echo "chmod $?"',
        'done',
        'find "$COMMON/.." /tmp -path "*/pack/pack-*" -delete 2>/dev/null; echo "find $?"',
        'git rev-parse --verify -q main^{tree} >/dev/null; echo "visible $?"',
        commit('rm2'),
      ].join('\n'),
    );
    const { out, left, touched: lost } = turn;
    expect(lost).toEqual([]);
    expect(out).toMatch(/^kept /m);
    for (const what of ['rmall', 'truncate', 'rewrite', 'rename', 'chmod', 'find']) expect(out).toMatch(new RegExp(`^${what} [1-9]`, 'm'));
    // Its own private store emptied, it still saw all of history through the alternate, and committed on top.
    expect(out).toMatch(/^visible 0$/m);
    expect(left.moved?.to).toBe(await repo.at(wt('rm')).git('rev-parse', 'HEAD'));
    expect(await repo.git('show', `${left.moved?.to}:rm2.txt`)).toBe('rm20');
    await landsWhole('rm');
  });

  it('runs git gc --prune=now, git repack -adf and git prune on its own store alone, and its commits still come in', async () => {
    const turn = await builderTurn(
      'gc',
      [
        commit('gc', 3),
        'git gc --prune=now 2>/dev/null; echo "gc $?"',
        'git repack -adf -q; echo "repack $?"',
        'git prune --expire=now; echo "prune $?"',
        'git count-objects -v | grep -E "^(count|in-pack):"',
        commit('gc2'),
      ].join('\n'),
    );
    const { out, left, touched: lost } = turn;
    expect(lost).toEqual([]);
    // gc stops at once: it locks gc.pid in the git directory, read-only as before. repack and prune run.
    expect(out).toMatch(/^gc [1-9]/m);
    expect(out).toMatch(/^repack 0$/m);
    expect(out).toMatch(/^prune 0$/m);
    // repack -a without -l copies what it borrows into the private store: all of history, there.
    expect(out).toMatch(/^in-pack: [1-9]/m);
    expect(left.moved?.to).toBe(await repo.at(wt('gc')).git('rev-parse', 'HEAD'));
    expect(await repo.git('log', '--format=%s', '-4', `tron/gc`)).toBe('gc2 0\ngc 2\ngc 1\ngc 0');
    await landsWhole('gc');
  });

  it('rewrites its branch many times; only what the branch ends at comes into the repository', async () => {
    const all = async () => new Set((await repo.git('cat-file', '--batch-all-objects', '--batch-check=%(objectname)')).split('\n'));
    const base = await repo.git('rev-parse', 'main');
    const before = await all();
    const {
      out,
      left,
      touched: lost,
    } = await builderTurn(
      'amend',
      [
        commit('amend', 3),
        'for i in $(seq 1 25); do echo "draft $i" > draft.txt; git add draft.txt; git commit -q --amend -m "draft $i"; done',
        'FILTER_BRANCH_SQUELCH_WARNING=1 git filter-branch -f --msg-filter "sed s/draft/final/" HEAD~2..HEAD >/dev/null 2>&1; echo "filter $?"',
        'git reset -q --hard HEAD && git log --format=%s -1',
      ].join('\n'),
    );
    expect(lost).toEqual([]);
    const tip = left.moved?.to;
    expect(tip).toBe(await repo.at(wt('amend')).git('rev-parse', 'HEAD'));
    // What came in is exactly what the branch reaches beyond its base: none of the drafts.
    const reached = new Set((await repo.git('rev-list', '--objects', tip!, `^${base}`)).split('\n').map((l) => l.split(' ')[0]!));
    const added = [...(await all())].filter((o) => !before.has(o));
    expect(added.sort()).toEqual([...reached].sort());
    expect(out).toMatch(/^filter \d+$/m);
    await landsWhole('amend');
  });

  it('keeps what it staged but did not commit: the index still reads after the turn', async () => {
    const { left } = await builderTurn('staged', `${commit('staged')} && echo pending > pending.txt && git add pending.txt`);
    expect(left.moved).toBeDefined();
    const tree = repo.at(wt('staged'));
    expect(await tree.git('diff', '--cached', '--name-only')).toBe('pending.txt');
    expect(await tree.git('cat-file', '-p', ':pending.txt')).toBe('pending');
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
  });

  it('rebases its branch onto a trunk that moved, and the rebased commits come in', async () => {
    await builderTurn('rebase', commit('rebase', 2));
    await repo.write('src/trunk.txt', 'moved\n');
    const trunk = await repo.commitAll('trunk moved');
    const { out, left } = await builderTurn('rebase', 'git rebase -q main; echo "rebase $?"');
    expect(out).toMatch(/^rebase 0$/m);
    expect(await repo.git('rev-parse', `${left.moved?.to}~2`)).toBe(trunk);
    expect(await repo.git('log', '--format=%s', '-2', 'tron/rebase')).toBe('rebase 1\nrebase 0');
    await landsWhole('rebase');
  });

  it('still moves its branch when its index names an object that is nowhere', async () => {
    const ghost = 'f'.repeat(40);
    const { left } = await builderTurn('ghost', `${commit('ghost')} && git update-index --add --cacheinfo 100644,${ghost},ghost.txt`);
    expect(left.moved?.to).toBe(await repo.at(wt('ghost')).git('rev-parse', 'HEAD'));
    expect(await repo.git('show', `${left.moved?.to}:ghost.txt`)).toBe('ghost0');
  });

  it('cannot slip in an object under a name that is not its own: the branch does not move', async () => {
    // The worker commits, then swaps its new tree's file for another object's bytes.
    const {
      out,
      left,
      touched: lost,
    } = await builderTurn(
      'forge',
      [
        commit('forge'),
        't=$(git rev-parse HEAD^{tree}); o=$(echo other | git hash-object -w --stdin)',
        'd=$COMMON/objects; cp -f "$d/$(echo $o | cut -c1-2)/$(echo $o | cut -c3-)" "$d/$(echo $t | cut -c1-2)/$(echo $t | cut -c3-)"; echo "forged $?"',
      ].join('\n'),
    );
    expect(out).toMatch(/^forged 0$/m);
    expect(lost).toEqual([]);
    expect(left.moved).toBeUndefined();
    expect(left.problem).toMatch(/could not be brought into the repository/);
    expect(await repo.git('rev-parse', 'tron/forge')).toBe(await repo.git('rev-parse', 'main'));
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
  });

  it("a reviewer cannot write an object, into the repository's store or any other", async () => {
    const sha = await repo.git('rev-parse', 'main');
    const review = await git.createReviewCheckout(repo.dir, { id: 'rv', sha });
    const before = storeFiles(objects);
    const { out } = await run(
      turnConfinement(request('reviewer', 'rv', review), [], env()),
      [
        'echo x | git hash-object -w --stdin >/dev/null 2>&1; echo "hash $?"',
        'git commit -q --allow-empty -m r 2>/dev/null; echo "commit $?"',
        // A name no fan-out folder has: a failure here is the read-only store, never an existing folder.
        'mkdir "$COMMON/objects/tron-probe" 2>/dev/null; echo "mkdir $?"',
        'rm -f "$COMMON"/objects/pack/* 2>/dev/null; ls "$COMMON"/objects/pack | grep -c pack; echo "rm $?"',
        'git gc --prune=now -q 2>/dev/null; echo "gc $?"',
      ].join('\n'),
    );
    for (const what of ['hash', 'commit', 'mkdir', 'gc']) expect(out).toMatch(new RegExp(`^${what} [1-9]`, 'm'));
    expect(touched(before, storeFiles(objects))).toEqual([]);
    expect([...storeFiles(objects).keys()].filter((p) => !before.has(p))).toEqual([]);
    await git.removeWorktree(repo.dir, review);
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
  });

  it('a test run in an engine checkout cannot remove objects either', async () => {
    const dir = await git.checkoutAt(repo.dir, '_check-1', await repo.git('rev-parse', 'main'));
    const before = storeFiles(objects);
    const entered = await sandbox.enter(
      ['/bin/sh', '-c', 'rm -rf "$COMMON"/objects/* 2>/dev/null; echo "rm $?"; git gc --prune=now -q 2>/dev/null; echo "gc $?"'],
      {
        cwd: dir,
        writableCwd: true,
        network: false,
        visible: [repo.dir],
      },
    );
    const [file, ...args] = entered.argv;
    const result = await execa(file!, args, {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', COMMON: common },
      extendEnv: false,
      reject: false,
    });
    await entered.leave();
    expect(String(result.stdout)).toMatch(/^rm [1-9]/m);
    expect(touched(before, storeFiles(objects))).toEqual([]);
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
  });

  it('leaves no private store behind, whatever the turn did', () => {
    expect(readdirSync(join(common, STORES_DIR))).toEqual([]);
  });
});
