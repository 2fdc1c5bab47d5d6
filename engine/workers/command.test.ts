import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../os/clock.ts';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createCommandWorker, type CommandWorker } from './command.ts';
import type { TurnObserver, TurnOutcome, TurnRequest, Usage } from './adapter.ts';
import { silentObserver } from './adapter.ts';
import type { CommandSettings } from '../project/worker-settings.ts';
import { isSameProcess, processStartTime } from '../os/proc.ts';
import { treeMembers } from '../os/process-tree.ts';
import { bwrapSandbox } from './sandbox.ts';
import { BWRAP, BWRAP_SKIP } from '../testing/bwrap.ts';

let root: string;
beforeAll(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'tron-command-')));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

function freshDir(): string {
  return mkdtempSync(join(root, 'turn-'));
}
function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  chmodSync(path, 0o755);
  return path;
}

const ENGINE_ENV = {
  PATH: process.env.PATH,
  HOME: '/home/tron-test',
  ENGINE_SECRET: 'do-not-leak',
  WORKER_TOKEN: 'passed-on',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:4000',
  ANTHROPIC_API_KEY: 'sk-ant',
  TRON_CRASH_AFTER_EVENT: 'engine-only',
};

function worker(command: string[], env: string[] = [], killGraceMs = 400, output?: CommandSettings['output']): CommandWorker {
  const settings: CommandSettings = { adapter: 'command', command, env, writable: [], ...(output ? { output } : {}) };
  return createCommandWorker(settings, { env: ENGINE_ENV, killGraceMs });
}

function request(cwd: string, over: Partial<TurnRequest> = {}): TurnRequest {
  return {
    role: 'builder',
    block: 'auth-login',
    session: 'builder-auth-login-1',
    turn: 2,
    phase: 'build',
    kind: 'build',
    prompt: 'Build the login page.\n',
    cwd,
    runDir: join(cwd, 'run'),
    timeoutMs: 30_000,
    signal: new AbortController().signal,
    ...over,
  };
}

function recorder() {
  const spawned: { pid: number; startTime: string }[] = [];
  const exited: { pid: number; code: number | null; signal: string | null }[] = [];
  const observer: TurnObserver = { ...silentObserver, spawned: (i) => spawned.push(i), exited: (i) => exited.push(i) };
  return { spawned, exited, observer };
}

/** Waits until the files exist and hold a pid, while the turn still runs. */
async function pidsFrom(files: string[], outcome: Promise<TurnOutcome>): Promise<{ pid: number; start: string }[]> {
  let done = false;
  void outcome.finally(() => (done = true));
  for (;;) {
    const pids = files.map((f) => (existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : 0));
    if (pids.every((p) => p > 0)) return pids.map((pid) => ({ pid, start: processStartTime(pid)! }));
    if (done) throw new Error('the turn ended before its processes wrote their pids');
    await delay(20);
  }
}

const NODE = process.execPath;
const FAMILY = `#!/bin/sh
sh -c 'trap "" TERM; echo $$ > grandchild.pid; while :; do sleep 1; done' &
trap '' TERM
echo $$ > child.pid
echo partial
wait
`;

