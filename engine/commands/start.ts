/**
 * `tron start`: validate everything, take the engine lock, open a run directory and
 * drive every ready block to a terminal phase. Bad input is reported before anything
 * in the repository changes: no branch, worktree, run directory or event.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Clock } from '../clock.ts';
import { InputError } from '../errors.ts';
import { loadProject } from '../register.ts';
import { SPINE_FILE, loadSpine } from '../workflow.ts';
import * as git from '../git.ts';
import { acquireLock } from '../lockfile.ts';
import { Engine, writeRunFiles } from '../tron.ts';
import { createWorker } from '../workers/create.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../roles.ts';
import { carrySessions, recover } from '../recovery.ts';
import { latestRun } from './status.ts';

export interface StartOptions {
  repo: string;
  watch?: boolean;
  clock: Clock;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  /** Replace configured workers (tests and the demo). */
  workers?: Partial<Record<WorkerRole, WorkerAdapter>>;
}

/** A run id that sorts by start time: 20261130-024812-001. */
export function runIdAt(ms: number, taken: (id: string) => boolean): string {
  const stamp = new Date(ms).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  for (let n = 1; ; n += 1) {
    const id = `${stamp}-${String(n).padStart(3, '0')}`;
    if (!taken(id)) return id;
  }
}

export async function startCommand(o: StartOptions): Promise<number> {
  const repo = resolve(o.repo);
  if (!existsSync(join(repo, '.git'))) {
    throw new InputError([{ code: 'TRON_NOT_A_REPO', path: repo, message: 'is not a git repository; run tron in the repository whose blocks it should land' }]);
  }
  const { config, blocks } = loadProject(repo);
  const spine = loadSpine();
  const trunkSha = await git.currentTrunkSha(repo, config.trunk);
  const dirty = await git.checkMainCheckout(repo, config.trunk);
  if (dirty) throw new InputError([dirty]);
  mkdirSync(join(repo, '.tron'), { recursive: true });
  const lock = acquireLock(join(repo, '.tron', 'engine.lock'), { purpose: `the engine of ${repo}`, command: `tron start${o.watch ? ' --watch' : ''}` });
  try {
    const workers: Partial<Record<WorkerRole, WorkerAdapter>> = { ...o.workers };
    for (const role of ['builder', 'reviewer', 'architect'] as const) {
      const settings = config.workers[role];
      if (!workers[role] && settings) workers[role] = createWorker(settings, { repo, env: o.env });
    }
    const previousRunDir = latestRun(repo);
    const recovery = await recover({ repo, previousRunDir, blocks: blocks.map((b) => ({ id: b.id, title: b.title, depends_on: b.dependsOn, priority: b.priority, criteria: b.criteria, digest: b.digest })), clock: o.clock });
    const runsDir = join(repo, '.tron', 'runs');
    const startedAt = o.clock.now();
    const runId = runIdAt(startedAt, (id) => existsSync(join(runsDir, id)));
    const runDir = join(runsDir, runId);
    writeRunFiles({ runDir, runId, config, spineFile: SPINE_FILE, trunkSha, startedAt });
    carrySessions(previousRunDir, runDir);
    o.print(`tron: run ${runId} — ${blocks.length} block(s), trunk ${config.trunk} at ${trunkSha.slice(0, 12)}`);
    const engine = new Engine({
      repo,
      runDir,
      runId,
      config,
      blocks,
      spine,
      spineFile: SPINE_FILE,
      workers,
      clock: o.clock,
      env: o.env,
      print: o.print,
      watch: Boolean(o.watch),
      boot: recovery.events,
      consumed: recovery.answered,
    });
    const exit = await engine.run();
    const end = engine.state;
    const parked = end.order.filter((id) => end.blocks[id]!.phase === 'parked');
    const abandoned = end.order.filter((id) => end.blocks[id]!.phase === 'abandoned');
    for (const id of parked) o.print(`tron: ${id} is parked: ${end.blocks[id]!.reason ?? ''}\n  answer: npx tron answer --repo ${o.repo} ${id} '>>RETRY {"guidance":"…"}'`);
    for (const id of abandoned) o.print(`tron: ${id} was abandoned: ${end.blocks[id]!.reason ?? ''}`);
    o.print(`tron: run ${runId} finished (exit ${exit}); run directory: ${runDir}`);
    return exit;
  } finally {
    lock.release();
  }
}
