import { existsSync, readdirSync } from 'node:fs';
import { link, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execa } from 'execa';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { processStartTime } from '../../os/proc.ts';
import type { WorkerRole } from '../../core/roles.ts';
import { minimalEnv } from '../env.ts';
import { RUN_OUTPUT_LIMIT } from './tools-run.ts';
import { builderTools, readOnlyTools, runTool, toolDefinitions, type ToolContext } from './tools.ts';

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), 'tron-tools-'));
  root = path.join(base, 'worktree');
  outside = path.join(base, 'outside');
  await mkdir(path.join(root, 'src'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'top secret');
  await writeFile(path.join(root, 'src', 'a.ts'), 'export const a = 1;\nexport const b = 2;\n');
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

function ctx(overrides: Partial<ToolContext> = {}): ToolContext {
  return {
    cwd: root,
    role: 'builder' as WorkerRole,
    env: minimalEnv(process.env, []),
    toolTimeoutMs: 30_000,
    signal: new AbortController().signal,
    ...overrides,
  };
}

const call = (name: string, args: unknown, c: ToolContext = ctx()) => runTool(name, JSON.stringify(args), c);

describe('the agent tools', () => {
  it('offer OpenAI function definitions, read-only ones to reviewers and all of them to builders', () => {
    expect(toolDefinitions(readOnlyTools).map((t) => t.function.name)).toEqual(['read_file', 'list_dir', 'search', 'run']);
    expect(toolDefinitions(builderTools).map((t) => t.function.name)).toContain('write_file');
    for (const tool of toolDefinitions(builderTools)) expect(tool.function.parameters).toMatchObject({ type: 'object' });
  });

  it('read a file, and page a long one by offset and limit', async () => {
    expect(await call('read_file', { path: 'src/a.ts' })).toBe('export const a = 1;\nexport const b = 2;\n');
    const paged = await call('read_file', { path: 'src/a.ts', offset: 2, limit: 1 });
    expect(paged).toContain('[lines 2-2 of 3 of src/a.ts');
    expect(paged).toContain('export const b = 2;');
    expect(paged).not.toContain('export const a');
  });

  it('write a new file with its parent directories, then edit it with one exact replacement', async () => {
    expect(await call('write_file', { path: 'lib/deep/new.txt', content: 'one two three' })).toContain('wrote lib/deep/new.txt');
    expect(await call('edit_file', { path: 'lib/deep/new.txt', old: 'two', new: '2' })).toContain('edited');
    expect(await readFile(path.join(root, 'lib/deep/new.txt'), 'utf8')).toBe('one 2 three');
  });

  it('refuse an edit whose text is ambiguous or absent, leaving the file unchanged', async () => {
    const before = await readFile(path.join(root, 'src/a.ts'), 'utf8');
    expect(await call('edit_file', { path: 'src/a.ts', old: 'export const', new: 'let' })).toMatch(/^error: .*occurs 2 times/);
    expect(await call('edit_file', { path: 'src/a.ts', old: 'nowhere', new: 'x' })).toMatch(/^error: .*not found/);
    expect(await readFile(path.join(root, 'src/a.ts'), 'utf8')).toBe(before);
  });

  it('list a directory with directories marked', async () => {
    await writeFile(path.join(root, 'README.md'), '# hi');
    expect(await call('list_dir', { path: '.' })).toBe('README.md\nsrc/');
  });

  it('search plain text and regular expressions, skipping .git', async () => {
    await mkdir(path.join(root, '.git'));
    await writeFile(path.join(root, '.git', 'config'), 'export const a');
    expect(await call('search', { pattern: 'const b' })).toBe('src/a.ts:2: export const b = 2;');
    expect(await call('search', { pattern: 'const [ab] = \\d', regex: true, path: 'src' })).toBe(
      'src/a.ts:1: export const a = 1;\nsrc/a.ts:2: export const b = 2;',
    );
    expect(await call('search', { pattern: '(', regex: true })).toMatch(/^error: invalid regular expression/);
  });
});

describe('path confinement', () => {
  it('refuses absolute paths, even ones inside the worktree', async () => {
    expect(await call('read_file', { path: path.join(outside, 'secret.txt') })).toMatch(/^error: refused .*absolute paths/);
    expect(await call('write_file', { path: path.join(root, 'x.txt'), content: 'x' })).toMatch(/absolute paths/);
    expect(existsSync(path.join(root, 'x.txt'))).toBe(false);
  });

  it('refuses .. escapes', async () => {
    expect(await call('read_file', { path: '../outside/secret.txt' })).toMatch(/^error: refused .*outside the worktree/);
    expect(await call('write_file', { path: 'src/../../outside/new.txt', content: 'x' })).toMatch(/outside the worktree/);
    expect(await call('list_dir', { path: '..' })).toMatch(/outside the worktree/);
    expect(existsSync(path.join(outside, 'new.txt'))).toBe(false);
  });

  it('refuses a symlink anywhere on the path, for reads and for writes through it', async () => {
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    await symlink(outside, path.join(root, 'linkdir'));
    expect(await call('read_file', { path: 'link.txt' })).toMatch(/^error: refused link.txt: .*symbolic link/);
    expect(await call('read_file', { path: 'linkdir/secret.txt' })).toMatch(/symbolic link/);
    expect(await call('write_file', { path: 'link.txt', content: 'pwned' })).toMatch(/symbolic link/);
    expect(await call('edit_file', { path: 'link.txt', old: 'top', new: 'pwned' })).toMatch(/symbolic link/);
    expect(await call('write_file', { path: 'linkdir/new/file.txt', content: 'pwned' })).toMatch(/symbolic link/);
    expect(await call('search', { pattern: 'secret', path: 'linkdir' })).toMatch(/symbolic link/);
    expect(await call('list_dir', { path: 'linkdir' })).toMatch(/symbolic link/);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret');
    expect(existsSync(path.join(outside, 'new'))).toBe(false);
  });

  it('refuses writing through a dangling symlink, which would create a file wherever it points', async () => {
    await symlink(path.join(outside, 'planted.txt'), path.join(root, 'dangling.txt'));
    expect(await call('write_file', { path: 'dangling.txt', content: 'x' })).toMatch(/symbolic link/);
    expect(existsSync(path.join(outside, 'planted.txt'))).toBe(false);
  });

  it('does not follow a symlink even when it stays inside the worktree', async () => {
    await symlink('src', path.join(root, 'alias'));
    expect(await call('read_file', { path: 'alias/a.ts' })).toMatch(/^error: refused alias\/a.ts: .*symbolic link/);
    expect(await call('read_file', { path: 'src/a.ts' })).toContain('export const a');
  });

  it('never writes outside while a folder on the path is swapped for a symlink to outside, again and again', async () => {
    const dir = path.join(root, 'lib');
    const swapping = { on: true };
    const swapper = (async () => {
      while (swapping.on) {
        // The tool makes the folder (and files in it) as the swapper goes: any step may fail, and the next tries again.
        const quietly = (p: Promise<unknown>) => p.catch(() => {});
        await quietly(rm(dir, { recursive: true, force: true }));
        await quietly(mkdir(dir));
        await quietly(rm(dir, { recursive: true, force: true }));
        await quietly(symlink(outside, dir));
        await new Promise((r) => setImmediate(r));
      }
    })();
    for (let i = 0; i < 200; i++) await call('write_file', { path: `lib/out-${i}.txt`, content: 'x' });
    swapping.on = false;
    await swapper;
    expect(readdirSync(outside)).toEqual(['secret.txt']);
  });

  it('refuses a FIFO at once, however many times it is asked, and keeps working', async () => {
    await execa('mkfifo', [path.join(root, 'pipe')]);
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map(() => call('read_file', { path: 'pipe' })));
    for (const r of results) expect(r).toMatch(/^error: refused pipe: it is not a regular file/);
    expect(await call('write_file', { path: 'pipe', content: 'x' })).toMatch(/not a regular file/);
    expect(await call('edit_file', { path: 'pipe', old: 'a', new: 'b' })).toMatch(/not a regular file/);
    expect(await call('search', { pattern: 'x', path: 'pipe' })).toMatch(/not a regular file/);
    expect(await call('search', { pattern: 'export const a' })).toBe('src/a.ts:1: export const a = 1;');
    expect(await call('read_file', { path: 'src/a.ts' })).toContain('export const a');
  });

  it('refuses a file with more than one hard link, which may be a file outside', async () => {
    await link(path.join(outside, 'secret.txt'), path.join(root, 'hard.txt'));
    expect(await call('read_file', { path: 'hard.txt' })).toMatch(/^error: refused hard.txt: it has 2 hard links/);
    expect(await call('write_file', { path: 'hard.txt', content: 'pwned' })).toMatch(/hard links/);
    expect(await call('search', { pattern: 'secret' })).toBe('no matches');
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret');
  });

  it('lets .git be read but never written', async () => {
    await mkdir(path.join(root, '.git'));
    await writeFile(path.join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    expect(await call('read_file', { path: '.git/HEAD' })).toContain('refs/heads/main');
    expect(await call('write_file', { path: '.git/HEAD', content: 'x' })).toMatch(/^error: refused .*git internals/);
    expect(await call('edit_file', { path: 'src/../.git/HEAD', old: 'main', new: 'x' })).toMatch(/git internals/);
    expect(await readFile(path.join(root, '.git', 'HEAD'), 'utf8')).toBe('ref: refs/heads/main\n');
  });
});

describe('roles and malformed calls', () => {
  it('refuse a write tool called by a reviewer, in a result the model can read', async () => {
    const result = await call('write_file', { path: 'x.txt', content: 'x' }, ctx({ role: 'reviewer' }));
    expect(result).toBe('error: write_file is not available to the reviewer: reviewers are read-only');
    expect(existsSync(path.join(root, 'x.txt'))).toBe(false);
    expect(await call('edit_file', { path: 'src/a.ts', old: 'a', new: 'b' }, ctx({ role: 'architect' }))).toContain(
      'architects are read-only',
    );
  });

  it('answer unknown tools, bad JSON and missing files with errors instead of throwing', async () => {
    expect(await call('rm_rf', {})).toMatch(/^error: there is no tool "rm_rf"; available: read_file/);
    expect(await runTool('read_file', '{"path": ', ctx())).toMatch(/^error: the arguments of read_file are not valid JSON/);
    expect(await call('read_file', { path: 'missing.txt' })).toBe('error: read_file failed: no such file or directory');
    expect(await call('read_file', {})).toMatch(/^error: a path is required/);
  });
});

describe('the run tool', () => {
  it('runs argv in the worktree and reports the exit code and output', async () => {
    const result = await call('run', { argv: ['node', '-e', 'console.log(process.cwd()); process.exit(3)'] });
    expect(result).toContain('exit code 3');
    expect(result).toContain(path.basename(root));
  });

  it('runs a shell command line with only the environment it is given', async () => {
    const result = await call(
      'run',
      { shell: 'echo "key=${SECRET_KEY:-unset} home=$HOME"' },
      ctx({ env: { PATH: process.env.PATH!, HOME: '/nowhere' } }),
    );
    expect(result).toContain('exit code 0');
    expect(result).toContain('key=unset home=/nowhere');
  });

  it('kills a command that overruns its timeout, with its children, and says so', async () => {
    const result = await call('run', { shell: 'sleep 30 >/dev/null 2>&1 & echo $! > child.pid; wait' }, ctx({ toolTimeoutMs: 500 }));
    expect(result).toContain('error: timed out after 500ms; the command and its children were killed');
    const childPid = Number(await readFile(path.join(root, 'child.pid'), 'utf8'));
    expect(childPid).toBeGreaterThan(0);
    expect(processStartTime(childPid)).toBeUndefined(); // gone, or a zombie awaiting its reaper
  });

  it('kills a command when the turn is aborted', async () => {
    const controller = new AbortController();
    const pending = call('run', { shell: 'sleep 30' }, ctx({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 100);
    expect(await pending).toContain('the turn ended; the command and its children were killed');
  });

  it('truncates long output, keeping head and tail, and says it did', async () => {
    const result = await call('run', { argv: ['node', '-e', "process.stdout.write('H' + 'x'.repeat(50000) + 'T')"] });
    expect(result.length).toBeLessThan(RUN_OUTPUT_LIMIT + 500);
    expect(result).toMatch(/\[output truncated: 30002 of 50002 characters cut from the middle; the limit is 20000\]/);
    expect(result).toContain('\nHxxx');
    expect(result.trimEnd().endsWith('xxT')).toBe(true);
  });

  it('reports the process it spawned and its exit, for recovery', async () => {
    const seen: string[] = [];
    await call(
      'run',
      { argv: ['true'] },
      ctx({ onSpawn: (i) => seen.push(`spawn ${i.pid > 0}`), onExit: (i) => seen.push(`exit ${i.code}`) }),
    );
    expect(seen).toEqual(['spawn true', 'exit 0']);
  });

  it('says so when the program does not exist', async () => {
    expect(await call('run', { argv: ['definitely-not-a-program-xyz'] })).toMatch(/could not start the command.*ENOENT/);
  });

  it('refuses a call with neither argv nor shell', async () => {
    expect(await call('run', {})).toMatch(/^error: give argv/);
  });
});