describe('the command worker', () => {
  it('sends the whole prompt on stdin and takes stdout as the reply', async () => {
    const dir = freshDir();
    const prompt = `${'a line of the prompt\n'.repeat(20_000)}>> the end`;
    const outcome = await worker(['cat']).runTurn(request(dir, { prompt }), silentObserver);
    expect(outcome).toEqual({ ok: true, reply: prompt });
  });

  it('passes exactly the base, the listed variables, every TRON_* variable and the marker of the turn', async () => {
    const dir = freshDir();
    const printEnv = script(dir, 'env.mjs', 'console.log(JSON.stringify(process.env));');
    const req = request(dir);
    const outcome = await worker([NODE, printEnv], ['WORKER_TOKEN']).runTurn(req, silentObserver);
    expect(outcome.ok).toBe(true);
    const env = JSON.parse(outcome.ok ? outcome.reply : '{}');
    expect(env).toEqual({
      PATH: process.env.PATH,
      HOME: '/home/tron-test',
      WORKER_TOKEN: 'passed-on',
      TRON_ROLE: 'builder',
      TRON_BLOCK: 'auth-login',
      TRON_SESSION: 'builder-auth-login-1',
      TRON_TURN: '2',
      TRON_PHASE: 'build',
      TRON_RUN_DIR: req.runDir,
      TRON_MARK: expect.stringMatching(/^[0-9a-f]{24}$/),
    });
    expect(JSON.stringify(env)).not.toContain('do-not-leak');
  });

  it('passes what a pattern matches, never the engine own TRON_* variables unless named', async () => {
    const dir = freshDir();
    const printEnv = script(dir, 'env.mjs', 'console.log(JSON.stringify(process.env));');
    const names = async (entries: string[]) => {
      const outcome = await worker([NODE, printEnv], entries).runTurn(request(dir), silentObserver);
      const env = JSON.parse(outcome.ok ? outcome.reply : '{}') as Record<string, string>;
      return Object.keys(env).filter(
        (k) => !['PATH', 'HOME'].includes(k) && !/^TRON_(ROLE|BLOCK|SESSION|TURN|PHASE|RUN_DIR|MARK)$/.test(k),
      );
    };
    expect((await names(['ANTHROPIC_*', 'UNSET_*', 'ALSO_UNSET'])).sort()).toEqual(['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL']);
    expect((await names(['*_TOKEN', 'TRON_*', 'T*'])).sort()).toEqual(['WORKER_TOKEN']);
    expect(await names(['TRON_CRASH_AFTER_EVENT'])).toEqual(['TRON_CRASH_AFTER_EVENT']);
  });

  it('runs the worker in the request cwd', async () => {
    const dir = freshDir();
    const outcome = await worker(['pwd']).runTurn(request(dir), silentObserver);
    expect(outcome).toEqual({ ok: true, reply: `${dir}\n` });
  });

  it('reports a non-zero exit as a failed turn with the stderr tail and the output so far', async () => {
    const dir = freshDir();
    const outcome = await worker(['sh', '-c', 'echo half a reply; sleep 0.3; echo "model quota exceeded" >&2; exit 3']).runTurn(
      request(dir),
      silentObserver,
    );
    expect(outcome).toEqual({
      ok: false,
      failure: 'exit',
      detail: 'exited with 3: model quota exceeded',
      output: 'half a reply\n',
      stderr: 'model quota exceeded\n',
      cause: 'quota',
    });
  });

  it('shows the last line the CLI said, on stdout when it printed its error there last', async () => {
    const dir = freshDir();
    // Two pipes give no order between them: the pause makes "last" unambiguous.
    const body = 'echo "warming up" >&2; sleep 0.3; echo "Not logged in · Please run /login"; exit 1';
    const outcome = await worker(['sh', '-c', body]).runTurn(request(dir), silentObserver);
    expect(outcome).toEqual({
      ok: false,
      failure: 'exit',
      detail: 'exited with 1: Not logged in · Please run /login',
      output: 'Not logged in · Please run /login\n',
      stderr: 'warming up\n',
      cause: 'auth',
    });
  });

  it('reports a worker killed by a signal as a crash', async () => {
    const dir = freshDir();
    const outcome = await worker(['sh', '-c', 'kill -KILL $$']).runTurn(request(dir), silentObserver);
    expect(outcome.ok).toBe(false);
    expect(outcome.ok === false && outcome.failure).toBe('crash');
    expect(outcome.ok === false && outcome.detail).toContain('SIGKILL');
  });

  it('reports a missing program as a crash naming the command and the config to fix', async () => {
    const dir = freshDir();
    const rec = recorder();
    const outcome = await worker(['tron-no-such-agent-cli', '--yes']).runTurn(request(dir, { role: 'reviewer' }), rec.observer);
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.failure).toBe('crash');
    expect(outcome.detail).toContain('"tron-no-such-agent-cli"');
    expect(outcome.detail).toContain('check [workers.reviewer] command in .tron/config.toml');
    expect(rec.spawned).toEqual([]);
  });

  it('reports spawned and exited with the real pid and start time of the worker', async () => {
    const dir = freshDir();
    const self = script(
      dir,
      'self.mjs',
      `import { readFileSync } from 'node:fs';
const stat = readFileSync('/proc/self/stat', 'utf8');
console.log(JSON.stringify({ pid: process.pid, start: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] }));`,
    );
    const rec = recorder();
    const outcome = await worker([NODE, self]).runTurn(request(dir), rec.observer);
    const seen = JSON.parse(outcome.ok ? outcome.reply : '{}');
    expect(rec.spawned).toEqual([{ pid: seen.pid, startTime: seen.start }]);
    expect(rec.exited).toEqual([{ pid: seen.pid, code: 0, signal: null }]);
  });

  it('on timeout stops the whole process group, a TERM-ignoring grandchild included', async () => {
    const dir = freshDir();
    const family = script(dir, 'family.sh', FAMILY);
    const rec = recorder();
    const clock = new ManualClock();
    const w = worker([family]);
    const turn = w.runTurn(request(dir, { timeoutMs: 3000, clock }), rec.observer);
    const procs = await pidsFrom([join(dir, 'child.pid'), join(dir, 'grandchild.pid')], turn);
    while (!((w.running('builder-auth-login-1')?.outputBytes ?? 0) > 0)) await delay(20);
    // The budget is the turn's clock's: it has not passed until the clock passes it.
    clock.advance(2_999);
    expect(w.running('builder-auth-login-1')).toBeDefined();
    clock.advance(1);
    const outcome = await turn;
    expect(outcome).toMatchObject({ ok: false, failure: 'timeout', output: 'partial\n' });
    expect(outcome.ok === false && outcome.detail).toContain('no reply within 3s');
    for (const p of procs) expect(isSameProcess(p.pid, p.start)).toBe(false);
    expect(treeMembers(rec.spawned[0]!.pid)).toEqual([]);
  });

  it('on abort stops the whole process group, a TERM-ignoring grandchild included', async () => {
    const dir = freshDir();
    const family = script(dir, 'family.sh', FAMILY);
    const rec = recorder();
    const abort = new AbortController();
    const turn = worker([family]).runTurn(request(dir, { signal: abort.signal }), rec.observer);
    const procs = await pidsFrom([join(dir, 'child.pid'), join(dir, 'grandchild.pid')], turn);
    abort.abort();
    const outcome = await turn;
    expect(outcome).toMatchObject({ ok: false, failure: 'aborted' });
    for (const p of procs) expect(isSameProcess(p.pid, p.start)).toBe(false);
    expect(treeMembers(rec.spawned[0]!.pid)).toEqual([]);
    expect(rec.exited).toHaveLength(1);
  });

  it('does not start a turn whose signal is already aborted', async () => {
    const dir = freshDir();
    const rec = recorder();
    const abort = new AbortController();
    abort.abort();
    const outcome = await worker(['touch', 'started']).runTurn(request(dir, { signal: abort.signal }), rec.observer);
    expect(outcome).toMatchObject({ ok: false, failure: 'aborted' });
    expect(rec.spawned).toEqual([]);
    expect(existsSync(join(dir, 'started'))).toBe(false);
  });

  it('ends with the turn whatever the worker left running in its group', async () => {
    const dir = freshDir();
    const outcome = await worker(['sh', '-c', 'sleep 100 & echo $! > bg.pid; echo done']).runTurn(request(dir), silentObserver);
    expect(outcome).toEqual({ ok: true, reply: 'done\n' });
    const bg = Number(readFileSync(join(dir, 'bg.pid'), 'utf8'));
    expect(processStartTime(bg)).toBeUndefined();
  });

  it('ends with the turn a child the worker detached with setsid (its marker gives it away)', async () => {
    const dir = freshDir();
    const outcome = await worker([
      'sh',
      '-c',
      "setsid sh -c 'echo $$ > detached.pid; exec sleep 100' & while [ ! -s detached.pid ]; do sleep 0.02; done; echo done",
    ]).runTurn(request(dir), silentObserver);
    expect(outcome).toEqual({ ok: true, reply: 'done\n' });
    const detached = Number(readFileSync(join(dir, 'detached.pid'), 'utf8'));
    expect(detached).toBeGreaterThan(0);
    expect(processStartTime(detached)).toBeUndefined();
  });

  it('fills {prompt} and {prompt_file} into the argv and then gives stdin nothing', async () => {
    const dir = freshDir();
    const show = script(
      dir,
      'show.mjs',
      `import { readFileSync } from 'node:fs';
const [, , prompt, file] = process.argv;
console.log(JSON.stringify({ prompt, file, fileText: readFileSync(file, 'utf8'), stdin: readFileSync(0, 'utf8') }));`,
    );
    const req = request(dir, { prompt: 'Review {prompt_file} literally.\n', session: 'rev/1', turn: 4 });
    const outcome = await worker([NODE, show, '{prompt}', '{prompt_file}']).runTurn(req, silentObserver);
    const seen = JSON.parse(outcome.ok ? outcome.reply : '{}');
    expect(seen).toEqual({
      prompt: 'Review {prompt_file} literally.\n',
      file: join(req.runDir, 'prompts', 'rev_1-turn4.md'),
      fileText: 'Review {prompt_file} literally.\n',
      stdin: '',
    });
  });

  it('shows the running turn of a session and forgets it when the turn ends', async () => {
    const dir = freshDir();
    const w = worker(['sh', '-c', 'echo hello; sleep 100']);
    const abort = new AbortController();
    const rec = recorder();
    const turn = w.runTurn(request(dir, { signal: abort.signal }), rec.observer);
    while (!((w.running('builder-auth-login-1')?.outputBytes ?? 0) > 0)) await delay(20);
    const seen = w.running('builder-auth-login-1')!;
    expect(seen).toEqual({ pid: rec.spawned[0]!.pid, startTime: rec.spawned[0]!.startTime, outputBytes: 6 });
    expect(w.running('another-session')).toBeUndefined();
    abort.abort();
    await turn;
    expect(w.running('builder-auth-login-1')).toBeUndefined();
  });
});

