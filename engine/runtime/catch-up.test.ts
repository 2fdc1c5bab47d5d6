import { describe, expect, it, onTestFinished } from 'vitest';
import { InputError } from '../core/errors.ts';
import { parseConfig } from '../project/config.ts';
import { configFile } from '../testing/project.ts';
import { makeRepo } from '../testing/repo.ts';
import { CATCH_UP, catchUp, catchUpNotes } from './catch-up.ts';

async function input(files: Record<string, string>) {
  const repo = await makeRepo(files);
  onTestFinished(() => repo.cleanup());
  const config = parseConfig(configFile(), '.tron/config.toml').config!;
  const printed: string[] = [];
  const trunkSha = await repo.git('rev-parse', 'main');
  return {
    repo,
    printed,
    i: {
      repo: repo.dir,
      config,
      env: {},
      print: (l: string) => printed.push(l),
      blocks: [],
      previous: 'x',
      before: [],
      trunkSha,
      access: undefined,
      forgeRun: undefined,
    },
  };
}

describe('the catch-up before recovery', () => {
  it('runs only the steps that apply: a clone with no remote and an earlier run has nothing to take, and says nothing', async () => {
    const { i, printed } = await input({ 'a.txt': 'a\n' });
    const ran: string[] = [];
    const got = await catchUp(
      i,
      CATCH_UP.map((s) => ({
        ...s,
        run: (x, g) => {
          ran.push(s.name);
          return s.run(x, g);
        },
      })),
    );
    expect(catchUpNotes(got)).toEqual([]);
    expect(printed).toEqual([]);
    expect(got.remote).toBeUndefined();
    // No remote: nothing of it is opened or asked; no first start: no upstream is asked either.
    expect(ran).toEqual([
      'an interrupted landing',
      'what the remote held, said',
      'your checkout, left by an interrupted landing',
      'a clean checkout of trunk',
    ]);
  });

  it('stops the start, changing nothing, when your checkout of trunk holds changes', async () => {
    const { i, repo } = await input({ 'a.txt': 'a\n' });
    await repo.write('a.txt', 'changed by hand\n');
    await expect(catchUp(i)).rejects.toBeInstanceOf(InputError);
    expect(await repo.read('a.txt')).toBe('changed by hand\n');
  });
});
