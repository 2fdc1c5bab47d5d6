/**
 * Runtime input that once crashed or hung the engine (attack 6), played end to end: a
 * reply without end, a run directory removed under a running engine, an effect that
 * fails. Each ends in a coded line and an exit status — never a stack trace, never a
 * process left hanging, never memory in proportion to what a worker printed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configFile, makeProject, ofType, runTron } from '../testing/project.ts';
import { allRuns, startCli } from '../testing/crash.ts';
import type { TestRepo } from '../testing/repo.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A repository whose builder is the shell script `builder` and whose reviewer approves. */
async function withBuilder(builder: string, extra = ''): Promise<TestRepo> {
  const dir = mkdtempSync(join(tmpdir(), 'tron-workers-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'builder.sh'), `#!/bin/sh\ncat > /dev/null\n${builder}\n`);
  writeFileSync(join(dir, 'reviewer.sh'), '#!/bin/sh\ncat > /dev/null\necho ">>APPROVE"\n');
  chmodSync(join(dir, 'builder.sh'), 0o755);
  chmodSync(join(dir, 'reviewer.sh'), 0o755);
  const workers = `[workers.builder]\nadapter = "command"\ncommand = ["${dir}/builder.sh"]\n\n[workers.reviewer]\nadapter = "command"\ncommand = ["${dir}/reviewer.sh"]\n`;
  const repo = await makeProject({ blocks: { a: {} }, config: `${configFile({ workers })}\n[sandbox]\nmode = "off"\n${extra}` });
  cleanups.push(() => repo.cleanup());
  return repo;
}

const noStackTrace = (text: string) => expect(text).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);

describe('a reply without end', () => {
  it('keeps only [limits] reply of it: the turn fails as reply_too_large, the rest spills to a capped file, nothing big is logged', async () => {
    const repo = await withBuilder(`head -c 6000000 /dev/zero | tr '\\0' x; echo; echo '>>DONE'`, '[limits]\nreply = "1MB"\n');
    const run = await runTron(repo);
    expect(run.exit).toBe(3);
    const failed = ofType(run.events, 'reply.received').filter((e) => !e.ok);
    expect(failed.length).toBeGreaterThan(0);
    expect(failed[0]).toMatchObject({ failure: 'reply_too_large', detail: expect.stringContaining('more than the 1048576 kept') });
    expect(statSync(join(run.runDir, 'events.jsonl')).size).toBeLessThan(200_000);
    const spills = readdirSync(join(run.runDir, 'replies'));
    expect(spills.length).toBeGreaterThan(0);
    expect(statSync(join(run.runDir, 'replies', spills[0]!)).size).toBeGreaterThan(4_000_000);
  });
});

describe('the run directory removed while the engine runs', () => {
  it('stops with exit 1 and a coded line, no stack trace, and the next start recovers', async () => {
    const repo = await withBuilder(
      `if [ ! -e "$TRON_RUN_DIR/../removed-once" ]; then touch "$TRON_RUN_DIR/../removed-once"; rm -rf "$TRON_RUN_DIR"; fi
echo a > a.txt; git add -A; git commit -qm a; echo '>>DONE'`,
    );
    const first = await startCli(repo);
    expect(first.exitCode).toBe(1);
    expect(`${first.stdout}\n${first.stderr}`.match(/TRON_RUN_DIR_GONE/g)).toHaveLength(1);
    noStackTrace(`${first.stdout}\n${first.stderr}`);
    const next = await startCli(repo);
    expect([0, 3]).toContain(next.exitCode);
    noStackTrace(`${next.stdout}\n${next.stderr}`);
  });
});

describe('an effect that fails mid-run', () => {
  it('ends tron start with exit 1, one coded line and run.failed in the log, without a stack trace', async () => {
    // The engine cannot write its transcript: the builder put a folder where the file was.
    const repo = await withBuilder(`rm -f "$TRON_RUN_DIR/transcript.md"; mkdir "$TRON_RUN_DIR/transcript.md"; echo '>>DONE'`);
    const run = await startCli(repo);
    expect(run.exitCode).toBe(1);
    const out = `${run.stdout}\n${run.stderr}`;
    expect(out).toMatch(/tron: TRON_ENGINE_FAILED: the effect of block\.dispatched for a failed: EISDIR/);
    noStackTrace(out);
    const events = allRuns(repo)[0]!;
    expect(ofType(events, 'run.failed')).toMatchObject([{ detail: expect.stringMatching(/^TRON_ENGINE_FAILED: /) }]);
    expect(ofType(events, 'run.finished')).toMatchObject([{ reason: 'error', exit: 1 }]);
    expect(existsSync(join(repo.dir, '.tron', 'engine.lock'))).toBe(false);
  });
});
