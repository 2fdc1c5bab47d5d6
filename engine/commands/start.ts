/**
 * `tron start`: validate everything, take the engine lock, open a run directory and
 * drive every ready block to a terminal phase. Bad input is reported before anything
 * in the repository changes: no branch, worktree, run directory or event.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';
import type { Block } from '../project/register.ts';
import { checkProject, requireRepo } from './project-check.ts';
import { loadSpine } from '../spine/load.ts';
import * as git from '../git/index.ts';
import { acquireLock } from '../log/lockfile.ts';
import { createWorker } from '../workers/create.ts';
import { chooseSandbox } from '../workers/sandbox.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../core/roles.ts';
import { bootNotice, hasWork, nothingToDo, previousEvents, sameSuite } from '../runtime/start-reads.ts';
import { idleLines } from '../render/idle.ts';
import { catchUp, catchUpNotes, caughtAnything, recoverAfter } from '../runtime/catch-up.ts';
import { preflightTrunk } from '../runtime/preflight.ts';
import { sharedKey } from '../log/pg-keys.ts';
import { credentialPaths, remoteAccess } from '../git/remote.ts';
import { accessChangedInRun } from '../runtime/access-changed.ts';
import { readInbox } from '../runtime/inbox.ts';
import { latestRun } from '../log/runs.ts';
import { configChangedInRun } from '../runtime/effects/engine-files.ts';
import { randomBytes } from 'node:crypto';
import { repoKey, stateHome } from '../log/keys.ts';
import { MARKER_ENV } from '../workers/env.ts';
import type { Config } from '../project/config.ts';
import { dropEarlierJobs, migrateJobs } from '../queue/pg-jobs.ts';
import { bringLatestRun, databaseUrl, type Seat, seatFailure } from '../log/cluster.ts';
import { clusterSeat } from '../runtime/cluster-seat.ts';
import { forgeAtStart, type ForgeRun, openForge, withoutForgeToken } from '../forge/session.ts';
import { tellRecovered } from '../forge/progress.ts';
import { issueTelling } from '../runtime/forge-wiring.ts';
import { type RunOptions, runEngine } from './start-engine.ts';
import { tracesTarget } from '../serve/traces.ts';

/** `tron start`'s options: those of the run itself (start-engine.ts), and what only the start reads. */
export interface StartOptions extends RunOptions {
  /** Replace configured workers (tests and the demo). */
  workers?: Partial<Record<WorkerRole, WorkerAdapter>>;
  /** --standby: with a database, wait for the leader's lease to lapse, then take over (engine/log/lease.ts). */
  standby?: boolean;
}

export async function startCommand(o: StartOptions): Promise<number> {
  const repo = resolve(o.repo);
  requireRepo(repo);
  // Config, trunk, register and (unless the caller brings its own) workers: every problem at once.
  const { config, blocks: files } = await checkProject(repo, o.workers ? undefined : o.env);
  // An OTEL_EXPORTER_OTLP_ENDPOINT that is no URL is said now (exit 2), not found out by a run (serve/traces.ts).
  tracesTarget(config.telemetry, o.env);
  // [forge]: the token (exit 2 without it); [intake]: the labelled issues join the register (engine/forge/session.ts).
  const forgeRun = await forgeAtStart(config, files, o.env, openForge, o.clock);
  const blocks = forgeRun?.blocks ?? files;
  const spine = loadSpine();
  // Before anything changes: `mode = "bwrap"` where bwrap cannot run is a config error.
  // tron's own state (every repository's key: keys.ts) is hidden from everything the sandbox runs.
  // So are the user's git credentials (the engine's remote calls use them; nothing it runs does).
  const sandbox = await chooseSandbox(config.sandbox.mode, o.env, [stateHome(), ...credentialPaths(o.env, await remoteAccess(o.env))]);
  // A history that is not there is noticed before anything is built on it (exit 1, TRON_STORE_DAMAGED).
  await git.checkStore(repo, config.trunk);
  // With a database, one engine per repository is the lease's to say, on any host (docs/cluster.md).
  const seat = await clusterSeat(repo, config, o);
  if (seat === null) return 1;
  try {
    // The queue's schema too, before the run's directory is made: a database that cannot take it leaves nothing behind.
    if (seat) {
      await migrateJobs(seat.db);
      // What an earlier leader left running on agents stops there now, not at its timeout.
      await dropEarlierJobs(seat.db.client, seat.lease.repository, seat.lease.generation);
    }
    // Read once the lease is held: a standby may have waited while the leader moved trunk.
    const trunkSha = await git.currentTrunkSha(repo, config.trunk);
    return await startHolding(o, repo, config, blocks, spine, sandbox, trunkSha, seat, forgeRun);
  } catch (err) {
    throw seat ? seatFailure(seat, databaseUrl(config.cluster, o.env)!, err) : err;
  } finally {
    await seat?.leave();
  }
}

