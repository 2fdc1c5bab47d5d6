/**
 * A tron project for tests: a real repository with `.tron/config.toml`, block files and
 * an optional sim script, plus a way to run `tron start` on it and read what happened.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { makeRepo, GIT_IDENTITY_ENV, type TestRepo } from './repo.ts';
import { startCommand } from '../commands/start.ts';
import { systemClock } from '../os/clock.ts';
import { readLog } from '../log/eventlog.ts';
import { repoKey } from '../log/keys.ts';
import { writeAnswer } from '../runtime/inbox.ts';
import type { TronEvent } from '../core/events.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../core/roles.ts';

export interface BlockSpec {
  title?: string;
  criteria?: string[];
  depends_on?: string[];
  priority?: number;
  brief?: string;
}

/** A test command that runs every tests/*.test.js with node's assert. */
export const NODE_RUNNER = `const { readdirSync } = require('node:fs');
for (const f of readdirSync(__dirname + '/tests').filter((f) => f.endsWith('.test.js')).sort()) require('./tests/' + f);
`;

export function blockFile(id: string, spec: BlockSpec): string {
  const lines = ['+++', `title = ${JSON.stringify(spec.title ?? `Block ${id}`)}`];
  if (spec.depends_on) lines.push(`depends_on = ${JSON.stringify(spec.depends_on)}`);
  if (spec.priority !== undefined) lines.push(`priority = ${spec.priority}`);
  lines.push(`criteria = ${JSON.stringify(spec.criteria ?? [`${id} works`])}`, '+++', spec.brief ?? `Build ${id}.`, '');
  return lines.join('\n');
}

export function configFile(opts: { maxParallel?: number; extra?: string; workers?: string } = {}): string {
  return [
    'trunk = "main"',
    `max_parallel = ${opts.maxParallel ?? 2}`,
    'test = "node test.js"',
    '',
    '[timeouts]',
    'turn = "1m"',
    'test = "1m"',
    '',
    opts.workers ??
      '[workers.builder]\nadapter = "sim"\nscript = ".tron/sim.toml"\n\n[workers.reviewer]\nadapter = "sim"\nscript = ".tron/sim.toml"\n',
    opts.extra ?? '',
  ].join('\n');
}

/** A sim script in which each block's builder writes a file, commits it and answers DONE. */
export function landingSim(ids: string[]): string {
  return ids.map((id) => `[[blocks.${id}.builder]]\nwrite = { "${id}.txt" = "${id}\\n" }\ncommit = "${id}"\nreply = ">>DONE"\n`).join('\n');
}

export interface ProjectSpec {
  blocks: Record<string, BlockSpec>;
  sim?: string;
  config?: string;
  files?: Record<string, string>;
}

/** A repository with a node test runner, a smoke test and the .tron files. */
export async function makeProject(spec: ProjectSpec): Promise<TestRepo> {
  const files: Record<string, string> = {
    'test.js': NODE_RUNNER,
    'tests/smoke.test.js': "require('node:assert').ok(true);\n",
    '.tron/.gitignore': 'runs/\nworktrees/\ninbox/\nsim-state/\nengine.lock\n',
    '.tron/config.toml': spec.config ?? configFile(),
    '.tron/sim.toml': spec.sim ?? '',
    ...spec.files,
  };
  for (const [id, b] of Object.entries(spec.blocks)) files[`.tron/blocks/${id}.md`] = blockFile(id, b);
  return makeRepo(files);
}

/**
 * A project for the current test, removed (with everything tron made in it) when the test
 * ends — after `git fsck` of it (TestRepo.cleanup): whatever the test's workers did, the
 * user's history is intact, or the test fails.
 */
export async function project(spec: ProjectSpec): Promise<TestRepo> {
  const repo = await makeProject(spec);
  onTestFinished(() => repo.cleanup());
  return repo;
}

export interface RunResult {
  exit: number;
  output: string[];
  events: TronEvent[];
  runDir: string;
}

/** Runs `tron start` on the repository, in-process, and reads the run's log. */
export async function runTron(
  repo: TestRepo,
  opts: { workers?: Partial<Record<WorkerRole, WorkerAdapter>>; env?: Record<string, string> } = {},
): Promise<RunResult> {
  const output: string[] = [];
  const exit = await startCommand({
    repo: repo.dir,
    clock: systemClock,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...GIT_IDENTITY_ENV, ...opts.env },
    print: (line) => output.push(line),
    ...(opts.workers ? { workers: opts.workers } : {}),
  });
  const runs = readdirSync(join(repo.dir, '.tron', 'runs')).sort();
  const runDir = join(repo.dir, '.tron', 'runs', runs.at(-1)!);
  return { exit, output, events: readLog(join(runDir, 'events.jsonl')).events, runDir };
}

