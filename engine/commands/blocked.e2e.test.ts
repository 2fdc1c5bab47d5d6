/**
 * A block whose dependency did not land is blocked, not parked: `tron start`, `tron
 * status`, the report and `tron answer` say so, name the dependency, and offer it no
 * answer. Two cases: the dependency parked for the operator, and the dependency abandoned.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { makeProject, ofType, runTron } from '../testing/project.ts';
import type { TestRepo } from '../testing/repo.ts';
import { answerCommand } from './answer.ts';
import { statusCommand } from './status.ts';
import { startCommand } from './start.ts';
import { systemClock } from '../os/clock.ts';
import { GIT_IDENTITY_ENV } from '../testing/repo.ts';

const repos: TestRepo[] = [];
afterEach(async () => {
  for (const r of repos.splice(0)) await r.cleanup();
});

async function status(repo: TestRepo, json = false): Promise<string[]> {
  const lines: string[] = [];
  expect(await statusCommand({ repo: repo.dir, json, clock: new ManualClock(Date.now()), print: (l) => lines.push(l) })).toBe(0);
  return lines;
}

describe('a block waiting on a dependency that did not land', () => {
  it('is shown as blocked by its parked dependency by start, status, the report and answer, and offered no answer', async () => {
    // subtract's builder commits nothing: the gate fails until its budget is spent, and it is parked for the operator.
    const repo = await makeProject({ blocks: { subtract: {}, multiply: { depends_on: ['subtract'] } } });
    repos.push(repo);
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const finished = ofType(run.events, 'run.finished')[0]!;
    expect(finished).toMatchObject({ parked: ['subtract'], blocked: [{ block: 'multiply', by: 'subtract' }], abandoned: [] });

    const out = run.output.join('\n');
    expect(out).toContain('tron: multiply is blocked: it waits on subtract, which is parked for the operator; it runs once that lands');
    expect(out).toMatch(/1 parked, 1 blocked, 0 abandoned/);
    expect(out).not.toContain('multiply is parked');
    expect(out).not.toMatch(/tron answer .* multiply /);
    expect(out).toMatch(/tron answer .* subtract /);

    const lines = await status(repo);
    const row = lines.findIndex((l) => l.startsWith('multiply'));
    expect(lines[row]).toMatch(/^multiply\s+blocked\s+0\s+dependency\s/);
    expect(lines[row + 1]).toMatch(/^\s+why: blocked: waits on subtract, which is parked for the operator; it runs once that lands$/);
    const json = JSON.parse((await status(repo, true)).join('\n')) as { blocks: { block: string; waiting: string; blockedBy?: string }[] };
    expect(json.blocks.find((b) => b.block === 'multiply')).toMatchObject({ waiting: 'dependency', blockedBy: 'subtract' });
    expect(json.blocks.find((b) => b.block === 'subtract')!.blockedBy).toBeUndefined();

    const report = readFileSync(join(run.runDir, 'report.md'), 'utf8');
    expect(report).toMatch(/0 landed, 1 parked, 1 blocked \(waiting on a dependency that did not land\), 0 abandoned/);
    expect(report).toMatch(/^\| multiply \| blocked by subtract \|/m);
    expect(report).toMatch(/^\| subtract \| parked \|/m);

    const refused = await answerCommand({
      repo: repo.dir,
      block: 'multiply',
      line: '>>RETRY {"guidance":"go"}',
      clock: new ManualClock(Date.now()),
      print: () => {},
    }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(InputError);
    expect((refused as InputError).problems[0]).toMatchObject({
      code: 'TRON_ANSWER_NOT_PARKED',
      message:
        'multiply is blocked: it waits on subtract, which is parked for the operator; it runs once that lands; answer subtract instead (see tron status)',
    });
  });

  it('is shown as blocked by its abandoned dependency, keeps its reason, and is offered no answer', async () => {
    const repo = await makeProject({
      blocks: { core: {}, app: { depends_on: ['core'] } },
      sim: `[[blocks.core.builder]]\nreply = '>>BLOCKED {"reason":"cannot build here"}'\n`,
    });
    repos.push(repo);
    // No architect: the BLOCKED builder goes to the operator; the operator abandons core.
    const first = await runTron(repo);
    expect(first.exit).toBe(3);
    await answerCommand({
      repo: repo.dir,
      block: 'core',
      line: '>>ABANDON {"reason":"out of scope"}',
      clock: new ManualClock(Date.now()),
      print: () => {},
    });
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    expect(ofType(run.events, 'block.parked').find((e) => e.block === 'app')!.reason).toMatch(
      /^it depends on core, which was abandoned: out of scope/,
    );
    expect(ofType(run.events, 'run.finished')[0]).toMatchObject({
      parked: [],
      abandoned: ['core'],
      blocked: [{ block: 'app', by: 'core' }],
    });
    const out = run.output.join('\n');
    expect(out).toMatch(/app: blocked — it depends on core, which was abandoned: out of scope/);
    expect(out).toContain(
      'tron: app is blocked: it waits on core, which was abandoned; it cannot run unless that dependency is removed from its depends_on',
    );
    expect(out).not.toMatch(/tron answer .* app /);

    const lines = await status(repo);
    const row = lines.findIndex((l) => l.startsWith('app'));
    expect(lines[row]).toMatch(/^app\s+blocked\s/);
    expect(lines[row + 1]).toMatch(/why: blocked: waits on core, which was abandoned/);

    // Started again with nothing to do: it says so, and still offers app no answer.
    const output: string[] = [];
    const exit = await startCommand({
      repo: repo.dir,
      clock: systemClock,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV },
      print: (l) => output.push(l),
    });
    expect(exit).toBe(3);
    const again = output.join('\n');
    expect(again).toMatch(/^tron: nothing to do — 0 landed, 0 parked, 1 blocked, 1 abandoned; no new run/m);
    expect(again).toContain('tron: app is blocked: it waits on core, which was abandoned');
    expect(again).not.toContain('answer:');
  });
});
