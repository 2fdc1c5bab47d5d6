/**
 * The repository's history, end to end (issue 26): `tron start` with real command
 * workers. Sandboxed, builders that delete every object, run gc and repack, or rewrite
 * their branch over and over, and a reviewer that writes objects, cost nothing: every
 * block lands and `git fsck` is clean. Unsandboxed, the same deletion — or damage
 * planted before the start — stops the run with TRON_STORE_DAMAGED, exit 1, and
 * nothing lands.
 */
import { createHash } from 'node:crypto';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BWRAP_SKIP } from '../testing/bwrap.ts';
import { configFile, makeProject, ofType, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { fsck } from '../testing/store.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** Removes, from every object store the worker can name, each object trunk reaches. */
const DELETE_HISTORY = `for o in $(git rev-list --objects main | cut -d" " -f1); do
  d=$(echo $o | cut -c1-2); f=$(echo $o | cut -c3-)
  for s in "$(git rev-parse --git-common-dir)/objects" $(cat "$(git rev-parse --git-common-dir)/objects/info/alternates" 2>/dev/null); do rm -f "$s/$d/$f" 2>/dev/null; done
done`;

/** A project whose builder does what `attacks[id]` says, then commits `<id>.txt` unless there is one; the reviewer runs `review` and approves. */
async function project(
  attacks: Record<string, string>,
  opts: { sandbox: 'bwrap' | 'off'; review?: string; damaged?: 'on purpose' },
): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-history-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const cases = Object.entries(attacks)
    .map(([id, script]) => `  ${id}) ${script.split('\n').join('\n    ')} ;;`)
    .join('\n');
  writeFileSync(
    join(dir, 'builder.sh'),
    `#!/bin/sh
prompt=$(cat)
case "$prompt" in *"# Evidence for block"*) echo '>>CONFIRMED {"evidence":{"c1":"committed"}}'; exit 0 ;; esac
id=$(basename "$PWD")
case "$id" in
${cases}
esac
[ -e "$id.txt" ] || { echo "$id" > "$id.txt" && git add "$id.txt" && git commit -qm "Add $id"; }
echo '>>DONE'
`,
  );
  writeFileSync(join(dir, 'reviewer.sh'), `#!/bin/sh\ncat > /dev/null\n${opts.review ?? ''}\necho ">>APPROVE"\n`);
  chmodSync(join(dir, 'builder.sh'), 0o755);
  chmodSync(join(dir, 'reviewer.sh'), 0o755);
  const workers = `[workers.builder]\nadapter = "command"\ncommand = ["${dir}/builder.sh"]\n\n[workers.reviewer]\nadapter = "command"\ncommand = ["${dir}/reviewer.sh"]\n`;
  const blocks = Object.fromEntries(Object.keys(attacks).map((id) => [id, {}]));
  const repo = await makeProject({
    blocks,
    config: `${configFile({ workers, maxParallel: 3 })}\n[sandbox]\nmode = "${opts.sandbox}"\n`,
  });
  // The damaged-store tests break the store on purpose; every other ends with git fsck of it.
  cleanups.push(() => repo.cleanup({ fsck: opts.damaged === undefined }));
  return repo;
}

/** amend.txt after `n` amends. */
const amended = (n: number) => `${['amend', ...Array.from({ length: n }, (_, i) => String(i + 1))].join('\n')}\n`;

/** The name git gives a blob of `text` (SHA-1 repositories). */
function blobSha(text: string): string {
  const body = Buffer.from(text);
  return createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex');
}

describe.skipIf(BWRAP_SKIP !== undefined)('hostile workers, sandboxed', () => {
  it('delete every object, gc, repack, amend and write objects, and every block still lands with the repository whole', async () => {
    const repo = await project(
      {
        wipe: `${DELETE_HISTORY}\n  rm -rf "$(git rev-parse --git-common-dir)"/objects/* /tmp/.tron-shared-objects/* 2>/dev/null`,
        gc: 'git gc --prune=now -q 2>/dev/null; git repack -adfq 2>/dev/null; git prune --expire=now',
        amend:
          'echo amend > amend.txt; git add amend.txt; git commit -qm "Add amend"\n  for i in $(seq 1 15); do echo "$i" >> amend.txt; git commit -qa --amend -m "Add amend"; done',
      },
      {
        sandbox: 'bwrap',
        review: 'echo x | git hash-object -w --stdin; rm -rf "$(git rev-parse --git-common-dir)"/objects/* 2>/dev/null; true',
      },
    );
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    expect(
      ofType(run.events, 'block.landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(['amend', 'gc', 'wipe']);
    expect(`${await repo.git('show', 'main:amend.txt')}\n`).toBe(amended(15));
    expect(await fsck(repo.dir)).toEqual({ code: 0, said: '' });
    // Only the branch's final text came in: no blob of the fifteen drafts before it.
    const drafts = Array.from({ length: 15 }, (_, n) => blobSha(amended(n)));
    const asked = await execa('git', ['cat-file', '--batch-check'], { cwd: repo.dir, input: `${drafts.join('\n')}\n` });
    expect(String(asked.stdout).split('\n')).toEqual(drafts.map((sha) => `${sha} missing`));
    // The final text did: the test would see a draft were one there.
    expect(await repo.git('cat-file', '-t', blobSha(amended(15)))).toBe('blob');
  });
});

describe('a damaged object store', () => {
  it('planted before the start stops tron with TRON_STORE_DAMAGED, exit 1, and nothing runs', async () => {
    const repo = await project({ a: '' }, { sandbox: 'off', damaged: 'on purpose' });
    const trunk = await repo.git('rev-parse', 'main');
    renameSync(join(repo.dir, '.git', 'objects', trunk.slice(0, 2), trunk.slice(2)), join(repo.dir, '.git', 'lost-trunk'));
    const result = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toContain('TRON_STORE_DAMAGED');
    expect(result.stderr).toContain(`refs/heads/main → commit ${trunk}`);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(repo.dir, '.tron', 'runs'))).toBe(false);
    expect(await repo.git('for-each-ref', '--format=%(refname)', 'refs/tron/')).toBe('');
  });

  it('made by an unsandboxed builder stops the run with TRON_STORE_DAMAGED, exit 1, and no block lands', async () => {
    const repo = await project({ a: DELETE_HISTORY, b: '' }, { sandbox: 'off', damaged: 'on purpose' });
    const trunk = await repo.git('rev-parse', 'main');
    const run = await runTron(repo);
    expect(run.exit).toBe(1);
    expect(run.output.join('\n')).toContain('TRON_STORE_DAMAGED');
    expect(ofType(run.events, 'block.landed')).toEqual([]);
    expect(readdirSync(join(repo.dir, '.git', 'refs', 'heads'))).toContain('main');
    expect(await repo.git('rev-parse', 'main')).toBe(trunk);
    expect(await repo.git('for-each-ref', '--format=%(refname)', 'refs/tron/landed/')).toBe('');
    // And the next start says so too, before anything runs.
    const again = await execa('node', [BIN, 'start', '--repo', repo.dir], { reject: false });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain('TRON_STORE_DAMAGED');
  });
});
