import { describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';

const BIN = join(import.meta.dirname, '..', 'bin', 'tron.js');
const tron = (...args: string[]) => execa('node', [BIN, ...args], { reject: false, stdin: 'ignore' });

describe('the tron command line', () => {
  it('lists every command of the design in --help', async () => {
    const result = await tron('--help');
    expect(result.exitCode).toBe(0);
    for (const name of ['init', 'start', 'status', 'answer', 'docs', 'lint', 'sim', 'replay', 'report', 'demo']) {
      expect(result.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
    }
  });

  it('gives every command its own --help', async () => {
    const result = await tron('start', '--help');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('tron start [--repo DIR] [--watch]');
  });

  it('refuses an unknown command or option with exit 2 and no stack trace', async () => {
    const unknown = await tron('launch');
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain('TRON_USAGE: unknown command "launch"');
    const option = await tron('start', '--wach');
    expect(option.exitCode).toBe(2);
    expect(option.stderr).toContain('TRON_USAGE');
    expect(option.stderr).not.toMatch(/\n\s+at /);
  });

  it('says an unexpected failure in one coded line with exit 1, and shows the stack only with --debug', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'tron-cli-'));
    try {
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

  it('runs the demo to the end: every block landed, the lie caught, the report printed', async () => {
    const result = await tron('demo');
    expect(result.stderr).toBe('');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('shout: gate failed — commits');
    expect(result.stdout).toContain('3 landed, 0 parked, 0 abandoned');
    expect(result.stdout).toMatch(/Add farewell\(\)\n.*Add (shout|greet)\(\)/);
  });
});
