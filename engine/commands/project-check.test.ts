import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import { blockFile, configFile } from '../testing/project.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { checkProject } from './project-check.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

async function problemsOf(files: Record<string, string>): Promise<{ code: string; path: string; message: string }[]> {
  const repo = await makeRepo(files);
  repos.push(repo);
  const error = await checkProject(repo.dir).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(InputError);
  return (error as InputError).problems;
}

describe('checkProject', () => {
  it('reports a trunk that does not exist in the same pass as the other problems of the config and the register', async () => {
    const config = configFile().replace('trunk = "main"', 'trunk = "master"').replace('max_parallel = 2', 'max_paralel = 2');
    const problems = await problemsOf({
      '.tron/config.toml': config,
      '.tron/blocks/subtract.md': blockFile('subtract', {}),
      '.tron/blocks/multiply.md': blockFile('multiply', { depends_on: ['substract'] }),
    });
    expect(problems.map((p) => [p.code, p.path])).toEqual([
      ['TRON_CONFIG_UNKNOWN_KEY', '.tron/config.toml: max_paralel'],
      ['TRON_TRUNK_MISSING', '.tron/config.toml: trunk'],
      ['TRON_DEPENDS_UNKNOWN', '.tron/blocks/multiply.md: depends_on'],
    ]);
    expect(problems[1]!.message).toMatch(/^the trunk branch "master" does not exist in /);
    expect(problems[2]!.message).toMatch(/did you mean "subtract"\?/);
  });

  it('checks the default trunk, main, when the config names none', async () => {
    const problems = await problemsOf({ '.tron/config.toml': `${configFile().replace('trunk = "main"\n', '')}\nbogus = 1\n` });
    expect(problems.map((p) => p.code)).toEqual(['TRON_CONFIG_UNKNOWN_KEY']);
  });

  it('returns the config and blocks of a repository without problems', async () => {
    const repo = await makeRepo({ '.tron/config.toml': configFile(), '.tron/blocks/a.md': blockFile('a', {}) });
    repos.push(repo);
    const { config, blocks } = await checkProject(repo.dir);
    expect(config.trunk).toBe('main');
    expect(blocks.map((b) => b.id)).toEqual(['a']);
  });
});
