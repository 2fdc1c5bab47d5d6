/**
 * The SIM evaluation harness: runs templates on real git with real test commands and
 * scripted (sim) workers, each in its own temporary repository, and checks every run
 * against the template's expectation. Starts run in-process through `startCommand`;
 * a start with a crash hook runs as its own `tron start` process, since the hook ends
 * the process abruptly. Operator answers go through `tron answer`, as a user gives them.
 *
 * Templates run two at a time: the work is git and node processes, and the machines
 * this runs on have two cores.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import TOML from '@iarna/toml';
import { execa } from 'execa';
import { startCommand } from '../engine/commands/start.ts';
import { replayRunDir } from '../engine/commands/replay.ts';
import { systemClock } from '../engine/os/clock.ts';
import { readLog } from '../engine/log/eventlog.ts';
import { makeProject } from '../engine/testing/project.ts';
import { GIT_IDENTITY_ENV, makeRepo, type TestRepo } from '../engine/testing/repo.ts';
import { type BareRemote, makeBareRemote, serveDaemon } from '../engine/testing/remote-server.ts';
import { startGitHubServer } from '../engine/testing/github/server.ts';
import { installCi } from '../engine/testing/github/project.ts';
import { runnerWithTeammate } from '../engine/testing/remote-project.ts';
import { fsck } from '../engine/testing/store.ts';
import { configToml, FORGE_URL_PLACEHOLDER, type ForgeSpec, type Template } from './template.ts';
import { describePattern, differences, finalPhases, gitDifferences, matches, type RunRecord } from './expect.ts';
import { recordGolden } from './golden.ts';
import { tronPath } from '../engine/root.ts';

const BIN = tronPath('bin', 'tron.js');

export interface TemplateResult {
  name: string;
  title: string;
  pass: boolean;
  differences: string[];
  runs: RunRecord[];
  /** The temporary repository; removed after a pass unless kept. */
  repo: string;
  kept: boolean;
  blocks: number;
  landed: number;
  events: number;
  escalations: number;
  wallMs: number;
  /** Golden run directories written (with `record`). */
  recorded: string[];
}

export interface HarnessOptions {
  /** Keep every repository, not only those of failing templates. */
  keep?: boolean;
  /** Write the runs of passing templates as golden runs under this directory. */
  recordTo?: string;
  /** Templates at once (default 2). */
  parallel?: number;
  /** Called as each template finishes, in finishing order. */
  onResult?: (r: TemplateResult) => void;
}

/** The environment of a start: enough to run git and node, and the commit identity. */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = { ...GIT_IDENTITY_ENV };
  for (const key of ['PATH', 'HOME', 'LANG', 'TMPDIR', 'XDG_STATE_HOME']) if (process.env[key] !== undefined) env[key] = process.env[key]!;
  return env;
}

/** A fresh temporary repository holding the template's starting state (and its served remote, with `[remote]`). */
async function newProject(t: Template): Promise<Project> {
  const repo = await makeProject({
    blocks: t.blocks,
    sim: TOML.stringify({ blocks: t.sim.blocks } as unknown as TOML.JsonMap),
    config: configToml(t),
    files: { '.tron/.gitignore': 'runs/\nworktrees/\ninbox/\nengine.lock\nsim-state/\n', ...t.repo.files },
  });
  return t.remote ? serveRemote(t.remote, repo, t.forge) : repo;
}

/**
 * `[remote]` of a template: the project's trunk pushed to a bare repository served by git
 * daemon on 127.0.0.1, the project a clone of it (`origin`). `down`: the server stops, and
 * starts again once the engine's log shows it waiting (remote.retry). `decline`: a real
 * pre-receive hook says no. `teammate`: the test run pushes a teammate's commit first.
 */
