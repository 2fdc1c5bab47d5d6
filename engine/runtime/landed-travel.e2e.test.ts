import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { landingSim, ofType, project, runTron } from '../testing/project.ts';
import { remoteProject, type RemoteProject } from '../testing/remote-project.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';

const scratch: string[] = [];
const projects: RemoteProject[] = [];
afterEach(async () => {
  for (const p of projects.splice(0)) await p.cleanup();
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

const ENV = { ...GIT_IDENTITY_ENV, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };

/** A teammate's plain `git clone` of `from`: branches and tags only, no run directories, no refs/tron/*. */
async function teammateClone(from: string): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-teammate-'));
  scratch.push(dir);
  await execa('git', ['clone', '-q', from, dir], { env: { ...process.env, ...ENV } });
  const git = async (...args: string[]) => (await execa('git', args, { cwd: dir, env: { ...process.env, ...ENV } })).stdout.trim();
  return { dir, git } as unknown as TestRepo;
}

describe('landed state travels with the repository', () => {
  it('a plain clone of a repository where blocks landed builds none of them again, and says what it found', async () => {
    const first = await project({ blocks: { add: {}, subtract: {} }, sim: landingSim(['add', 'subtract']) });
    const ran = await runTron(first);
    expect(ran.exit, ran.output.join('\n')).toBe(0);
    expect(
      ofType(ran.events, 'block.landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(['add', 'subtract']);

    const clone = await teammateClone(first.dir);
    const trunk = await clone.git('rev-parse', 'main');
    const again = await runTron(clone, { env: ENV });
    expect(again.exit, again.output.join('\n')).toBe(0);
    expect(ofType(again.events, 'block.dispatched')).toEqual([]);
    const recovered = ofType(again.events, 'block.recovered');
    expect(recovered.map((e) => [e.block, e.phase]).sort()).toEqual([
      ['add', 'landed'],
      ['subtract', 'landed'],
    ]);
    expect(await clone.git('rev-parse', 'main')).toBe(trunk);
    expect(again.output.join('\n')).toMatch(/add, subtract landed before this clone's first run/);
    // The clone now holds the landings as its own record: a second start finds nothing to do.
    expect(await clone.git('rev-parse', 'refs/tron/landed/add')).toBe(await first.git('rev-parse', 'refs/tron/landed/add'));
    const third = await runTron(clone, { env: ENV });
    expect(third.exit, third.output.join('\n')).toBe(0);
    expect(third.output.join('\n')).toMatch(/nothing to do — 2 landed/);
  }, 120_000);

  it("believes an upstream's landed ref only at a sha on the clone's own trunk: one off it is named, and its block built", async () => {
    const first = await project({ blocks: { add: {}, subtract: {} }, sim: landingSim(['add', 'subtract']) });
    // A landed ref for add at a commit that never reached trunk (a side branch's), as a forger would leave it.
    await first.git('checkout', '-q', '-b', 'side');
    await first.git('commit', '-q', '--allow-empty', '-m', 'side');
    await first.git('update-ref', 'refs/tron/landed/add', 'HEAD');
    await first.git('checkout', '-q', 'main');

    const clone = await teammateClone(first.dir);
    const ran = await runTron(clone, { env: ENV });
    expect(ran.exit, ran.output.join('\n')).toBe(0);
    expect(ran.output.join('\n')).toMatch(/add landed at shas main here does not hold on its first-parent history/);
    expect(
      ofType(ran.events, 'block.landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(['add', 'subtract']);
  }, 120_000);

  it('goes on without the landings of an upstream that does not answer, and says so once', async () => {
    const first = await project({ blocks: { add: {} }, sim: landingSim(['add']) });
    const clone = await teammateClone(first.dir);
    // Nothing listens on port 1: the upstream is unreachable.
    await clone.git('remote', 'set-url', 'origin', 'git://127.0.0.1:1/gone.git');
    const ran = await runTron(clone, { env: ENV });
    expect(ran.exit, ran.output.join('\n')).toBe(0);
    expect(ran.output.filter((l) => l.includes("origin's landed refs could not be read"))).toHaveLength(1);
    expect(ofType(ran.events, 'block.landed').map((e) => e.block)).toEqual(['add']);
  }, 120_000);

  it('a clone of the remote a run landed on builds none of the landed blocks again', async () => {
    const p = await remoteProject();
    projects.push(p);
    const ran = await runTron(p.repo, { env: p.env });
    expect(ran.exit, ran.output.join('\n')).toBe(0);
    const landed = ofType(ran.events, 'block.landed')
      .map((e) => e.block)
      .sort();
    expect(landed.length).toBeGreaterThan(0);

    const clone = await teammateClone(p.served.url);
    const again = await runTron(clone, { env: p.env });
    expect(again.exit, again.output.join('\n')).toBe(0);
    expect(ofType(again.events, 'block.dispatched')).toEqual([]);
    expect(
      ofType(again.events, 'block.recovered')
        .filter((e) => e.phase === 'landed')
        .map((e) => e.block)
        .sort(),
    ).toEqual(landed);
    expect(await clone.git('rev-parse', 'main')).toBe(await p.bare.git('rev-parse', 'main'));
  }, 180_000);
});
