import { afterEach, describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayRunDir } from '../engine/commands/replay.ts';
import { goldenRunDirs, goldenTemplate, RUNS_DIR } from './golden.ts';
import { templateNames } from './template.ts';

const scratch: string[] = [];
afterEach(() => {
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

const golden = goldenRunDirs();

describe('golden runs', () => {
  it('keeps a recorded run of every template under runs/', () => {
    const recorded = new Set(golden.map((d) => goldenTemplate(d)));
    expect(templateNames().filter((n) => !recorded.has(n))).toEqual([]);
  });

  for (const dir of golden) {
    const name = dir.slice(RUNS_DIR.length);
    it(`replays ${name} to the identical decisions`, () => {
      const outcome = replayRunDir(dir);
      expect(outcome.result).toMatchObject({ ok: true });
      // Only a run cut short by a crash hook may stop before its last input.
      const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { sim: { crash_after_event?: number } };
      expect(outcome.truncated).toBe(manifest.sim.crash_after_event !== undefined);
    });
  }

  it('reports the first divergence, at the right seq, when one recorded reply is altered', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-golden-'));
    scratch.push(dir);
    cpSync(join(RUNS_DIR, 'done-no-commits'), dir, { recursive: true });
    const lines = readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n');
    // The builder's second DONE (after the gate caught the first) becomes BLOCKED.
    const dones = lines
      .map((l, i) => [l, i] as const)
      .filter(([l]) => l.includes('"type":"reply.received"') && l.includes('"reply":">>DONE"'));
    const [line, at] = dones[0]!;
    const event = JSON.parse(line) as { seq: number; reply: string };
    event.reply = '>>BLOCKED {"reason":"tampered"}';
    lines[at] = JSON.stringify(event);
    writeFileSync(join(dir, 'events.jsonl'), lines.join('\n'));

    const outcome = replayRunDir(dir);
    expect(outcome.result.ok).toBe(false);
    if (outcome.result.ok) return;
    const d = outcome.result.divergence;
    expect(d.input.seq).toBe(event.seq);
    expect(d.seq).toBe(event.seq + 1);
    expect(d.recorded).toMatchObject({ type: 'reply.accepted', word: 'DONE' });
    expect(d.derived).toMatchObject({ type: 'reply.accepted', word: 'BLOCKED' });
  });
});