async function serveRemote(spec: NonNullable<Template['remote']>, repo: TestRepo, forgeSpec?: ForgeSpec): Promise<Project> {
  const bare = await makeBareRemote();
  const served = await serveDaemon(bare);
  const forge = forgeSpec ? await serveForge(forgeSpec, repo, bare) : undefined;
  const mate = spec.teammate ? await makeRepo({}) : undefined;
  if (mate) {
    writeFileSync(join(repo.dir, 'test.js'), runnerWithTeammate(mate.dir, bare.dir));
    await repo.commitAll('A teammate pushes during the first lane test');
  }
  await repo.git('push', '-q', bare.dir, 'main');
  await repo.git('remote', 'add', 'origin', served.url);
  await repo.git('fetch', '-q', bare.dir, '+main:refs/remotes/origin/main');
  if (spec.decline) await bare.decline(spec.decline);
  let watching: NodeJS.Timeout | undefined;
  if (spec.down) {
    await served.stop();
    // Test infrastructure, not the engine: the log is looked at until the engine waits.
    watching = setInterval(() => {
      const runs = runDirs(repo.dir);
      const log = runs.length > 0 ? join(repo.dir, '.tron', 'runs', runs.at(-1)!, 'events.jsonl') : undefined;
      if (log && existsSync(log) && readFileSync(log, 'utf8').includes('"type":"remote.retry"')) {
        clearInterval(watching);
        void served.start();
      }
    }, 100);
  }
  return {
    dir: repo.dir,
    ...(forge && { env: forge.env }),
    cleanup: async () => {
      clearInterval(watching);
      await forge?.close();
      await served.stop().catch(() => undefined);
      await Promise.all([repo.cleanup(), bare.cleanup(), mate?.cleanup()]);
    },
  };
}

/** A template's project: its folder, what a start needs in its environment beyond the base, and its removal. */
interface Project {
  dir: string;
  env?: Record<string, string>;
  cleanup: () => Promise<void>;
}

/**
 * `[forge]` of a template: the test GitHub server over the served remote's bare repository
 * (engine/testing/github/), its address written into the project's config, trunk
 * protected with the required checks, hosted CI as a post-receive hook, the issues opened
 * in order, the queued faults, and people who act once the engine's log holds what they
 * wait for (test infrastructure, as the remote's `down` is: the log is looked at).
 */
async function serveForge(
  spec: ForgeSpec,
  repo: TestRepo,
  bare: BareRemote,
): Promise<{ env: Record<string, string>; close: () => Promise<void> }> {
  const gh = await startGitHubServer({ gitDir: bare.dir });
  const config = (await repo.read('.tron/config.toml')).replace(FORGE_URL_PLACEHOLDER, gh.url);
  await repo.write('.tron/config.toml', config);
  await repo.commitAll('tron: the forge');
  if (spec.required_checks.length > 0) gh.protect('main', spec.required_checks);
  if (spec.ci) await installCi(bare, gh, spec.required_checks[0] ?? 'ci', spec.ci, bare.root);
  for (const issue of spec.issues) gh.openIssue({ title: issue.title, body: issue.body, labels: issue.labels });
  gh.fault(
    ...spec.faults.map((f) => ({
      status: f.status,
      ...(f.match !== undefined && { match: new RegExp(f.match) }),
      ...(f.message !== undefined && { message: f.message }),
      ...(f.retry_after !== undefined && { headers: { 'retry-after': String(f.retry_after) } }),
    })),
  );
  const pending = [...spec.people];
  const watching = setInterval(() => {
    if (pending.length === 0) return clearInterval(watching);
    const runs = runDirs(repo.dir);
    const log = runs.length > 0 ? join(repo.dir, '.tron', 'runs', runs.at(-1)!, 'events.jsonl') : undefined;
    const text = log && existsSync(log) ? readFileSync(log, 'utf8') : '';
    const person = pending[0]!;
    if (text.split(`"type":"${person.after}"`).length - 1 < person.times) return;
    pending.shift();
    const pull = gh.pulls().at(-1);
    if (!pull) return;
    if (person.do === 'close') gh.closePull(pull.number, person.body, person.user);
    else
      void gh.review(pull.number, {
        state: person.do === 'approve' ? 'APPROVED' : 'CHANGES_REQUESTED',
        body: person.body,
        user: person.user,
      });
  }, 50);
  return {
    env: { GITHUB_TOKEN: gh.token },
    close: async () => {
      clearInterval(watching);
      await gh.close();
    },
  };
}

