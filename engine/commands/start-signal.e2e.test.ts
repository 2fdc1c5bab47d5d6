/**
 * `tron start` stopped by Ctrl-C, as a user stops it: the real CLI on a repository whose
 * builder hangs, one SIGINT once its first turn runs. (watch.test.ts stops `--watch` with
 * SIGTERM; this is the plain run and the signal a terminal sends.)
 */
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { project } from '../testing/project.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');

describe('tron start interrupted with SIGINT', () => {
  it('says once that it stops, names the block it leaves unfinished, and exits 130', async () => {
    const repo = await project({ blocks: { stuck: {} }, sim: '[[blocks.stuck.builder]]\nhang = true\n' });
    // No SIGKILL from execa after the SIGINT: the engine's own stop is what is tested.
    const child = execa('node', [BIN, 'start', '--plain', '--repo', repo.dir], {
      reject: false,
      stdin: 'ignore',
      env: GIT_IDENTITY_ENV,
      forceKillAfterDelay: false,
    });
    let seen = '';
    let sent = false;
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        // One signal, once the builder's turn is under way.
        if (!sent && /stuck: build \(attempt 1\)/.test(seen)) {
          sent = true;
          child.kill('SIGINT');
          resolve();
        }
      });
      child.on('exit', () => reject(new Error(`tron start ended before its first turn:\n${seen}`)));
    });
    const result = await child;
    expect(result.exitCode, `${result.stdout}\n${result.stderr}`).toBe(130);
    expect(result.stdout.match(/SIGINT — no new work/g)).toEqual(['SIGINT — no new work']);
    expect(result.stdout).not.toContain('SIGINT again');
    expect(result.stdout).toContain('tron: stuck is unfinished — the next `tron start` goes on with it');
    expect(result.stderr).toBe('');
  });
});
