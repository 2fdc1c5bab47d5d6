import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InputError } from '../core/errors.ts';
import { afterEach, describe, expect, it } from 'vitest';
import { blockFile, makeProject, runTron } from '../testing/project.ts';
import { answerCommand } from './answer.ts';
import { statusCommand } from './status.ts';
import { ManualClock } from '../os/clock.ts';
import type { TestRepo } from '../testing/repo.ts';
import { startCli } from '../testing/crash.ts';

let repo: TestRepo | undefined;
afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

describe('tron status', () => {
  it('refuses a folder that is not a git repository with TRON_NOT_A_REPO, as tron start does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-status-'));
    try {
      const error = await statusCommand({ repo: dir, json: false, clock: new ManualClock(), print: () => {} }).catch((err: unknown) => err);
      expect(error).toBeInstanceOf(InputError);
      expect((error as InputError).problems).toEqual([expect.objectContaining({ code: 'TRON_NOT_A_REPO', path: dir })]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says a --repo folder that does not exist does not exist, not that it is no git repository', async () => {
    const dir = join(tmpdir(), 'tron-status-nowhere', 'myapp');
    const error = await statusCommand({ repo: dir, json: false, clock: new ManualClock(), print: () => {} }).catch((err: unknown) => err);
    expect((error as InputError).problems).toEqual([
      expect.objectContaining({ code: 'TRON_NOT_A_REPO', path: dir, message: expect.stringMatching(/^does not exist; give --repo/) }),
    ]);
  });

  it('sends a repository without .tron/ to tron init, not to tron start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tron-status-'));
    try {
      execFileSync('git', ['init', '-q', dir]);
      const lines: string[] = [];
      expect(await statusCommand({ repo: dir, json: false, clock: new ManualClock(), print: (l) => lines.push(l) })).toBe(0);
      expect(lines).toEqual(['tron status: no run yet, and no .tron/ here: `tron init` sets this repository up, then `tron start`']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says there is no run yet before the first start', async () => {
    repo = await makeProject({ blocks: { a: {} } });
    const lines: string[] = [];
    expect(await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(), print: (l) => lines.push(l) })).toBe(0);
    expect(lines).toEqual(['tron status: no run yet; start one with `tron start`']);
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
    expect(lines.find((l) => l.startsWith('good'))).toMatch(/^good\s+landed\s+1\s+nothing\s+\S+\s+Block good$/);
    const stuck = lines.findIndex((l) => l.startsWith('stuck'));
    expect(lines[stuck]).toMatch(/^stuck\s+parked\s+1\s+operator\s+1m30s\s+Block stuck$/);
    expect(lines[stuck + 1]).toMatch(/^\s+why: blocked: no access$/);
    const json: string[] = [];
    await statusCommand({ repo: repo.dir, json: true, clock: new ManualClock(finishedAt), print: (l) => json.push(l) });
    const parsed = JSON.parse(json.join('\n'));
    expect(parsed.engine).toBe('finished');
    expect(parsed.blocks).toEqual([
      expect.objectContaining({ block: 'good', title: 'Block good', phase: 'landed', attempt: 1 }),
      expect.objectContaining({ block: 'stuck', phase: 'parked', attempt: 1, waiting: 'operator', reason: 'blocked: no access' }),
    ]);
    expect(parsed.blocks[1].ageMs).toBe(finishedAt - parkedAt);
    expect(parsed.blocks[1].enteredAt).toBe(parkedAt);
    expect(parsed.blocks[0].landedSha).toMatch(/^[0-9a-f]{40}$/);
    expect(parsed.blocks[0].attestedSha).toMatch(/^[0-9a-f]{40}$/);
    expect(parsed.blocks[0].baseSha).toMatch(/^[0-9a-f]{40}$/);
  });
});

/** Every key of a JSON value, at any depth. */
function keysOf(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(keysOf);
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [k, ...keysOf(v)]);
  return [];
}

