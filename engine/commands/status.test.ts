import { afterEach, describe, expect, it } from 'vitest';
import { makeProject, runTron } from '../testing/project.ts';
import { statusCommand } from './status.ts';
import { ManualClock } from '../core/clock.ts';
import type { TestRepo } from '../testing/repo.ts';
import { startCli } from '../testing/crash.ts';

let repo: TestRepo | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

describe('tron status', () => {
  it('says there is no run yet before the first start', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const lines: string[] = [];
    expect(await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(), print: (l) => lines.push(l) })).toBe(0);
    expect(lines).toEqual(['tron status: no run yet; start one with `npx tron start`']);
  });

  it('shows every block with its phase, attempt and age, folded from the latest run, also as JSON', async () => {
    repo = await makeProject({
      blocks: { good: {}, stuck: {} },
      sim: `[[blocks.good.builder]]\nwrite = { "good.txt" = "ok\\n" }\ncommit = "good"\nreply = ">>DONE"\n\n[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n`,
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const finishedAt = run.events.at(-1)!.ts;
    // A block's age counts from when it entered its phase: for stuck, its block.parked.
    const parkedAt = run.events.find((e) => e.type === 'block.parked' && e.block === 'stuck')!.ts;
    const lines: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(parkedAt + 90_000), print: (l) => lines.push(l) });
    expect(lines[0]).toContain('(finished)');
    expect(lines.find((l) => l.startsWith('good'))).toMatch(/^good\s+landed\s+1\s+nothing/);
    expect(lines.find((l) => l.startsWith('stuck'))).toMatch(/^stuck\s+parked\s+1\s+operator\s+1m30s\s+— blocked: no access/);
    const json: string[] = [];
    await statusCommand({ repo: repo.dir, json: true, clock: new ManualClock(finishedAt), print: (l) => json.push(l) });
    const parsed = JSON.parse(json.join('\n'));
    expect(parsed.finished).toBe(true);
    expect(parsed.blocks).toEqual([
      expect.objectContaining({ block: 'good', phase: 'landed', attempt: 1 }),
      expect.objectContaining({ block: 'stuck', phase: 'parked', attempt: 1, waiting: 'operator', reason: 'blocked: no access' }),
    ]);
  });
});

describe('tron status after a crash', () => {
  it('says the run was interrupted and that the next start recovers it', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const crashed = await startCli(repo, { TRON_CRASH_AFTER_EVENT: '6' });
    expect(crashed.signal).toBe('SIGKILL');
    const lines: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(), print: (l) => lines.push(l) });
    expect(lines[0]).toContain('(interrupted: the next tron start recovers it)');
  });
});
