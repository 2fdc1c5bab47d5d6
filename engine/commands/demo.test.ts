import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { tronPath } from '../root.ts';
import { fsck } from '../testing/store.ts';

const BIN = tronPath('bin', 'tron.js');

/** Each test gets its own TMPDIR, so the demo's throwaway repository is easy to find, or to miss. */
const temps: string[] = [];
function privateTmp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-demo-test-'));
  temps.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});
const demoFolders = (tmp: string) => readdirSync(tmp).filter((name) => name.startsWith('tron-demo-'));

describe('tron demo', () => {
  it('runs to the end — the lie caught, every block landed — and its last line is true: the repository is gone', async () => {
    const tmp = privateTmp();
    const result = await execa('node', [BIN, 'demo'], { reject: false, stdin: 'ignore', env: { TMPDIR: tmp } });
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('shout: gate failed — commits');
    expect(result.stdout).toContain('3 landed, 0 parked, 0 abandoned');
    expect(result.stdout).toMatch(/Add farewell\(\)\n.*Add (shout|greet)\(\)/);
    const last = result.stdout.trimEnd().split('\n').at(-1)!;
    const repo = /tron demo: a throwaway repository at (\S+),/.exec(result.stdout)?.[1];
    expect(repo?.startsWith(tmp)).toBe(true);
    expect(last).toBe(`The throwaway repository ${repo} has been removed; \`tron demo --keep\` keeps it to look at.`);
    expect(demoFolders(tmp)).toEqual([]);
  });

  it('keeps the repository with --keep and ends with what to type to look at it', async () => {
    const tmp = privateTmp();
    const result = await execa('node', [BIN, 'demo', '--keep'], { reject: false, stdin: 'ignore', env: { TMPDIR: tmp } });
    expect(result.exitCode).toBe(0);
    const [repo] = demoFolders(tmp).map((name) => join(tmp, name));
    expect(repo).toBeDefined();
    expect(existsSync(join(repo!, '.tron', 'runs'))).toBe(true);
    expect(existsSync(join(repo!, '.tron', 'engine.lock'))).toBe(false);
    // The demo's workers left the history whole.
    expect(await fsck(repo!)).toEqual({ code: 0, said: '' });
    const tail = result.stdout.trimEnd().split('\n').slice(-6).join('\n');
    expect(tail).toContain(`The throwaway repository is kept at ${repo}.`);
    expect(tail).toContain(`tron status --repo ${repo}`);
    expect(tail).toContain(`rm -rf ${repo}`);
    const status = await execa('node', [BIN, 'status', '--repo', repo!], { reject: false, stdin: 'ignore' });
    expect(status.stdout).toMatch(/\(finished\)/);
  });

  it('stops on SIGINT while the run is under way, removes its repository and lock, and exits 130', async () => {
    const tmp = privateTmp();
    // No SIGKILL from execa 5 s after the SIGINT: the demo's own stop is what is tested.
    const child = execa('node', [BIN, 'demo'], { reject: false, stdin: 'ignore', env: { TMPDIR: tmp }, forceKillAfterDelay: false });
    let seen = '';
    let repoSeen = false;
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        // The engine has started its run: the repository and its lock exist now.
        if (/tron: run \S+ — /.test(seen) && !repoSeen) {
          repoSeen = demoFolders(tmp).length === 1;
          child.kill('SIGINT');
          resolve();
        }
      });
      child.on('exit', () => reject(new Error(`the demo ended before its run started:\n${seen}`)));
    });
    const result = await child;
    expect(repoSeen).toBe(true);
    expect(result.exitCode).toBe(130);
    expect(result.stdout).toContain('tron demo: SIGINT — stopping the run and removing the throwaway repository');
    expect(result.stderr).toBe('');
    expect(demoFolders(tmp)).toEqual([]);
  });

  it('cleans up when its reader goes away (`tron demo | head -3`), quietly, with the status of a broken pipe', async () => {
    const tmp = privateTmp();
    const result = await execa('bash', ['-c', `node "${BIN}" demo | head -3; echo "demo exit \${PIPESTATUS[0]}" >&2`], {
      reject: false,
      stdin: 'ignore',
      env: { TMPDIR: tmp },
    });
    expect(result.stdout.split('\n')).toHaveLength(3);
    expect(result.stdout).toContain('tron demo: a throwaway repository at');
    expect(result.stderr.trim()).toBe('demo exit 141');
    expect(demoFolders(tmp)).toEqual([]);
  });
});