/** Runs one template to its end and checks it. */
export async function runTemplate(t: Template, opts: HarnessOptions = {}): Promise<TemplateResult> {
  const started = Date.now();
  const repo = await newProject(t);
  const runs: RunRecord[] = [];
  const crashes: Array<number | undefined> = [];
  const deadline = started + t.timeoutMs;
  for (const [i, spec] of t.runs.entries()) {
    let crashAt = spec.crash_after_event;
    if (spec.crash_after) {
      const found = await rehearse(t, i, crashes, deadline);
      if (typeof found === 'string') {
        runs.push({ index: i + 1, exit: undefined, events: [], runDir: undefined, output: [], replay: undefined, error: found });
        break;
      }
      crashAt = found;
    }
    crashes.push(crashAt);
    const record = await oneStart(t, repo.dir, projectEnv(repo), i + 1, spec, crashAt, deadline);
    runs.push(record);
    if (record.error?.startsWith('did not finish')) break;
  }
  const checked = await fsck(repo.dir);
  const damaged = checked.code === 0 ? [] : [`git fsck of the repository failed (exit ${checked.code}): ${checked.said}`];
  const found = [...differences(t, runs), ...(await gitDifferences(t, runs, repo.dir)), ...damaged];
  const pass = found.length === 0;
  const recorded = pass && opts.recordTo ? recordGolden(t.name, runs, repo.dir, opts.recordTo) : [];
  const kept = !pass || Boolean(opts.keep);
  if (!kept) await repo.cleanup();
  const phases = finalPhases(runs);
  const all = runs.flatMap((r) => r.events);
  return {
    name: t.name,
    title: t.title,
    pass,
    differences: found,
    runs,
    repo: repo.dir,
    kept,
    // A forge's issues are blocks too (a malformed one among them, never started).
    blocks: Object.keys(t.blocks).length + (t.forge?.issues.length ?? 0),
    landed: Object.values(phases).filter((p) => p === 'landed').length,
    events: all.length,
    escalations: all.filter((e) => e.type === 'escalation.raised').length,
    wallMs: Date.now() - started,
    recorded,
  };
}

/** What a project's starts need in their environment beyond the base (a forge's token). */
const projectEnv = (p: { env?: Record<string, string> }): Record<string, string> | undefined => p.env;

const runDirs = (repo: string) => {
  const dir = join(repo, '.tron', 'runs');
  return existsSync(dir) ? readdirSync(dir).sort() : [];
};

/**
 * The seq a `crash_after` pattern stands for: the starts before it are played as
 * written in a scratch repository, then this one without the hook; the first event
 * matching the pattern is where the crash goes. A string says why none was found.
 */
async function rehearse(t: Template, k: number, crashes: ReadonlyArray<number | undefined>, deadline: number): Promise<number | string> {
  const scratch = await newProject(t);
  try {
    for (let i = 0; i < k; i += 1) await oneStart(t, scratch.dir, projectEnv(scratch), i + 1, t.runs[i]!, crashes[i], deadline);
    const r = await oneStart(t, scratch.dir, projectEnv(scratch), k + 1, t.runs[k]!, undefined, deadline);
    const pattern = t.runs[k]!.crash_after!;
    const hit = r.events.find((e) => matches(e, pattern));
    return hit
      ? hit.seq
      : `crash_after ${describePattern(pattern)} matched no event of an uncrashed rehearsal of start ${k + 1}${r.error ? ` (${r.error})` : ''}`;
  } finally {
    await scratch.cleanup();
  }
}