/** Events of one type, narrowed. */
export function ofType<T extends TronEvent['type']>(events: readonly TronEvent[], type: T): Extract<TronEvent, { type: T }>[] {
  return events.filter((e): e is Extract<TronEvent, { type: T }> => e.type === type);
}

export function readRunFile(runDir: string, name: string): string {
  return readFileSync(join(runDir, name), 'utf8');
}

/**
 * A block carried over from an earlier run: in the first run `stuck`'s builder asks
 * (BLOCKED) and it is parked; a block added after it, `later`, makes a second run, into
 * which `stuck` comes still parked, with no turn of its own there.
 */
export async function carriedOverProject(): Promise<{ repo: TestRepo; first: RunResult; second: RunResult }> {
  const sim = `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"which provider?"}'\n\n${landingSim(['later'])}`;
  const repo = await makeProject({ blocks: { stuck: {} }, sim });
  const first = await runTron(repo);
  writeFileSync(join(repo.dir, '.tron', 'blocks', 'later.md'), blockFile('later', {}));
  const second = await runTron(repo);
  if (second.runDir === first.runDir) throw new Error('the second tron start made no run of its own');
  return { repo, first, second };
}

/**
 * Two runs of one repository that each land a block: in the first `good` lands and
 * `stuck`'s builder asks (BLOCKED), so it is parked; an operator answer abandons `stuck`,
 * and a block added after the first run, `later`, lands in the second — into which `good`
 * comes already landed.
 */
export async function twoRunsProject(): Promise<{ repo: TestRepo; first: RunResult; second: RunResult }> {
  const sim = `[[blocks.stuck.builder]]\nreply = '>>BLOCKED {"reason":"which provider?"}'\n\n${landingSim(['good', 'later'])}`;
  const repo = await makeProject({ blocks: { good: {}, stuck: {} }, sim });
  const first = await runTron(repo);
  writeFileSync(join(repo.dir, '.tron', 'blocks', 'later.md'), blockFile('later', {}));
  writeAnswer(repo.dir, 'stuck', '>>ABANDON {"reason":"not needed after all"}', systemClock, repoKey(repo.dir, { create: true }).key);
  const second = await runTron(repo);
  if (second.runDir === first.runDir) throw new Error('the second tron start made no run of its own');
  return { repo, first, second };
}

/**
 * The runs the runs page charts (engine/serve/charts.ts): two runs of one repository whose
 * workers report what they spent. In the first, `good` lands at its first gate; `flaky`'s
 * builder says DONE with nothing committed, so its first gate fails, and lands after a
 * second build; `stuck`'s builder asks (BLOCKED) and it is parked. An operator answer
 * abandons `stuck`, and `later`, added after the first run and depending on `good`, lands in
 * the second. Every builder turn costs $0.02 and every review $0.01 (model "sim").
 */
export async function chartedProject(): Promise<{ repo: TestRepo; first: RunResult; second: RunResult }> {
  const usage = (usd: number) => `usage = { input = 1000, output = 200, cost_usd = ${usd} }`;
  const build = (id: string) =>
    `[[blocks.${id}.builder]]\nkind = "build"\nwrite = { "${id}.txt" = "${id}\\n" }\ncommit = "${id}"\nreply = ">>DONE"\n${usage(0.02)}\n`;
  const review = (id: string) => `[[blocks.${id}.reviewer]]\nkind = "review"\nreply = ">>APPROVE"\n${usage(0.01)}\n`;
  const sim = [
    build('good'),
    review('good'),
    `[[blocks.flaky.builder]]\nkind = "build"\nreply = ">>DONE"\n${usage(0.02)}\n`,
    build('flaky'),
    review('flaky'),
    `[[blocks.stuck.builder]]\nkind = "build"\nreply = '>>BLOCKED {"reason":"which provider?"}'\n${usage(0.02)}\n`,
    build('later'),
    review('later'),
  ].join('\n');
  const repo = await makeProject({ blocks: { good: {}, flaky: {}, stuck: {} }, sim, config: configFile({ maxParallel: 3 }) });
  const first = await runTron(repo);
  writeFileSync(join(repo.dir, '.tron', 'blocks', 'later.md'), blockFile('later', { depends_on: ['good'] }));
  writeAnswer(repo.dir, 'stuck', '>>ABANDON {"reason":"not needed after all"}', systemClock, repoKey(repo.dir, { create: true }).key);
  const second = await runTron(repo);
  if (second.runDir === first.runDir) throw new Error('the second tron start made no run of its own');
  return { repo, first, second };
}
