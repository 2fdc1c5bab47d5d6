/**
 * `tron start`: validate everything, take the engine lock, open a run directory and
 * drive every ready block to a terminal phase. Bad input is reported before anything
 * in the repository changes: no branch, worktree, run directory or event.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Clock } from '../core/clock.ts';
import { InputError } from '../core/errors.ts';
import { loadProject, loadRegister } from '../project/register.ts';
import { SPINE_FILE, loadSpine } from '../spine/load.ts';
import * as git from '../git/index.ts';
import { acquireLock } from '../runtime/lockfile.ts';
import { Engine, writeRunFiles } from '../runtime/engine.ts';
import { createWorker } from '../workers/create.ts';
import { preflightWorkers } from '../workers/preflight.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../core/roles.ts';
import { carrySessions, clearInterruptedLanding, recover } from '../runtime/recovery.ts';
import { latestRun } from './status.ts';
import { readLog } from '../runtime/eventlog.ts';
import { configChangedInRun } from '../runtime/engine-files.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import { randomBytes } from 'node:crypto';
import { repoKey } from '../runtime/keys.ts';
import { MARKER_ENV } from '../workers/env.ts';

export interface StartOptions {
  repo: string;
  watch?: boolean;
  clock: Clock;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  /** Replace configured workers (tests and the demo). */
  workers?: Partial<Record<WorkerRole, WorkerAdapter>>;
  /** --watch: the interval of heartbeat events (default 60 s). */
  heartbeatMs?: number;
  /** Install SIGINT/SIGTERM handlers (the CLI does; in-process tests do not). */
  signals?: boolean;
  /** Stops the engine gracefully when aborted, as SIGTERM would (in-process callers: tests, the SIM harness). */
  stop?: AbortSignal;
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
    throw new InputError([
      { code: 'TRON_NOT_A_REPO', path: repo, message: 'is not a git repository; run tron in the repository whose blocks it should land' },
    ]);
  }
  const { config, blocks } = loadProject(repo);
  const spine = loadSpine();
  if (!o.workers) {
    const problems = preflightWorkers(config, o.env, repo);
    if (problems.length > 0) throw new InputError(problems);
  }
  const trunkSha = await git.currentTrunkSha(repo, config.trunk);
  // One engine per repository: nothing below runs while another engine holds the repository.
  mkdirSync(join(repo, '.tron'), { recursive: true });
  const lock = acquireLock(join(repo, '.tron', 'engine.lock'), {
    purpose: `the engine of ${repo}`,
    command: `tron start${o.watch ? ' --watch' : ''}`,
  });
  try {
    // The key that signs this run's log and checks answers; made on the first start.
    const { key, created: keyCreated } = repoKey(repo, { create: true });
    // Every worker and test process of the run carries the marker, so recovery can tell them from strangers.
    const marker = randomBytes(12).toString('hex');
    const env = { ...o.env, [MARKER_ENV]: marker };
    const previous = latestRun(repo);
    // A config a worker may have rewritten while the previous run ran is not used unseen.
    const configChanged = configChangedInRun(repo, previousEvents(previous));
    if (configChanged) throw new InputError([configChanged]);
    // A landing the previous run died in the middle of: its git locks first, then the checkout it was moving.
    const cleared = await clearInterruptedLanding(repo, previous);
    const caughtUp = await git.catchUpCheckout(repo, config.trunk, landedFrom(previous));
    if (caughtUp)
      o.print(
        `tron: your checkout of ${config.trunk} was left at ${caughtUp.slice(0, 12)} by an interrupted landing; moved it to ${trunkSha.slice(0, 12)}`,
      );
    const dirty = await git.checkMainCheckout(repo, config.trunk);
    if (dirty) throw new InputError([dirty]);
    const workers: Partial<Record<WorkerRole, WorkerAdapter>> = { ...o.workers };
    for (const role of ['builder', 'reviewer', 'architect'] as const) {
      const settings = config.workers[role];
      if (!workers[role] && settings) workers[role] = createWorker(settings, { repo, env, replyLimit: config.limits.replyBytes });
    }
    const previousRunDir = previous;
    const recovery = await recover({
      repo,
      previousRunDir,
      blocks: blocks.map((b) => ({
        id: b.id,
        title: b.title,
        depends_on: b.dependsOn,
        priority: b.priority,
        criteria: b.criteria,
        digest: b.digest,
      })),
      clock: o.clock,
      trunk: config.trunk,
      keyCreated,
    });
    for (const e of recovery.events) {
      const notice = bootNotice(e);
      if (notice) o.print(notice);
    }
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
      env,
      key,
      marker,
      print: o.print,
      watch: Boolean(o.watch),
      boot: [recovery.events[0]!, ...cleared, ...recovery.events.slice(1)],
      consumed: recovery.answered,
      ...crashHook(o.env),
      ...(o.heartbeatMs ? { heartbeatMs: o.heartbeatMs } : {}),
      reloadBlocks: () => {
        const again = loadRegister(repo);
        if (again.problems.length === 0) return again.blocks;
        for (const p of again.problems) o.print(`${p.code}: ${p.path}: ${p.message}`);
        o.print('tron: the register has problems; keeping the blocks as they were until they are fixed');
        return undefined;
      },
    });
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        // A second signal stops at once: worker process groups first, then the engine.
        engine.abortNow();
        o.print(`tron: ${signal} again — stopping at once`);
        process.exit(1);
      }
      stopping = true;
      o.print(`tron: ${signal} — no new work; stopping the running turns (send it again to stop at once)`);
      engine.stop(signal);
    };
    let stopping = false;
    if (o.signals) {
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    }
    const onAbort = () => engine.stop('SIGTERM');
    o.stop?.addEventListener('abort', onAbort);
    const exit = await engine.run().finally(() => {
      o.stop?.removeEventListener('abort', onAbort);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    });
    const end = engine.state;
    const parked = end.order.filter((id) => end.blocks.get(id)!.phase === 'parked');
    const abandoned = end.order.filter((id) => end.blocks.get(id)!.phase === 'abandoned');
    for (const id of parked)
      o.print(
        `tron: ${id} is parked: ${end.blocks.get(id)!.reason ?? ''}\n  answer: npx tron answer --repo ${o.repo} ${id} '>>RETRY {"guidance":"…"}'`,
      );
    for (const id of abandoned) o.print(`tron: ${id} was abandoned: ${end.blocks.get(id)!.reason ?? ''}`);
    o.print(`tron: run ${runId} finished (exit ${exit}); run directory: ${runDir}`);
    return exit;
  } finally {
    lock.release();
  }
}

