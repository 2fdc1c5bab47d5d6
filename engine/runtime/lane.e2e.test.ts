import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { batchProject } from '../testing/crash.ts';
import { ofType, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';

const repos: TestRepo[] = [];
const scratch: string[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('the merge lane on real git', () => {
  it('lands a red batch’s green prefix, returns exactly the culprit, and keeps every trunk sha green in a fresh clone', async () => {
    const repo = await batchProject();
    repos.push(repo);
    const run = await runTron(repo);
    expect(run.exit, run.output.join('\n')).toBe(0);

    // However the machine's load grouped the blocks into stacks, the stack that held b3 was
    // red; bisection sent exactly the culprit back, and the blocks stacked below it landed
    // together. The culprit is b3 (its test calls greet), or first when the load stacked b3
    // below it (first renames greet). A rebuild that ran before trunk moved may fail its own
    // gate once more; only the lane's verdicts are the lane's.
    const red = new Set(ofType(run.events, 'candidate.tested').flatMap((e) => (e.ok ? [] : [e.stack])));
    const stack = ofType(run.events, 'lane.stacked').find((e) => red.has(e.stack) && e.blocks.some((b) => b.block === 'b3'));
    expect(stack, 'a red stack holding b3').toBeDefined();
    const order = stack!.blocks.map((b) => b.block);
    const culprit = order.indexOf('first') > order.indexOf('b3') ? 'first' : 'b3';
    expect(
      ofType(run.events, 'gate.failed')
        .filter((e) => e.purpose === 'lane')
        .map((e) => [e.block, e.purpose]),
    ).toEqual([[culprit, 'lane']]);
    const below = order.slice(0, order.indexOf(culprit));
    const prefix = ofType(run.events, 'land.intent').find((e) => e.stack === stack!.stack);
    expect(prefix?.blocks.map((b) => b.block) ?? []).toEqual(below);
    expect(
      ofType(run.events, 'block.landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(['b1', 'b2', 'b3', 'first', 'second']);

    // Blocks that touch different files cost no merge turn.
    expect(ofType(run.events, 'block.dispatched').filter((e) => e.kind === 'merge')).toEqual([]);

    // History is linear, and each landed ref points at its block's own commit.
    expect(await repo.git('rev-list', '--min-parents=2', 'main')).toBe('');
    for (const id of ['first', 'second', 'b1', 'b2', 'b3']) {
      expect(await repo.git('log', '-1', '--format=%s', `refs/tron/landed/${id}`)).toBe(`Build ${id}`);
      expect(await repo.git('merge-base', '--is-ancestor', `refs/tron/landed/${id}`, 'main').then(() => true)).toBe(true);
    }
    expect(await repo.git('show', '--format=', '--name-only', 'refs/tron/landed/b1')).toBe('b1.txt\ntests/b1.test.js');
    // Your checkout of trunk followed every landing: it holds trunk's tree, nothing staged or changed.
    expect(await repo.git('status', '--porcelain', '--untracked-files=no')).toBe('');
    expect(await repo.read('b1.txt')).toBe(await repo.git('show', 'main:b1.txt').then((text) => `${text}\n`));

    // Every sha trunk ever pointed at (its reflog) passes the suite in a fresh clone.
    const pointed = (await repo.git('reflog', 'show', '--format=%H', 'refs/heads/main')).split('\n').filter(Boolean);
    expect(pointed.length).toBe(1 + ofType(run.events, 'land.intent').length);
    const clone = mkdtempSync(join(tmpdir(), 'tron-clone-'));
    scratch.push(clone);
    await execa('git', ['clone', '-q', '--no-local', repo.dir, clone]);
    for (const sha of pointed) {
      await execa('git', ['checkout', '-q', '--detach', sha], { cwd: clone });
      const tests = await execa('node', ['test.js'], { cwd: clone, reject: false });
      expect(tests.exitCode, `trunk was at ${sha}, which is red in a fresh clone:\n${tests.stderr}`).toBe(0);
    }
  }, 180_000);
});
