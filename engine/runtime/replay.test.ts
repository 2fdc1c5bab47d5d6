import { afterEach, describe, expect, it } from 'vitest';
import { makeProject, runTron } from '../testing/project.ts';
import { replay } from '../core/replay.ts';
import { loadSpine } from '../spine/load.ts';
import type { TestRepo } from '../testing/repo.ts';
import type { TronEvent } from '../core/events.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

describe('replay', () => {
  it('re-derives every decision of a recorded run, and reports the first divergence of a tampered one', async () => {
    const repo = await makeProject({
      blocks: { one: {}, two: { depends_on: ['one'] } },
      sim: `[[blocks.one.builder]]\nreply = ">>DONE"\n\n[[blocks.one.builder]]\nwrite = { "one.txt" = "1\\n" }\ncommit = "one"\nreply = ">>DONE"\n\n[[blocks.two.builder]]\nwrite = { "two.txt" = "2\\n" }\ncommit = "two"\n`,
    });
    repos.push(repo);
    const run = await runTron(repo);
    expect(run.exit).toBe(0);
    const ctx = { spine: loadSpine(), testCommand: 'node test.js' };
    const ok = replay(run.events, ctx);
    expect(ok).toMatchObject({ ok: true });

    // The first DONE of block one becomes a BLOCKED: from there the step decides otherwise.
    const tampered: TronEvent[] = structuredClone(run.events);
    const reply = tampered.find((e) => e.type === 'reply.received' && e.block === 'one' && e.reply === '>>DONE')!;
    (reply as { reply: string }).reply = '>>BLOCKED {"reason":"tampered"}';
    const result = replay(tampered, ctx);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.divergence.input.seq).toBe(reply.seq);
    expect(result.divergence.seq).toBe(reply.seq + 1);
    expect(result.divergence.recorded).toMatchObject({ type: 'reply.accepted', word: 'DONE' });
    expect(result.divergence.derived).toMatchObject({ type: 'reply.accepted', word: 'BLOCKED' });
  });
});