/** The crash test hook: TRON_CRASH_AFTER_EVENT=N makes the engine die right after event N. */
function crashHook(env: Record<string, string | undefined>): { crashAfter?: number } {
  const n = Number(env.TRON_CRASH_AFTER_EVENT);
  return Number.isInteger(n) && n > 0 ? { crashAfter: n } : {};
}

/** What recovery found that the operator should hear of at once: forged records and spared processes. */
function bootNotice(e: EventBody): string | undefined {
  switch (e.type) {
    case 'log.foreign':
      return `tron: the log of run ${e.run} holds lines tron did not write; they were set aside, not acted on — ${e.detail}`;
    case 'landed.untrusted':
      return `tron: refs/tron/landed/${e.block} was not believed (${e.reason}); kept as ${e.kept}, and ${e.block} is built`;
    case 'worker.spared':
      return `tron: process ${e.pid}, recorded as a worker of ${e.block}, was left alone: ${e.reason}`;
    default:
      return undefined;
  }
}

/** The previous run's events, or none when there is no readable log. */
function previousEvents(runDir: string | undefined): TronEvent[] {
  if (!runDir || !existsSync(join(runDir, 'events.jsonl'))) return [];
  try {
    return readLog(join(runDir, 'events.jsonl')).events;
  } catch {
    return [];
  }
}

/** Trunk shas the previous run landed from (and started at): where an interrupted landing may have left the checkout. */
function landedFrom(runDir: string | undefined): string[] {
  if (!runDir || !existsSync(join(runDir, 'events.jsonl'))) return [];
  const shas: string[] = [];
  for (const e of readLog(join(runDir, 'events.jsonl')).events) {
    if (e.type === 'land.intent') shas.push(e.from);
    if (e.type === 'run.started') shas.push(e.trunk_sha);
  }
  return [...new Set(shas)].reverse();
}
