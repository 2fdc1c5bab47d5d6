import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TurnLog, turnLogPath } from './turn-log.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function runDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tron-turnlog-'));
  dirs.push(d);
  return d;
}

describe('TurnLog', () => {
  it("keeps a turn's output in arrival order under turns/<block>/, each note on a line of its own", () => {
    const dir = runDir();
    const log = TurnLog.open(dir, { block: 'w', session: 'w.1.builder', turn: 2 });
    log.output(Buffer.from('compiling'));
    log.note('step 1: run npm test');
    log.output(Buffer.from('ok\n'));
    log.close();
    expect(log.path).toBe(join(dir, 'turns', 'w', 'w.1.builder-turn2.log'));
    expect(readFileSync(turnLogPath(dir, 'w', 'w.1.builder', 2), 'utf8')).toBe('compiling\n» step 1: run npm test\nok\n');
    expect(log.sawOutput).toBe(true);
  });

  it('stops at its cap with one [truncated] line, and drops the rest', () => {
    const dir = runDir();
    const log = TurnLog.open(dir, { block: 'w', session: 's', turn: 1 }, 10);
    log.output(Buffer.from('0123456'));
    log.output(Buffer.from('789abcdef'));
    log.output(Buffer.from('more and more'));
    log.note('a note after the cap');
    log.close();
    expect(readFileSync(log.path, 'utf8')).toBe("0123456789\n[truncated: this turn's output passed 10 bytes; the rest is not kept]\n");
  });
});
