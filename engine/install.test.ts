import { afterAll, describe, expect, it } from 'vitest';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
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

describe('bin/tron.js', () => {
  /** A stand-in checkout: the real bin, a CLI in engine/ and one in dist/ that each say which they are. */
  function fakeCheckout(): string {
    const root = mkdtempSync(join(work, 'checkout-'));
    mkdirSync(join(root, 'bin'));
    for (const f of ['tron.js', 'dist-fresh.js']) copyFileSync(tronPath('bin', f), join(root, 'bin', f));
    symlinkSync(tronPath('node_modules'), join(root, 'node_modules'));
    writeFileSync(join(root, 'package.json'), '{ "type": "module" }\n');
    mkdirSync(join(root, 'engine'));
    mkdirSync(join(root, 'evaluation'));
    mkdirSync(join(root, 'dist', 'engine'), { recursive: true });
    const cli = (said: string) => `export async function main(argv) { console.log('${said}', argv.join(' ')); return 0; }\n`;
    writeFileSync(join(root, 'engine', 'cli.ts'), cli('sources'));
    writeFileSync(join(root, 'dist', 'engine', 'cli.js'), cli('dist'));
    writeFileSync(join(root, 'dist', 'BUILT'), 'now\n');
    return root;
  }
  // Through tsx, with no compile cache: tsx keeps one in the temporary folder (tsx-<uid>) after the test.
  const run = async (root: string) =>
    (await execa('node', [join(root, 'bin', 'tron.js'), 'x'], { stdin: 'ignore', env: { TSX_DISABLE_CACHE: '1' } })).stdout;
  const age = (file: string, seconds: number) => utimesSync(file, Date.now() / 1000 - seconds, Date.now() / 1000 - seconds);

  it('runs dist/ while its build stamp is newer than every source, and the sources through tsx once one is newer', async () => {
    const root = fakeCheckout();
    age(join(root, 'engine', 'cli.ts'), 60);
    expect(await run(root)).toBe('dist x');
    // An edit after the build: the sources run, never the stale dist/.
    writeFileSync(join(root, 'evaluation', 'harness.ts'), 'export {};\n');
    expect(await run(root)).toBe('sources x');
    // A test file is not a source of dist/.
    age(join(root, 'evaluation', 'harness.ts'), 60);
    writeFileSync(join(root, 'engine', 'cli.test.ts'), 'export {};\n');
    expect(await run(root)).toBe('dist x');
    // No stamp (a build that failed or never ran): the sources.
    rmSync(join(root, 'dist', 'BUILT'));
    expect(await run(root)).toBe('sources x');
  });

  it('runs dist/ without looking further in an installed package, which has no sources', async () => {
    const root = fakeCheckout();
    rmSync(join(root, 'engine'), { recursive: true });
    rmSync(join(root, 'dist', 'BUILT'));
    expect(await run(root)).toBe('dist x');
  });
});