/** What Claude Code 2.1 prints with -p --output-format json (fields trimmed to those tron reads, plus some it ignores). */
const CLAUDE_OK = JSON.stringify({
  type: 'result',
  subtype: 'success',
  is_error: false,
  result: 'Reviewed.\n>>APPROVE',
  total_cost_usd: 0.0075,
  usage: { input_tokens: 1200, cache_creation_input_tokens: 50, cache_read_input_tokens: 300, output_tokens: 40 },
  modelUsage: {
    'claude-opus-4-8': { inputTokens: 1000, outputTokens: 30, cacheReadInputTokens: 300, cacheCreationInputTokens: 50, costUSD: 0.007 },
    'claude-haiku-4-5': { inputTokens: 200, outputTokens: 10, cacheReadInputTokens: 0, cacheCreationInputTokens: 0, costUSD: 0.0005 },
  },
  session_id: 's',
});
const CLAUDE_NOT_LOGGED_IN = JSON.stringify({
  type: 'result',
  subtype: 'success',
  is_error: true,
  result: 'Not logged in · Please run /login',
  total_cost_usd: 0,
  usage: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
  modelUsage: {},
});

/** What Codex 0.171 prints with exec --json, on success and on a refused key. */
const CODEX_OK = [
  { type: 'thread.started', thread_id: 't' },
  { type: 'turn.started' },
  { type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text: 'Looking at the diff.' } },
  { type: 'item.completed', item: { id: 'item_1', type: 'command_execution', command: 'git diff', aggregated_output: '', exit_code: 0 } },
  { type: 'item.completed', item: { id: 'item_2', type: 'agent_message', text: 'Fine.\n>>APPROVE' } },
  { type: 'turn.completed', usage: { input_tokens: 1000, cached_input_tokens: 400, output_tokens: 50, reasoning_output_tokens: 10 } },
]
  .map((e) => JSON.stringify(e))
  .join('\n');
