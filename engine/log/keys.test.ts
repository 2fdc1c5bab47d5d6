import { chmodSync, mkdtempSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { keyOfRunDir, keyPath, repoKey, sign, stateHome } from './keys.ts';
import { InputError } from '../core/errors.ts';

const dirs: string[] = [];
afterEach(() => {
  vi.unstubAllEnvs();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), 'tron-keys-'));
  dirs.push(d);
  return d;
};

describe('the repository key', () => {
  it('lives under XDG_STATE_HOME, else ~/.local/state, outside the repository', () => {
    expect(stateHome({ XDG_STATE_HOME: '/s', HOME: '/h' })).toBe('/s/tron');
    expect(stateHome({ XDG_STATE_HOME: 'relative', HOME: '/h' })).toBe('/h/.local/state/tron');
    expect(stateHome({ HOME: '/h' })).toBe('/h/.local/state/tron');
  });

  it('is made once, private to its owner, and the same for every later call', () => {
    const repo = scratch();
    expect(repoKey(repo)).toBeUndefined();
    const made = repoKey(repo, { create: true });
    expect(made.created).toBe(true);
    expect(made.key).toHaveLength(32);
    expect(statSync(keyPath(repo)).mode & 0o777).toBe(0o600);
    expect(statSync(join(keyPath(repo), '..')).mode & 0o777).toBe(0o700);
    const again = repoKey(repo, { create: true });
    expect(again).toEqual({ key: made.key, created: false });
    expect(repoKey(scratch(), { create: true }).key.equals(made.key)).toBe(false);
  });

  it('is found from a run directory of the repository, and from nothing else', () => {
    const repo = scratch();
    const { key } = repoKey(repo, { create: true });
    expect(keyOfRunDir(join(repo, '.tron', 'runs', '20260101-000000-001'))?.equals(key)).toBe(true);
    expect(keyOfRunDir(join(repo, 'runs', 'x'))).toBeUndefined();
  });

  it('says what to do when its folder cannot be written', () => {
    const home = scratch();
    mkdirSync(join(home, 'ro'));
    writeFileSync(join(home, 'ro', 'tron'), 'a file where the folder should be');
    chmodSync(join(home, 'ro'), 0o500);
    vi.stubEnv('XDG_STATE_HOME', join(home, 'ro'));
    let err: unknown;
    try {
      repoKey(scratch(), { create: true });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).problems[0]).toMatchObject({ code: 'TRON_STATE_UNWRITABLE' });
  });

  it('signs with HMAC-SHA256: the same parts give the same 32 hex digits, any change another', () => {
    const key = Buffer.alloc(32, 1);
    expect(sign(key, 'a', 'b')).toMatch(/^[0-9a-f]{32}$/);
    expect(sign(key, 'a', 'b')).toBe(sign(key, 'a', 'b'));
    expect(sign(key, 'a', 'b')).not.toBe(sign(key, 'ab', ''));
    expect(sign(Buffer.alloc(32, 2), 'a', 'b')).not.toBe(sign(key, 'a', 'b'));
  });
});
