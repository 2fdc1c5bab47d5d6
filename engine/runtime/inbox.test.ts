/**
 * The inbox's names are never paths of another shape: whatever an event or a caller says,
 * only `<ms>-<block>.json` is read, moved or written (engine/core/names.ts ANSWER_FILE).
 * On a real repository: a name that climbs out of the inbox moves nothing.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ManualClock } from '../os/clock.ts';
import { makeRepo, type TestRepo } from '../testing/repo.ts';
import { consumeAnswer, INBOX_DIR, InboxReader, refuseAnswer, writeAnswer } from './inbox.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

const KEY = Buffer.alloc(32, 7);

describe('inbox file names', () => {
  it('moves nothing for a consumed or refused file named "../../.git", nor for an earlier run\'s record of one', async () => {
    const repo = await makeRepo({ 'a.txt': 'a\n' });
    repos.push(repo);
    const runDir = join(repo.dir, '.tron', 'runs', 'r');
    for (const file of ['../../.git', '../../a.txt', '..', '/etc/passwd', 'x\u0000.json']) {
      consumeAnswer(repo.dir, file, runDir);
      refuseAnswer(repo.dir, file, runDir);
    }
    const reader = new InboxReader({ repo: repo.dir, runDir, key: KEY, trunk: 'main', print: () => {}, note: () => {} });
    reader.consumedEarlier(['../../.git', '../../a.txt']);
    expect(existsSync(join(repo.dir, '.git', 'HEAD'))).toBe(true);
    expect(existsSync(join(repo.dir, 'a.txt'))).toBe(true);
    expect(existsSync(join(runDir, 'answers'))).toBe(false);
    expect(await repo.git('status', '--porcelain')).toBe('');
  });

  it('still moves an answer file of the name tron answer wrote', async () => {
    const repo = await makeRepo({});
    repos.push(repo);
    const runDir = join(repo.dir, '.tron', 'runs', 'r');
    const file = writeAnswer(repo.dir, 'login', '>>ABANDON {"reason":"no"}', new ManualClock(1_796_043_825_346), KEY);
    expect(file).toBe('1796043825346-login.json');
    consumeAnswer(repo.dir, file, runDir);
    expect(readdirSync(join(runDir, 'answers'))).toEqual([file]);
    expect(readdirSync(join(repo.dir, INBOX_DIR))).toEqual([]);
  });

  it('refuses to write an answer for a block whose id is a path, with TRON_ANSWER_BLOCK', async () => {
    const repo = await makeRepo({});
    repos.push(repo);
    expect(() => writeAnswer(repo.dir, '../../x', '>>ABANDON {"reason":"no"}', new ManualClock(1), KEY)).toThrow(/TRON_ANSWER_BLOCK/);
    expect(existsSync(join(repo.dir, 'x.json'))).toBe(false);
  });
});
