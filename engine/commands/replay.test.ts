import { afterEach, describe, expect, it } from 'vitest';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { replayCommand, replayable } from './replay.ts';
import { InputError } from '../core/errors.ts';
import { readLog } from '../log/eventlog.ts';
import { makeProject, runTron } from '../testing/project.ts';

const GOLDEN = join(import.meta.dirname, '..', '..', 'runs', 'review-changes');
const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tron.js');

const scratch: string[] = [];
afterEach(() => {
  for (const d of scratch.splice(0)) rmSync(d, { recursive: true, force: true });
});

function copyOfGolden(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tron-replay-'));
  scratch.push(dir);
  cpSync(GOLDEN, dir, { recursive: true });
  return dir;
}

async function replayOf(run: string | undefined, repo: string = tmpdir()): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await replayCommand({ repo, run, print: (l) => lines.push(l) });
  return { code, lines };
}

describe('tron replay', () => {
  it('says in one line that a recorded run re-derives to the identical decisions', async () => {
    const { code, lines } = await replayOf(GOLDEN);
    expect(code).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^replay: .*review-changes: \d+ inputs, \d+ decisions, identical$/);
  });

  it('prints the first divergence — seq, the recorded decision, the re-derived one — and exits 1', async () => {
    const dir = copyOfGolden();
    const file = join(dir, 'events.jsonl');
    const text = readFileSync(file, 'utf8');
    // The reviewer's first CHANGES becomes an APPROVE.
    const changes = text.split('\n').find((l) => l.includes('"type":"reply.received"') && l.includes('>>CHANGES'))!;
    const event = JSON.parse(changes) as { seq: number; reply: string };
    const seq = event.seq;
    writeFileSync(file, text.replace(changes, JSON.stringify({ ...event, reply: '>>APPROVE' })));
    const { code, lines } = await replayOf(dir);
    expect(code).toBe(1);
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe(`replay: ${dir}: diverged at seq ${seq + 1}, deciding input seq ${seq} (reply.received)`);
    expect(JSON.parse(lines[1]!.replace(/^recorded: /, ''))).toMatchObject({ type: 'reply.accepted', word: 'CHANGES' });
    expect(JSON.parse(lines[2]!.replace(/^derived: +/, ''))).toMatchObject({ type: 'reply.accepted', word: 'APPROVE' });
  });

  it('replays a log cut short by a crash up to its last input, and says so', async () => {
    const dir = copyOfGolden();
    const file = join(dir, 'events.jsonl');
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    // Cut right after an input, before its decisions were written.
    const input = lines.findIndex((l) => l.includes('"type":"facts.observed"'));
    writeFileSync(file, `${lines.slice(0, input + 1).join('\n')}\n`);
    const { code, lines: out } = await replayOf(dir);
    expect(code).toBe(0);
    expect(out[0]).toContain('identical (the log ends without run.finished: its last input was not replayed)');
    const events = readLog(file).events;
    expect(replayable(events).events).toHaveLength(input);
  });

  it('refuses when the repository has no run to default to, or the run directory lacks its spine', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'tron-replay-empty-'));
    scratch.push(empty);
    await expect(replayOf(undefined, empty)).rejects.toThrow(InputError);
    await expect(replayOf(undefined, empty)).rejects.toThrow(/TRON_NO_RUN/);
    const dir = copyOfGolden();
    rmSync(join(dir, 'workflow.toml'));
    await expect(replayOf(dir)).rejects.toThrow(/TRON_REPLAY_SPINE/);
  });

  it('is wired into the command line', async () => {
    const result = await execa('node', [BIN, 'replay', GOLDEN], { reject: false, stdin: 'ignore' });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toMatch(/identical$/);
    const missing = await execa('node', [BIN, 'replay', join(tmpdir(), 'no-such-run-dir')], { reject: false, stdin: 'ignore' });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toContain('TRON_RUN_NOT_FOUND');
  });
});

describe('tron report and tron replay with only --repo', () => {
  it('read the latest run of the repository by default, or the run an id names', async () => {
    const repo = await makeProject({
      blocks: { a: {} },
      sim: '[[blocks.a.builder]]\nwrite = { "a.txt" = "a\\n" }\ncommit = "a"\nreply = ">>DONE"\n',
    });
    try {
      const run = await runTron(repo);
      const id = run.runDir.split('/').at(-1)!;
      const cli = (...args: string[]) => execa('node', [BIN, ...args], { reject: false, stdin: 'ignore', cwd: tmpdir() });
      const replayed = await cli('replay', '--repo', repo.dir);
      expect(replayed.exitCode).toBe(0);
      expect(replayed.stdout).toMatch(new RegExp(`^replay: .*${id}: \\d+ inputs, \\d+ decisions, identical$`));
      const report = await cli('report', '--repo', repo.dir, '--json');
      expect(report.exitCode).toBe(0);
      const stats = JSON.parse(report.stdout);
      expect(stats).toMatchObject({ run: id, runDir: run.runDir, landed: 1 });
      expect(typeof stats.wallMs).toBe('number');
      const byId = await cli('report', id, '--repo', repo.dir);
      expect(byId.exitCode).toBe(0);
      expect(byId.stdout).toContain('1 landed, 0 parked, 0 abandoned');
      const unknown = await cli('report', '20990101-000000-001', '--repo', repo.dir);
      expect(unknown.exitCode).toBe(2);
      expect(unknown.stderr).toContain(`TRON_RUN_NOT_FOUND: 20990101-000000-001:`);
      expect(unknown.stderr).toContain(`its latest: ${id}`);
    } finally {
      await repo.cleanup();
    }
  });
});
