import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OutputCap } from './output-cap.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function spillFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-cap-'));
  dirs.push(dir);
  return join(dir, 'replies', 'a.1.builder-turn1.overflow');
}

describe('OutputCap', () => {
  it('keeps output under the limit whole and writes no spill file', () => {
    const file = spillFile();
    const cap = new OutputCap(10, file);
    cap.push(Buffer.from('hello '));
    cap.push(Buffer.from('you'));
    cap.close();
    expect(cap.overflowed).toBe(false);
    expect(cap.text()).toBe('hello you');
    expect(() => statSync(file)).toThrow();
  });

  it('keeps the first limit bytes, spills the rest up to its own cap, and counts what it dropped', () => {
    const file = spillFile();
    const cap = new OutputCap(4, file, 6);
    cap.push(Buffer.from('abcdefgh'));
    cap.push(Buffer.from('ijklmnop'));
    cap.close();
    expect(cap.overflowed).toBe(true);
    expect(cap.total).toBe(16);
    expect(cap.text()).toBe('abcd');
    expect(readFileSync(file, 'utf8')).toBe('efghij');
    expect(cap.describe()).toMatch(
      /the reply was 16 bytes, more than the 4 kept .*the 6 bytes after it are in .*, and 6 more were dropped/,
    );
  });
});