const CODEX_401 = [
  { type: 'thread.started', thread_id: 't' },
  { type: 'turn.started' },
  { type: 'error', message: 'Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided)' },
  { type: 'turn.failed', error: { message: 'unexpected status 401 Unauthorized: Incorrect API key provided: sk-x' } },
]
  .map((e) => JSON.stringify(e))
  .join('\n');

describe('the command worker reading structured output', () => {
  function usageRecorder() {
    const usage: Usage[] = [];
    return { usage, observer: { ...silentObserver, usage: (u: Usage) => usage.push(u) } satisfies TurnObserver };
  }
  const printing = (dir: string, stdout: string, code = 0) => {
    writeFileSync(join(dir, 'out.txt'), `${stdout}\n`);
    return ['sh', '-c', `cat > /dev/null; cat out.txt; exit ${code}`];
  };

  it('takes the result of claude-json as the reply and reports each model usage with its cost', async () => {
    const dir = freshDir();
    const { usage, observer } = usageRecorder();
    const outcome = await worker(printing(dir, CLAUDE_OK), [], 400, 'claude-json').runTurn(request(dir), observer);
    expect(outcome).toEqual({ ok: true, reply: 'Reviewed.\n>>APPROVE' });
    expect(usage).toEqual([
      { model: 'claude-opus-4-8', inputTokens: 1050, cachedTokens: 300, outputTokens: 30, costUsd: 0.007 },
      { model: 'claude-haiku-4-5', inputTokens: 200, cachedTokens: 0, outputTokens: 10, costUsd: 0.0005 },
    ]);
  });

  it("fails a claude-json turn with Claude Code's own error text, classed as auth", async () => {
    const dir = freshDir();
    const { usage, observer } = usageRecorder();
    const outcome = await worker(printing(dir, CLAUDE_NOT_LOGGED_IN, 1), [], 400, 'claude-json').runTurn(request(dir), observer);
    expect(outcome).toMatchObject({
      ok: false,
      failure: 'exit',
      detail: 'exited with 1: Not logged in · Please run /login',
      cause: 'auth',
      output: `${CLAUDE_NOT_LOGGED_IN}\n`,
    });
    expect(usage).toEqual([]);
  });

  it('takes the last agent message of codex-jsonl as the reply and its turn usage, cached apart', async () => {
    const dir = freshDir();
    const { usage, observer } = usageRecorder();
    const argv = [...printing(dir, CODEX_OK), '-m', 'gpt-5.1-codex'];
    const outcome = await worker(argv, [], 400, 'codex-jsonl').runTurn(request(dir), observer);
    expect(outcome).toEqual({ ok: true, reply: 'Fine.\n>>APPROVE' });
    expect(usage).toEqual([{ model: 'gpt-5.1-codex', inputTokens: 600, cachedTokens: 400, outputTokens: 50 }]);
  });

  it('fails a codex-jsonl turn with the turn.failed message, even when Codex said it on stdout and logged on stderr', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, 'out.txt'), `${CODEX_401}\n`);
    const argv = ['sh', '-c', 'cat > /dev/null; cat out.txt; echo "ERROR codex_api: failed to connect" >&2; exit 1'];
    const outcome = await worker(argv, [], 400, 'codex-jsonl').runTurn(request(dir), silentObserver);
    expect(outcome).toMatchObject({
      ok: false,
      failure: 'exit',
      detail: 'exited with 1: unexpected status 401 Unauthorized: Incorrect API key provided: sk-x',
      cause: 'auth',
      stderr: 'ERROR codex_api: failed to connect\n',
    });
  });

  it('takes output that is not in the configured format as plain text, so the gateway still sees it', async () => {
    const dir = freshDir();
    const outcome = await worker(printing(dir, 'plain words\n>>DONE'), [], 400, 'claude-json').runTurn(request(dir), silentObserver);
    expect(outcome).toEqual({ ok: true, reply: 'plain words\n>>DONE\n' });
  });
});