async function startHolding(
  o: StartOptions,
  repo: string,
  config: Config,
  blocks: Block[],
  spine: ReturnType<typeof loadSpine>,
  sandbox: Awaited<ReturnType<typeof chooseSandbox>>,
  trunkSha: string,
  seat: Seat | undefined,
  forgeRun?: ForgeRun,
): Promise<number> {
  // One engine per repository: nothing below runs while another engine holds the repository.
  mkdirSync(join(repo, '.tron'), { recursive: true });
  const lock = acquireLock(join(repo, '.tron', 'engine.lock'), {
    purpose: `the engine of ${repo}`,
    command: `tron start${o.watch ? ' --watch' : ''}`,
  });
  try {
    // The key that signs this run's log and checks answers; made on the first start.
    // With a database, the repository's key there (pg-keys.ts): an engine in a clone of its own checks the lines its predecessor signed.
    const { key, created: keyCreated } = seat ? await sharedKey(seat.db, seat.lease, repo) : repoKey(repo, { create: true });
    // Every worker and test process of the run carries the marker, so recovery can tell them from strangers.
    const marker = randomBytes(12).toString('hex');
    // The forge's token and Linear's key are tron's alone: no worker or test is given an environment that holds them.
    const env = { ...withoutForgeToken(o.env, config), [MARKER_ENV]: marker };
    // The table's latest run, written by whichever host led, is where recovery resumes from.
    if (seat) await bringLatestRun(seat, join(repo, '.tron', 'runs'));
    const previous = latestRun(repo);
    // A config a worker may have rewritten while the previous run ran is not used unseen.
    const before = previousEvents(previous);
    const configChanged = configChangedInRun(repo, before);
    if (configChanged) throw new InputError([configChanged]);
    // The user's git credential setup, read once for the run's remote calls: not if a worker may have written it (access-changed.ts).
    const access = config.remote ? await remoteAccess(o.env) : undefined;
    const accessChanged = access && accessChangedInRun(access, before);
    if (accessChanged) throw new InputError([accessChanged]);
    // What a start catches up on before recovery: a table of steps, in order (runtime/catch-up.ts).
    const caught = await catchUp({ repo, config, env: o.env, print: o.print, blocks, previous, before, trunkSha, access, forgeRun });
    const { remote } = caught;
    const workers: Partial<Record<WorkerRole, WorkerAdapter>> = { ...o.workers };
    for (const role of ['builder', 'reviewer', 'architect'] as const) {
      const settings = config.workers[role];
      if (!workers[role] && settings)
        workers[role] = createWorker(settings, { repo, env, sandbox: sandbox.sandbox, replyLimit: config.limits.replyBytes });
    }
    const recovery = await recoverAfter({ repo, config, blocks, previous }, caught, { clock: o.clock, keyCreated });
    for (const e of recovery.events) {
      const notice = bootNotice(e);
      if (notice) o.print(notice);
    }
    const idle =
      o.watch || caughtAnything(caught)
        ? undefined
        : nothingToDo(previous, before, recovery, blocks, readInbox(repo, key, new Set(recovery.answered)).answers.length);
    if (idle) {
      // A landing a killed run could not tell its issue is told now (engine/forge/progress.ts).
      if (forgeRun && Object.keys(forgeRun.issues).length > 0)
        await tellRecovered(
          { ...issueTelling(forgeRun, { repo, config, repoArg: o.repo, clock: o.clock }), print: o.print },
          recovery.events,
        );
      for (const line of idleLines(idle, { previous: previous!, repoArg: o.repo, blocks })) o.print(line);
      return idle.exit;
    }
    // Trunk is checked with the configured tests before any block is touched: a red trunk stops here (preflight.ts).
    if (hasWork(recovery, blocks, readInbox(repo, key, new Set(recovery.answered)).answers.length)) {
      const flaky = await preflightTrunk({
        repo,
        config,
        trunkSha: await git.currentTrunkSha(repo, config.trunk),
        env,
        sandbox: sandbox.sandbox,
        testedGreen: (sha) =>
          sameSuite(previous, config) &&
          before.some((e) => (e.type === 'block.landed' && e.top === sha) || (e.type === 'trunk.tested' && e.ok && e.sha === sha)),
      });
      if (flaky) o.print(flaky);
    }
    return await runEngine(o, {
      repo,
      config,
      blocks,
      spine,
      sandbox,
      workers,
      env,
      key,
      marker,
      // Where trunk is now: a landing made local from the remote moved it since the lease was taken.
      trunkSha: await git.currentTrunkSha(repo, config.trunk),
      previousRunDir: previous,
      boot: [recovery.events[0]!, ...catchUpNotes(caught), ...recovery.events.slice(1)],
      consumed: recovery.answered,
      remote,
      seat,
      forgeRun,
    });
  } finally {
    lock.release();
  }
}
