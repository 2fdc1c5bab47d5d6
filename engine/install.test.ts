import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { distIsFresh } from '../bin/dist-fresh.js';
import { TRON_ROOT, tronPath } from './root.ts';

const VERSION = (JSON.parse(readFileSync(tronPath('package.json'), 'utf8')) as { version: string }).version;
const work = mkdtempSync(join(tmpdir(), 'tron-install-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('tron as an installed tool', () => {
  it('packs, installs from the tarball into a fresh prefix, and runs from another folder: --version, help, lint, the demo', async () => {
    // The tarball carries dist/ as it is: build it first if a source is newer (bin/build.js swaps it in whole).
    if (!distIsFresh(TRON_ROOT)) await execa('node', [tronPath('bin', 'build.js')], { cwd: TRON_ROOT, stdin: 'ignore' });
    const packed = await execa('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
      cwd: TRON_ROOT,
      stdin: 'ignore',
    });
    const [manifest] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    const paths = manifest.files.map((f) => f.path);
    expect(paths).toContain('dist/engine/cli.js');
    expect(paths).toContain('engine/workflow.toml');
    expect(paths).toContain('prompts/build.md');
    expect(paths.filter((p) => p.endsWith('.ts') && !p.endsWith('.d.ts'))).toEqual([]);

    const prefix = join(work, 'prefix');
    await execa(
      'npm',
      ['install', '--global', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', join(work, manifest.filename)],
      { stdin: 'ignore', timeout: 280_000 },
    );
    const installed = join(prefix, 'lib', 'node_modules', 'tron-engine');
    expect(existsSync(join(installed, 'engine', 'cli.ts'))).toBe(false);
    expect(existsSync(join(installed, 'node_modules', 'tsx'))).toBe(false);

    // Anywhere but the checkout, with only the installed bin on PATH.
    const elsewhere = join(work, 'elsewhere');
    mkdirSync(elsewhere);
    const env = { PATH: `${join(prefix, 'bin')}:${process.env.PATH}`, TMPDIR: elsewhere, HOME: process.env.HOME ?? elsewhere };
    const tron = (...args: string[]) => execa('tron', args, { cwd: elsewhere, env, extendEnv: false, reject: false, stdin: 'ignore' });

    const version = await tron('--version');
    expect(version.exitCode).toBe(0);
    expect(version.stdout).toBe(VERSION);
    expect((await tron('help', 'clean')).stdout).toContain('Usage: tron clean [--repo DIR] [--dry-run] [--all] [--keep N]');
    expect((await tron('lint')).stdout).toContain('clean');

    const demo = await tron('demo');
    expect(demo.stderr).toBe('');
    expect(demo.exitCode).toBe(0);
    expect(demo.stdout).toContain('3 landed, 0 parked, 0 abandoned');
    expect(readdirSync(elsewhere).filter((n) => n.startsWith('tron-demo-'))).toEqual([]);
  }, 300_000);
});
