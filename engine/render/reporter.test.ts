import { afterEach, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { project as tronProject, runTron } from '../testing/project.ts';
import { commandConfig, slowBuilder } from '../testing/workers.ts';
import { BIN } from '../testing/crash.ts';
import { GIT_IDENTITY_ENV, type TestRepo } from '../testing/repo.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const project = (builder: string): Promise<TestRepo> => tronProject({ blocks: { widget: {} }, config: commandConfig(builder) });

/** Runs `tron start` as a user would, its output collected as it comes; `onOutput` sees the text so far. */
async function start(command: string[], onOutput: (text: string) => void) {
  const child = execa(command[0]!, command.slice(1), {
    reject: false,
    stdin: 'ignore',
    env: { ...GIT_IDENTITY_ENV, TERM: 'xterm-256color' },
    timeout: 60_000,
  });
  let text = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    onOutput(text);
  });
  const result = await child;
  return { exit: result.exitCode, text, stderr: String(result.stderr) };
}

describe('the console while tron start runs', () => {
  it("redraws a board in place on a terminal, showing a running worker's stderr line while its turn runs", async () => {
    const dir = tempDir('tron-board-');
    const go = join(dir, 'go');
    const repo = await project(slowBuilder(dir, 'compiling the widget, step 1 of 3', go));
    // A real pseudo-terminal (script), given a size as a terminal window has one.
    const shell = `stty rows 40 cols 160; exec node ${BIN} start --repo ${repo.dir}`;
    let seenWhileRunning = false;
    const run = await start(['script', '-qfec', shell, '/dev/null'], (text) => {
      // The line is on the board while the worker still waits for us: the turn has not ended.
      if (!seenWhileRunning && text.includes('compiling the widget, step 1 of 3')) {
        seenWhileRunning = !existsSync(go);
        writeFileSync(go, '');
      }
    });
    expect(run.exit, run.text).toBe(0);
    expect(seenWhileRunning).toBe(true);
    // The board row: block, phase, attempt, and what the worker said.
    expect(run.text).toMatch(/widget\s+build\s+#1\s+\d+:\d\d\s+builder, build turn 1 › compiling the widget, step 1 of 3/);
    expect(run.text).toMatch(/merge lane: /);
    // Redrawn in place: the board's lines are erased (erase line, cursor up) and drawn again.
    expect(run.text).toContain('\u001b[2K\u001b[1A');
    // What happened still reads as a log above it, and the terminal is left with its cursor on.
    expect(run.text).toMatch(/\d\d:\d\d:\d\d widget: landed/);
    expect(run.text.lastIndexOf('\u001b[?25h')).toBeGreaterThan(run.text.lastIndexOf('\u001b[?25l'));
  });

  it('prints plain lines, each starting with its time, when the output is a pipe — and with --plain on a terminal', async () => {
    for (const how of ['pipe', 'plain'] as const) {
      const dir = tempDir('tron-plain-');
      const go = join(dir, 'go');
      writeFileSync(go, '');
      const repo = await project(slowBuilder(dir, 'working', go));
      const command =
        how === 'pipe'
          ? ['node', BIN, 'start', '--repo', repo.dir]
          : ['script', '-qfec', `stty rows 40 cols 160; exec node ${BIN} start --plain --repo ${repo.dir}`, '/dev/null'];
      const run = await start(command, () => {});
      expect(run.exit, `${run.text}\n${run.stderr}`).toBe(0);
      const lines = run.text.replace(/\r/g, '').trimEnd().split('\n');
      expect(lines.length, how).toBeGreaterThan(5);
      expect(
        lines.filter((l) => !/^\d\d:\d\d:\d\d \S/.test(l)),
        how,
      ).toEqual([]);
      expect(run.text, how).not.toContain('\u001b[');
      expect(run.text, how).toMatch(/widget: build → review \(CONFIRMED\)/);
    }
  });

  it("shows a red gate with the failing test's own output and the path of its whole log, once per distinct failure", async () => {
    const failing = "require('node:assert').strictEqual(2 + 2, 5, 'the widget must spin clockwise');\n";
    const sim = `[[blocks.widget.builder]]
kind = "build"
write = { "tests/widget.test.js" = ${JSON.stringify(failing)} }
commit = "Add a red test"
reply = ">>DONE"

[[blocks.widget.builder]]
kind = "build"
reply = ">>DONE"
`;
    const repo = await tronProject({ blocks: { widget: {} }, sim });
    const run = await runTron(repo, { env: {} });
    const out = run.output.join('\n');
    expect(out).toMatch(/widget: gate failed — tests/);
    expect(out).toContain('the widget must spin clockwise');
    const log = out.match(/log: (\S+\/tests\/widget-gate-[0-9a-f]{12}\.log)/)?.[1];
    expect(log).toBeDefined();
    expect(existsSync(log!)).toBe(true);
    // The second failure of the same test says so instead of a second copy of its output.
    expect(out.match(/the widget must spin clockwise/g)).toHaveLength(1);
    expect(out).toContain('(the same output as above)');
  });
});
