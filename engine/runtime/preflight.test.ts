import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { InputError } from '../core/errors.ts';
import { loadConfig } from '../project/config.ts';
import { configFile, project } from '../testing/project.ts';
import { NO_SANDBOX } from '../workers/sandbox.ts';
import { preflightTrunk } from './preflight.ts';

const scratch: string[] = [];
afterEach(() => {
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A project whose suite appends a line to a file outside it at each run, then runs `then`. */
async function counted(then: string) {
  const dir = mkdtempSync(join(tmpdir(), 'tron-preflight-count-'));
  scratch.push(dir);
  const count = join(dir, 'runs');
  const config = configFile().replace('test = "node test.js"', `test = ${JSON.stringify(`echo run >> ${count} && ${then}`)}`);
  const repo = await project({ blocks: { add: {} }, config });
  const parsed = loadConfig(repo.dir);
  if (!parsed.config) throw new Error(JSON.stringify(parsed.problems));
  const check = async () =>
    preflightTrunk({
      repo: repo.dir,
      config: parsed.config!,
      trunkSha: await repo.git('rev-parse', 'main'),
      env: { PATH: process.env.PATH },
      sandbox: NO_SANDBOX,
    });
  const runs = () => {
    try {
      return readFileSync(count, 'utf8').split('\n').filter(Boolean).length;
    } catch {
      return 0;
    }
  };
  return { repo, check, runs };
}

describe('the check of trunk', () => {
  it('runs the suite once for a trunk and a config, and not again once it found them green', async () => {
    const p = await counted('node test.js');
    expect(await p.check()).toBeUndefined();
    expect(p.runs()).toBe(1);
    expect(await p.check()).toBeUndefined();
    expect(p.runs()).toBe(1);
    // A new trunk is checked again.
    await p.repo.git('commit', '-q', '--allow-empty', '-m', 'next');
    await p.check();
    expect(p.runs()).toBe(2);
  }, 60_000);

  it('remembers no red verdict: a red trunk is run twice at every check, and refused each time', async () => {
    const p = await counted('echo "assertion failed: 1 !== 2"; exit 1');
    for (const expected of [2, 4]) {
      const err = await p.check().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InputError);
      expect((err as InputError).problems[0]).toMatchObject({ code: 'TRON_TRUNK_RED', path: '.tron/config.toml: test' });
      expect((err as InputError).message).toContain('assertion failed: 1 !== 2');
      expect(p.runs()).toBe(expected);
    }
  }, 60_000);
});
