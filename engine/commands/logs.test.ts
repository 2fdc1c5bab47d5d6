import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { logsCommand } from './logs.ts';
import { wholeCharacters } from '../log/turn-log.ts';
import { makeProject, runTron } from '../testing/project.ts';
import { commandConfig, slowBuilder } from '../testing/workers.ts';
import { BIN } from '../testing/crash.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';
import { InputError } from '../core/errors.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function slowProject(line: string): Promise<{ repo: TestRepo; go: string }> {
  const dir = tempDir('tron-logs-');
  const go = join(dir, 'go');
  const repo = await makeProject({ blocks: { widget: {} }, config: commandConfig(slowBuilder(dir, line, go)) });
  cleanups.push(() => repo.cleanup());
  return { repo, go };
}

/** `tron start` in the background, as a user would run it in another terminal. */
function startInBackground(repo: TestRepo) {
  const child = execa('node', [BIN, 'start', '--repo', repo.dir], {
    reject: false,
    stdin: 'ignore',
    env: GIT_IDENTITY_ENV,
    timeout: 60_000,
  });
  cleanups.push(async () => {
    child.kill('SIGKILL');
    await child;
  });
  return child;
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** What `tron logs` prints, in-process. */
async function logs(repo: TestRepo, block?: string): Promise<string> {
  let out = '';
  await logsCommand({
    repo: repo.dir,
    ...(block ? { block } : {}),
    print: (line) => {
      out += `${line}\n`;
    },
    write: (text) => {
      out += text;
    },
  });
  return out;
}

const runDirOf = (repo: TestRepo) => {
  const runs = join(repo.dir, '.tron', 'runs');
  return existsSync(runs) ? readdirSync(runs).sort().at(-1) : undefined;
};

describe('tron logs BLOCK', () => {
  it("shows a running turn's output before the turn ends", async () => {
    const { repo, go } = await slowProject('resolving 14 modules');
    const engine = startInBackground(repo);
    const shown = await until('the turn output in tron logs', async () => {
      if (!runDirOf(repo)) return undefined;
      const out = await logs(repo, 'widget').catch(() => '');
      return out.includes('resolving 14 modules') ? out : undefined;
    });
    // The worker is still waiting for `go`: its turn has not ended.
    expect(existsSync(go)).toBe(false);
    expect(shown).toMatch(/── widget · builder · build · widget\.1\.builder turn 1 · \d\d:\d\d:\d\d ──\nresolving 14 modules\n/);
    writeFileSync(go, '');
    expect((await engine).exitCode).toBe(0);
  });

  it('with -f, follows the running turn and every next one, and exits when the run finishes', async () => {
    const { repo, go } = await slowProject('linking the widget');
    const engine = startInBackground(repo);
    await until('a run directory', () => runDirOf(repo));
    const follower = execa('node', [BIN, 'logs', '-f', '--repo', repo.dir, 'widget'], { reject: false, stdin: 'ignore', timeout: 60_000 });
    cleanups.push(async () => {
      follower.kill('SIGKILL');
      await follower;
    });
    let seen = '';
    follower.stdout!.on('data', (chunk: Buffer) => {
      seen += chunk.toString('utf8');
    });
    await until('the follower to show the running turn', () => (seen.includes('linking the widget') ? true : undefined));
    expect(existsSync(go)).toBe(false);
    writeFileSync(go, '');
    expect((await engine).exitCode).toBe(0);
    const result = await follower;
    expect(result.exitCode).toBe(0);
    // Every turn, in order, each under its header: build (stderr and the reply), challenge, review.
    const headers = [...seen.matchAll(/^── widget · (\w+) · (\w+) · (\S+) turn (\d+)/gm)].map((m) => `${m[1]} ${m[2]} ${m[4]}`);
    expect(headers).toEqual(['builder build 1', 'builder challenge 2', 'reviewer review 1']);
    expect(seen).toMatch(/linking the widget\n>>DONE\n/);
    expect(seen).toContain('>>CONFIRMED');
    expect(seen).toContain('>>APPROVE');
  });

  it('refuses a block the run does not have, naming it (exit 2)', async () => {
    const repo = await makeProject({ blocks: { widget: {} } });
    cleanups.push(() => repo.cleanup());
    await runTron(repo);
    await expect(logs(repo, 'gizmo')).rejects.toThrow(InputError);
    const cli = await execa('node', [BIN, 'logs', '--repo', repo.dir, 'gizmo'], { reject: false });
    expect(cli.exitCode).toBe(2);
    expect(cli.stderr).toMatch(/TRON_USAGE: gizmo: no block "gizmo"/);
  });
});

describe('tron logs', () => {
  it('narrates a finished run in exactly the lines tron start printed', async () => {
    const sim = `[[blocks.widget.builder]]
kind = "build"
write = { "widget.js" = "exports.widget = 1;\\n" }
commit = "Add widget"
reply = ">>DONE"

[[blocks.widget.builder]]
kind = "build"
write = { "widget.js" = "exports.widget = 2;\\n" }
commit = "Name the export"
reply = ">>DONE"

[[blocks.widget.reviewer]]
reply = '>>CHANGES {"notes":"name the export"}'
`;
    const repo = await makeProject({ blocks: { widget: {} }, sim });
    cleanups.push(() => repo.cleanup());
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const narrated = await logs(repo);
    expect(narrated.trimEnd().split('\n')).toEqual(run.output.join('\n').split('\n'));
    expect(narrated).toMatch(/widget: review → build \(CHANGES\): name the export/);
    // A worker without a process of its own: its actions as notes, then its reply.
    const turns = await logs(repo, 'widget');
    expect(turns).toContain('── widget · builder · build · widget.1.builder turn 1');
    expect(turns).toContain('» sim: wrote widget.js\n» sim: committed "Add widget"\n» reply:\n» >>DONE\n');
  });
});

describe('wholeCharacters', () => {
  it('never ends a read in the middle of a UTF-8 character', () => {
    const bytes = Buffer.from('a€b😀', 'utf8'); // 1 + 3 + 1 + 4 bytes
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => wholeCharacters(bytes, n))).toEqual([1, 1, 1, 4, 5, 5, 5, 5, 9]);
  });
});
