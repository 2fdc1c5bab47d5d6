/**
 * One block's broken state never stops the run. A worker can wreck what is its own — its
 * worktree, its git dir, its branch — and that costs its own block a failed fact (back to
 * build, then escalation), while every other block goes on and lands. Only failures of
 * what the engine alone owns end a run (docs/architecture.md, "What ends a run").
 * Real git, and the sandbox as `tron start` chooses it (bubblewrap where it runs).
 */
import { describe, expect, it } from 'vitest';
import { DECISION_TYPES, type DecisionType } from '../core/events.ts';
import { replay } from '../core/replay.ts';
import { loadSpine } from '../spine/load.ts';
import { ofType, project, runTron } from '../testing/project.ts';
import { EFFECTS } from './effects/table.ts';

/** Block a's builder commits honest work, then runs `line` in its worktree; b is an honest block. */
function sim(line: string): string {
  return `[[blocks.a.builder]]
kind = "build"
write = { "a.txt" = "a\\n" }
commit = "Build a"
run = '''${line}'''

[[blocks.b.builder]]
kind = "build"
write = { "b.txt" = "b\\n" }
commit = "Build b"
reply = ">>DONE"
`;
}

describe("a builder that breaks its own worktree's HEAD", () => {
  it.each([
    [
      'at a ref that does not exist',
      'git symbolic-ref HEAD refs/heads/no-such-branch',
      /HEAD is on no-such-branch, not on the block's branch tron\/a/,
    ],
    ["at another block's branch", 'git symbolic-ref HEAD refs/heads/tron/b', /HEAD is on tron\/b, not on the block's branch tron\/a/],
  ])('pointing it %s costs its own block a failed fact; the run goes on and the other block lands', async (_what, line, evidence) => {
    const repo = await project({ blocks: { a: {}, b: {} }, sim: sim(line) });
    const run = await runTron(repo);
    expect(ofType(run.events, 'run.failed').map((e) => e.detail)).toEqual([]);
    expect([0, 3]).toContain(run.exit);
    const landed = ofType(run.events, 'block.landed').map((e) => e.block);
    expect(landed).toContain('b');
    const worktreeFacts = ofType(run.events, 'gate.failed')
      .filter((e) => e.block === 'a')
      .flatMap((e) => e.facts.filter((f) => f.name === 'worktree' && !f.ok));
    expect(worktreeFacts.length).toBeGreaterThan(0);
    expect(worktreeFacts[0]!.evidence).toMatch(evidence);
    expect(landed).not.toContain('a');
    expect(run.exit).toBe(3);
  });
});

/** Two honest blocks, each with its own scripted build. */
const HONEST = ['a', 'b']
  .map((id) => `[[blocks.${id}.builder]]\nkind = "build"\nwrite = { "${id}.txt" = "${id}\\n" }\ncommit = "Build ${id}"\nreply = ">>DONE"\n`)
  .join('\n');

/** Makes the effect of `type` throw once for `block`, as a worktree or process a worker wrecked would make it; returns the undo. */
function injectFailure(type: DecisionType, block: string): () => void {
  const effect = EFFECTS[type]!;
  const run = effect.run;
  let thrown = false;
  effect.run = (c, r) => {
    type Named = { block?: string; blocks?: Array<{ block: string }> };
    const decision = (r as { decision?: Named }).decision ?? (r as Named);
    if (!thrown && (decision.block === block || decision.blocks?.some((b) => b.block === block))) {
      thrown = true;
      throw new Error(`fatal: injected failure in ${type} for ${block}`);
    }
    return run(c, r);
  };
  return () => {
    effect.run = run;
  };
}

describe('a failure injected into an effect for one block', () => {
  // Every effect kind that reaches what a worker can reach, for each block in turn: the
  // other block's outcome is the same as with no failure (it lands), and the run never fails.
  const kinds = DECISION_TYPES.filter((t) => EFFECTS[t]?.onFailure !== undefined && t !== 'worker.overran');
  it.each(kinds.flatMap((kind) => ['a', 'b'].map((block) => [kind, block] as const)))(
    'in %s for %s leaves the other block landing, and the run never fails',
    async (kind, block) => {
      const repo = await project({ blocks: { a: {}, b: {} }, sim: HONEST });
      const undo = injectFailure(kind, block);
      try {
        const run = await runTron(repo);
        expect(ofType(run.events, 'run.failed').map((e) => e.detail)).toEqual([]);
        const other = block === 'a' ? 'b' : 'a';
        expect(ofType(run.events, 'block.landed').map((e) => e.block)).toContain(other);
        expect([0, 3]).toContain(run.exit);
      } finally {
        undo();
      }
    },
  );

  it('in what the engine alone owns (the landing) ends the run with exit 1 — the other side of the line', async () => {
    const repo = await project({ blocks: { a: {} }, sim: HONEST });
    const undo = injectFailure('land.intent', 'a');
    try {
      const run = await runTron(repo);
      expect(run.exit).toBe(1);
      expect(ofType(run.events, 'run.failed')).toMatchObject([{ after: 'land.intent' }]);
      // Decided by the step: the failed run replays.
      expect(replay(run.events, { spine: loadSpine(), testCommand: 'node test.js' })).toMatchObject({ ok: true });
    } finally {
      undo();
    }
  });
});