describe.skipIf(BWRAP_SKIP !== undefined)('the command worker in the bwrap sandbox', () => {
  const sandboxed = (command: string[], killGraceMs = 400) =>
    createCommandWorker(
      { adapter: 'command', command, env: [], writable: [] },
      { env: ENGINE_ENV, killGraceMs, sandbox: bwrapSandbox(BWRAP ?? 'bwrap') },
    );

  /** Host pids of live processes whose command line holds `token` (a sandbox's pids are its own). */
  function hostPids(token: string): { pid: number; start: string }[] {
    const found: { pid: number; start: string }[] = [];
    for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
      try {
        if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(token)) {
          const start = processStartTime(Number(name));
          if (start) found.push({ pid: Number(name), start });
        }
      } catch {
        // gone
      }
    }
    return found;
  }

  it('ends with the turn a child the worker detached with setsid, checked by its pid outside the sandbox', async () => {
    const dir = freshDir();
    const token = `${200 + Math.floor(Math.random() * 700)}.${process.pid}`;
    const turn = sandboxed(['sh', '-c', `setsid sleep ${token} & sleep 1; echo done`]).runTurn(request(dir), silentObserver);
    let seen: { pid: number; start: string }[] = [];
    for (let i = 0; i < 100 && seen.length === 0; i += 1) {
      seen = hostPids(`sleep\0${token}`);
      await delay(10);
    }
    expect(seen).toHaveLength(1);
    expect(await turn).toEqual({ ok: true, reply: 'done\n' });
    expect(isSameProcess(seen[0]!.pid, seen[0]!.start)).toBe(false);
  });

  it('on timeout ends the sandbox and everything in it', async () => {
    const dir = freshDir();
    const token = `${200 + Math.floor(Math.random() * 700)}.${process.pid + 1}`;
    const rec = recorder();
    const clock = new ManualClock();
    const w = sandboxed(['sh', '-c', `trap '' TERM; setsid sleep ${token} & echo partial; sleep ${token}`]);
    const turn = w.runTurn(request(dir, { timeoutMs: 1500, clock }), rec.observer);
    let seen: { pid: number; start: string }[] = [];
    for (let i = 0; i < 100 && seen.length < 2; i += 1) {
      seen = hostPids(`sleep\0${token}`);
      await delay(10);
    }
    expect(seen).toHaveLength(2);
    for (let i = 0; i < 100 && !((w.running('builder-auth-login-1')?.outputBytes ?? 0) > 0); i += 1) await delay(10);
    clock.advance(1500);
    expect(await turn).toMatchObject({ ok: false, failure: 'timeout', output: 'partial\n' });
    for (const p of seen) expect(isSameProcess(p.pid, p.start)).toBe(false);
    expect(treeMembers(rec.spawned[0]!.pid)).toEqual([]);
  });

  it('cannot write outside its worktree, and its program may live under the /tmp the sandbox hides', async () => {
    const dir = freshDir();
    const outside = freshDir();
    const tool = script(dir, 'tool.sh', `#!/bin/sh\necho inside > here.txt && echo x > ${outside}/there.txt; echo "outside $?"\n`);
    const outcome = await sandboxed([tool]).runTurn(request(dir), silentObserver);
    expect(outcome).toMatchObject({ ok: true, reply: expect.stringMatching(/^outside [1-9]/m) });
    expect(readFileSync(join(dir, 'here.txt'), 'utf8')).toBe('inside\n');
    expect(existsSync(join(outside, 'there.txt'))).toBe(false);
  });
});
