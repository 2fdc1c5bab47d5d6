/**
 * The gate's checkouts are made at start while the first builders work — after the
 * blocks' worktrees, never before them: the worktrees' effects join the worktree queue
 * only once their lines are durable, and a warm-up queued first held every first
 * builder back by seven whole checkouts (six gates and the lane at max_parallel 6).
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { project, runTron } from '../testing/project.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';

/** A sim builder that adds a module and its passing test, then claims DONE. */
function builds(id: string): string {
  return `[[blocks.${id}.builder]]
write = { "${id}.js" = "exports.value = '${id}';\\n", "tests/${id}.test.js" = "require('node:assert').strictEqual(require('../${id}.js').value, '${id}');\\n" }
commit = "Add ${id}"
reply = ">>DONE"
`;
}

describe("the gate's warm checkouts", () => {
  it("are made after the blocks' worktrees at start", async () => {
    const repo = await project({ blocks: { a: {}, b: {} }, sim: builds('a') + builds('b') });
    // When a block is reviewed, its worktree and the gate's checkouts all exist: when each
    // was made is when git wrote its admin folder's `gitdir` (written once, at `worktree add`).
    const made = new Map<string, bigint>();
    const admin = join(repo.dir, '.git', 'worktrees');
    const reviewer: WorkerAdapter = {
      kind: 'sim',
      runTurn: async () => {
        for (const name of ['a', 'b', '_check-1', '_check-2', '_lane'])
          if (!made.has(name)) made.set(name, statSync(join(admin, name, 'gitdir'), { bigint: true }).mtimeNs);
        return { ok: true, reply: '>>APPROVE' };
      },
    };
    const run = await runTron(repo, { workers: { reviewer } });
    expect(run.exit).toBe(0);
    for (const checkout of ['_check-1', '_check-2', '_lane'])
      for (const block of ['a', 'b'])
        expect(`${checkout} after ${block}: ${made.get(checkout)! > made.get(block)!}`).toBe(`${checkout} after ${block}: true`);
  });
});