/** One `tron start` of a template (after its operator answers), and what it left. */
async function oneStart(
  t: Template,
  repo: string,
  env: Record<string, string> | undefined,
  index: number,
  spec: Template['runs'][number],
  crashAt: number | undefined,
  deadline: number,
): Promise<RunRecord> {
  const errors: string[] = [];
  for (const a of spec.answers) {
    const r = await execa('node', [BIN, 'answer', '--repo', repo, a.block, a.reply], {
      env: baseEnv(),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      all: true,
    });
    if (r.exitCode !== 0)
      errors.push(
        `tron answer ${a.block} exited ${r.exitCode}: ${String(r.all ?? '')
          .trim()
          .split('\n')
          .slice(-3)
          .join(' / ')}`,
      );
  }
  const before = new Set(runDirs(repo));
  const output: string[] = [];
  const remaining = Math.max(1000, deadline - Date.now());
  let exit: number | undefined;
  if (crashAt !== undefined) {
    const r = await execa('node', [BIN, 'start', '--repo', repo], {
      env: { ...baseEnv(), ...env, TRON_CRASH_AFTER_EVENT: String(crashAt) },
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      all: true,
      timeout: remaining,
    });
    output.push(...String(r.all ?? '').split('\n'));
    if (r.timedOut) errors.push(`did not finish within ${t.timeout}`);
    else exit = r.exitCode;
  } else {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), remaining);
    });
    const stop = new AbortController();
    const start = startCommand({
      repo,
      clock: systemClock,
      env: { ...baseEnv(), ...env },
      print: (line) => output.push(line),
      stop: stop.signal,
    });
    try {
      const outcome = await Promise.race([start, timeout]);
      if (outcome === 'timeout') {
        errors.push(`did not finish within ${t.timeout}`);
        // Stop the engine as SIGTERM would, so it releases the repository before the next start.
        stop.abort();
        await start.catch(() => undefined);
      } else exit = outcome;
    } catch (err) {
      errors.push(`tron start failed: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }
  const fresh = runDirs(repo).filter((d) => !before.has(d));
  const runDir = fresh.length > 0 ? join(repo, '.tron', 'runs', fresh.at(-1)!) : undefined;
  let events: RunRecord['events'] = [];
  let replay: RunRecord['replay'];
  if (runDir) {
    writeFileSync(join(runDir, 'console.txt'), `${output.join('\n')}\n`);
    try {
      events = readLog(join(runDir, 'events.jsonl')).events;
      replay = replayRunDir(runDir);
    } catch (err) {
      errors.push(`its log cannot be read or replayed: ${(err as Error).message}`);
    }
  } else if (errors.length === 0) {
    errors.push('tron start wrote no run directory');
  }
  return {
    index,
    exit,
    events,
    runDir,
    output,
    replay,
    ...(crashAt !== undefined ? { crashAt } : {}),
    ...(errors.length ? { error: errors.join('; ') } : {}),
  };
}

/** Runs templates `parallel` at a time; results in the templates' order. */
export async function runTemplates(templates: readonly Template[], opts: HarnessOptions = {}): Promise<TemplateResult[]> {
  const results: TemplateResult[] = new Array(templates.length);
  let next = 0;
  const lane = async () => {
    while (next < templates.length) {
      const i = next++;
      const r = await runTemplate(templates[i]!, opts);
      results[i] = r;
      opts.onResult?.(r);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.parallel ?? 2) }, lane));
  return results;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
const WIDTH = 34;

/** The table header for `row`. */
export function header(): string {
  return `${'template'.padEnd(WIDTH)}  result  landed  events  escalations    time`;
}

/** One row of the table. */
export function row(r: TemplateResult): string {
  return `${r.name.padEnd(WIDTH)}  ${(r.pass ? 'pass' : 'FAIL').padEnd(6)}  ${`${r.landed}/${r.blocks}`.padStart(6)}  ${String(r.events).padStart(6)}  ${String(r.escalations).padStart(11)}  ${secs(r.wallMs).padStart(6)}`;
}

/** What differed in a failing template, and where to look. */
export function failureDetail(r: TemplateResult): string {
  const dirs = r.runs.map((x) => x.runDir).filter(Boolean);
  const lines = [`FAIL ${r.name} — ${r.title}`, `  repository kept: ${r.repo}`, ...dirs.map((d) => `  run directory: ${d}`)];
  for (const d of r.differences) lines.push(`  - ${d}`);
  return lines.join('\n');
}

/** The summary line. */
export function summary(results: readonly TemplateResult[], wallMs: number): string {
  const failed = results.filter((r) => !r.pass).length;
  const landed = results.reduce((n, r) => n + r.landed, 0);
  return `sim: ${results.length - failed} of ${results.length} templates passed${failed ? `, ${failed} FAILED` : ''}; ${landed} blocks landed; ${secs(wallMs)}`;
}
