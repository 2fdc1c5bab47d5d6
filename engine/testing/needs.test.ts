import { afterEach, describe, expect, it, vi } from 'vitest';
import { needProgram, requireAll, skipWithout } from './needs.ts';

const GONE = needProgram('no-such-program-here', 'apt-get install -y no-such-program-here');
const NODE = needProgram('node', 'apt-get install -y nodejs');

describe('programs the tests need', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it('finds a program on PATH, or an explicit path, and says when one is not there', () => {
    expect(NODE.path).toMatch(/\/node$/);
    expect(GONE.path).toBeUndefined();
    expect(needProgram('Chromium', 'x', { at: '/nonexistent/chromium' }).path).toBeUndefined();
    expect(needProgram('Node', 'x', { at: NODE.path! }).path).toBe(NODE.path);
  });

  it('skips, printing one line with the program and its install command, where one is missing outside CI', () => {
    vi.stubEnv('CI', '');
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect(skipWithout('the test', NODE, GONE)).toBe(true);
    expect(warn.mock.calls).toEqual([
      ['skipped: the test — no-such-program-here is not installed here: apt-get install -y no-such-program-here'],
    ]);
    expect(skipWithout('the test', NODE)).toBe(false);
  });

  it('never skips under CI=true: the test runs and fails naming what is missing', () => {
    vi.stubEnv('CI', 'true');
    expect(skipWithout('the test', GONE)).toBe(false);
    expect(() => requireAll(NODE, GONE)).toThrow(
      'no-such-program-here is not installed here: apt-get install -y no-such-program-here (CI=true: nothing may skip)',
    );
    expect(() => requireAll(NODE)).not.toThrow();
  });
});