describe('tron status across runs', () => {
  it('counts a parked block’s age from when it was parked, shows a waiting answer, and drops the reason once the block moves on', async () => {
    repo = await makeProject({
      blocks: { stuck: {} },
      sim: `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"no access"}'\n\n[[blocks.stuck.builder]]\nwrite = { "stuck.txt" = "ok\\n" }\ncommit = "stuck"\nreply = ">>DONE"\n\n[[blocks.extra.builder]]\nwrite = { "extra.txt" = "ok\\n" }\ncommit = "extra"\nreply = ">>DONE"\n`,
    });
    const first = await runTron(repo);
    expect(first.exit).toBe(3);
    const parkedAt = first.events.find((e) => e.type === 'block.parked')!.ts;
    const json = async (now: number) => {
      const out: string[] = [];
      await statusCommand({ repo: repo!.dir, json: true, clock: new ManualClock(now), print: (l) => out.push(l) });
      return JSON.parse(out.join('\n'));
    };

    // A second run (a new block arrived): the parked block is recovered, and its age still counts from run 1.
    await repo.write('.tron/blocks/extra.md', blockFile('extra', {}));
    const second = await runTron(repo);
    expect(second.exit).toBe(3);
    expect(second.events.find((e) => e.type === 'run.finished')).toMatchObject({ landed: ['extra'], parked: ['stuck'] });
    const recoveredAt = second.events.find((e) => e.type === 'block.recovered')!.ts;
    expect(recoveredAt).toBeGreaterThan(parkedAt);
    const parked = (await json(parkedAt + 90_000)).blocks.find((b: { block: string }) => b.block === 'stuck');
    expect(parked).toMatchObject({ phase: 'parked', ageMs: 90_000, enteredAt: parkedAt, reason: 'blocked: no access' });
    expect(parked.answer).toBeUndefined();

    // A malformed answer to a block that is not parked: both faults said at once, nothing written.
    const both = await answerCommand({ repo: repo.dir, block: 'extra', line: '>>FOO', clock: new ManualClock(4), print: () => {} }).catch(
      (err: unknown) => err,
    );
    expect((both as InputError).problems.map((p) => p.code)).toEqual(['TRON_ANSWER_INVALID', 'TRON_ANSWER_NOT_PARKED']);
    expect(existsSync(join(repo.dir, '.tron', 'inbox')) ? readdirSync(join(repo.dir, '.tron', 'inbox')) : []).toEqual([]);

    // The operator answers while no engine runs: status shows the answer waiting in the inbox.
    await answerCommand({
      repo: repo.dir,
      block: 'stuck',
      line: '>>RETRY {"guidance":"try again"}',
      clock: new ManualClock(5),
      print: () => {},
    });
    const waiting = (await json(parkedAt)).blocks.find((b: { block: string }) => b.block === 'stuck');
    expect(waiting.answer).toMatchObject({ word: 'RETRY', line: '>>RETRY {"guidance":"try again"}', writtenAt: 5 });
    expect(waiting.answer.file).toMatch(/^\.tron\/inbox\/.*\.json$/);
    const text: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(parkedAt), print: (l) => text.push(l) });
    expect(text.join('\n')).toMatch(/answered: >>RETRY \{"guidance":"try again"\} \(\.tron\/inbox\/.*; the next tron start reads it\)/);

    // The retry lands: no old reason, no answer, and every key in one style.
    const third = await runTron(repo);
    expect(third.exit).toBe(0);
    const done = await json(Date.now());
    const landed = done.blocks.find((b: { block: string }) => b.block === 'stuck');
    expect(landed).toMatchObject({ phase: 'landed', attempt: 2 });
    expect(landed.reason).toBeUndefined();
    expect(landed.answer).toBeUndefined();
    for (const key of keysOf(done)) expect(key).toMatch(/^[a-z][a-zA-Z]*$/);
    const lines: string[] = [];
    await statusCommand({ repo: repo.dir, json: false, clock: new ManualClock(Date.now()), print: (l) => lines.push(l) });
    expect(lines.join('\n')).not.toContain('why:');
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
