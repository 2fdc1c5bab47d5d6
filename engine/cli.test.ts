import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { COMMANDS } from './cli.ts';
import { tronPath } from './root.ts';
import { makeProject } from './testing/project.ts';

const BIN = tronPath('bin', 'tron.js');
const tron = (...args: string[]) => execa('node', [BIN, ...args], { reject: false, stdin: 'ignore' });
const VERSION = (JSON.parse(readFileSync(tronPath('package.json'), 'utf8')) as { version: string }).version;

/** A refusal: exit 2, one coded line on stderr, nothing on stdout, no stack trace. */
function expectUsageRefusal(result: { exitCode?: number; stdout: string; stderr: string }): string {
  expect(result.exitCode).toBe(2);
  expect(result.stdout).toBe('');
  const lines = result.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^TRON_USAGE: /);
  expect(result.stderr).not.toMatch(/\n\s+at /);
  return lines[0]!;
}

describe('the tron command line', () => {
  it('prints its package version for --version and -v', async () => {
    for (const flag of ['--version', '-v']) {
      const result = await tron(flag);
      expect(result.exitCode).toBe(0);
      expect(result.stdout).toBe(VERSION);
    }
  });

  it("lists the user's commands, then the contributor's commands apart, in --help", async () => {
    const result = await tron('--help');
    expect(result.exitCode).toBe(0);
    const [users, contributors] = result.stdout.split('For work on tron itself');
    for (const name of ['init', 'start', 'status', 'answer', 'report', 'replay', 'clean', 'demo', 'completion', 'help'])
      expect(users).toMatch(new RegExp(`^  ${name} `, 'm'));
    for (const name of ['docs', 'lint', 'sim']) {
      expect(contributors).toMatch(new RegExp(`^  ${name} `, 'm'));
      expect(users).not.toMatch(new RegExp(`^  ${name} `, 'm'));
    }
    expect(result.stdout).toContain('-v, --version');
    expect((await tron()).stdout).toBe(result.stdout);
  });

  it('prints a command’s own usage, arguments and options for `tron help COMMAND` and `COMMAND --help`', async () => {
    const viaHelp = await tron('help', 'report');
    const viaFlag = await tron('report', '--help');
    expect(viaHelp.exitCode).toBe(0);
    expect(viaFlag.stdout).toBe(viaHelp.stdout);
    expect(viaHelp.stdout).toMatch(/^Usage: tron report \[RUN\] \[--repo DIR\] \[--json\] \[--database URL\]$/m);
    expect(viaHelp.stdout).toMatch(/^ {2}RUN +a run directory, or a run id/m);
    expect(viaHelp.stdout).toMatch(/^ {2}--repo DIR +the target repository/m);
    expect(viaHelp.stdout).not.toContain('Commands:');
    expect((await tron('start', '-h')).stdout).toContain('Usage: tron start [--repo DIR] [--watch]');
  });

  it('suggests the command meant for a mistyped one, and refuses it with exit 2', async () => {
    expect(expectUsageRefusal(await tron('strat'))).toContain('unknown command "strat"; did you mean start?');
    expect(expectUsageRefusal(await tron('help', 'staus'))).toContain('did you mean status?');
    expect(expectUsageRefusal(await tron('launch'))).not.toContain('did you mean');
  });

  it('suggests the flag meant for a mistyped one, in its own words, not Node’s parser message', async () => {
    const line = expectUsageRefusal(await tron('start', '--wacth'));
    expect(line).toBe(
      'TRON_USAGE: tron start: unknown option --wacth; did you mean --watch? (usage: tron start [--repo DIR] [--watch] [--plain] [--standby])',
    );
    expect(line).not.toContain('as in');
    expect(expectUsageRefusal(await tron('--verison'))).toContain('did you mean --version?');
  });

  it('refuses surplus arguments, missing ones and options without their value, each in one line', async () => {
    expect(expectUsageRefusal(await tron('demo', 'extra'))).toContain('takes no arguments; surplus: "extra"');
    expect(expectUsageRefusal(await tron('status', 'now'))).toContain('surplus: "now"');
    expect(expectUsageRefusal(await tron('answer', 'login'))).toContain('missing ANSWER');
    expect(expectUsageRefusal(await tron('status', '--repo'))).toContain('--repo needs a value: --repo DIR');
    expect(expectUsageRefusal(await tron('completion', 'fish'))).toContain('SHELL fish: not one of bash, zsh');
    expect(expectUsageRefusal(await tron('clean', '--keep', 'many'))).toContain('--keep');
  });

  it('refuses a --database or TRON_DATABASE_URL that is no PostgreSQL URL, without repeating it (it may hold a password)', async () => {
    const refused = expectUsageRefusal(await tron('status', '--database', 'tron:s3cret@db.example/tron'));
    expect(refused).toContain('--database must be a PostgreSQL URL, e.g. "postgres://tron@db.example:5432/tron"');
    expect(refused).not.toContain('s3cret');
    expect(expectUsageRefusal(await tron('agent', '--database', 'db.example'))).toContain('--database must be a PostgreSQL URL');
    const project = await makeProject({ blocks: {} });
    try {
      const env = await execa('node', [BIN, 'status', '--repo', project.dir], {
        reject: false,
        stdin: 'ignore',
        env: { TRON_DATABASE_URL: 'tron:s3cret@db.example' },
      });
      expect(env.exitCode).toBe(2);
      expect(env.stderr).toMatch(/TRON_USAGE[^\n]*TRON_DATABASE_URL[^\n]*must be a PostgreSQL URL/);
      expect(env.stderr).not.toContain('s3cret');
      expect(env.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await project.cleanup();
    }
  });

  it('says a --repo folder that does not exist does not exist, for every command that takes --repo: exit 2, the path named', async () => {
    const missing = join(tmpdir(), 'tron-cli-nowhere', 'myapp');
    const takingRepo = Object.entries(COMMANDS).filter(([, c]) => 'repo' in c.options);
    expect(takingRepo.map(([name]) => name)).toEqual(expect.arrayContaining(['start', 'status', 'answer', 'clean', 'logs', 'serve']));
    const results = await Promise.all(
      takingRepo.map(async ([name, c]) => {
        const args = c.args.filter((a) => !a.optional).map((a) => (a.name === 'ANSWER' ? '>>RETRY {"guidance":"x"}' : 'x'));
        return [name, await tron(name, ...args, '--repo', missing)] as const;
      }),
    );
    for (const [name, result] of results) {
      expect(result.exitCode, name).toBe(2);
      expect(result.stdout, name).toBe('');
      expect(result.stderr.trim(), name).toBe(
        `TRON_NOT_A_REPO: ${missing}: does not exist; give --repo the folder of the repository whose blocks tron should land (or run tron inside it)`,
      );
    }
  });

  it('sends a repository without .tron/ to tron init, not to tron start, from every command that reads its runs', async () => {
    const bare = mkdtempSync(join(tmpdir(), 'tron-cli-bare-'));
    const project = await makeProject({ blocks: {} });
    try {
      await execa('git', ['init', '-q', bare], { stdin: 'ignore' });
      const readers = ['logs', 'report', 'replay', 'view'];
      for (const name of readers) {
        const result = await tron(name, '--repo', bare);
        expect(result.exitCode, name).toBe(2);
        expect(result.stderr, name).toContain('no run yet, and no .tron/ here: `tron init` sets this repository up, then `tron start`');
        expect(result.stderr, name).not.toMatch(/\n\s+at /);
      }
      // Set up, with no run yet: a start is what it needs.
      for (const name of readers) {
        const result = await tron(name, '--repo', project.dir);
        expect(result.exitCode, name).toBe(2);
        expect(result.stderr, name).toContain('no run yet; start one with `tron start`');
        expect(result.stderr, name).not.toContain('tron init');
      }
    } finally {
      rmSync(bare, { recursive: true, force: true });
      await project.cleanup();
    }
  });

  it('gives every command of the table a help that exits 0', async () => {
    for (const name of Object.keys(COMMANDS)) {
      const result = await tron(name, '--help');
      expect(result.exitCode, name).toBe(0);
      expect(result.stdout, name).toMatch(new RegExp(`^Usage: tron ${name}`));
    }
  });

  it('says an unexpected failure in one coded line with exit 1, and shows the stack only with --debug', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'tron-cli-'));
    try {
      await execa('git', ['init', '-q', repo], { stdin: 'ignore' });
      // A run whose log is a folder: reading it fails in a way no check foresaw.
      mkdirSync(join(repo, '.tron', 'runs', '20260101-000000-001', 'events.jsonl'), { recursive: true });
      const plain = await tron('status', '--repo', repo);
      expect(plain.exitCode).toBe(1);
      expect(plain.stderr.trim().split('\n')).toHaveLength(1);
      expect(plain.stderr).toMatch(/^tron status: TRON_ENGINE_FAILED: tron status failed: EISDIR/);
      const debug = await tron('status', '--repo', repo, '--debug');
      expect(debug.exitCode).toBe(1);
      expect(debug.stderr).toMatch(/\n\s+at /);
    } finally {
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('lints the real spine clean', async () => {
    const result = await tron('lint');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('clean');
  });
});
