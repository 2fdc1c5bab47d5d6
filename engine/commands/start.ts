/**
 * `tron start`: validate everything, take the engine lock, open a run directory and
 * drive every ready block to a terminal phase. Bad input is reported before anything
 * in the repository changes: no branch, worktree, run directory or event.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Clock } from '../os/clock.ts';
import { InputError } from '../core/errors.ts';
import { loadRegister, type Block } from '../project/register.ts';
import { checkProject, requireRepo } from './project-check.ts';
import { SPINE_FILE, loadSpine } from '../spine/load.ts';
import * as git from '../git/index.ts';
import { acquireLock } from '../log/lockfile.ts';
import { Engine } from '../runtime/engine.ts';
import { writeRunFiles } from '../runtime/run-files.ts';
import { createWorker } from '../workers/create.ts';
import { chooseSandbox } from '../workers/sandbox.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { WorkerRole } from '../core/roles.ts';
import { carrySessions, recover } from '../runtime/recovery.ts';
import { bootNotice, hasWork, nothingToDo, previousEvents, sameSuite } from '../runtime/start-reads.ts';
import { idleLines } from '../render/idle.ts';
import { catchUp, catchUpNotes } from '../runtime/catch-up.ts';
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
import { liveBoard, plainReporter, type Reporter } from '../render/reporter.ts';
import { renderReport } from '../render/report.ts';
import { Notifier } from '../serve/notify.ts';
import type { Config } from '../project/config.ts';
import { brokerFor } from '../queue/job-queue.ts';
import { dropEarlierJobs, migrateJobs } from '../queue/pg-jobs.ts';
import { bringLatestRun, databaseUrl, type Seat, seatFailure } from '../log/cluster.ts';
import { clusterSeat } from '../runtime/cluster-seat.ts';
import { forgeAtStart, type ForgeRun, withoutForgeToken } from '../forge/session.ts';
import { tellRecovered } from '../forge/progress.ts';
import { ForgeWiring, issueTelling } from '../runtime/forge-wiring.ts';
import { stopOnSignals } from '../runtime/signals.ts';

export interface StartOptions {
  repo: string;
  watch?: boolean;
  clock: Clock;
  env: Record<string, string | undefined>;
  print: (line: string) => void;
  /**
   * The terminal to draw the live board on. Without it, or when it is not a TTY, or with
   * `plain`, progress is printed as time-stamped lines through `print`.
   */
  output?: NodeJS.WriteStream;
  /** --plain: time-stamped lines even on a terminal. */
  plain?: boolean;
  /** Replace configured workers (tests and the demo). */
  workers?: Partial<Record<WorkerRole, WorkerAdapter>>;
  /** --watch: the interval of heartbeat events (default 60 s). */
  heartbeatMs?: number;
  /** Install SIGINT/SIGTERM handlers (the CLI does; in-process tests do not). */
  signals?: boolean;
  /** Stops the engine gracefully when aborted, as SIGTERM would (in-process callers: tests, the SIM harness). */
  stop?: AbortSignal;
  /** --standby: with a database, wait for the leader's lease to lapse, then take over (engine/log/lease.ts). */
  standby?: boolean;
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
  requireRepo(repo);
  // Config, trunk, register and (unless the caller brings its own) workers: every problem at once.
  const { config, blocks: files } = await checkProject(repo, o.workers ? undefined : o.env);
  // [forge]: the token (exit 2 without it); [intake]: the labelled issues join the register (engine/forge/session.ts).
  const forgeRun = await forgeAtStart(config, files, o.env);
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
    // The forge's token is tron's alone: no worker or test is given an environment that holds it.
    const env = { ...withoutForgeToken(o.env, config.forge), [MARKER_ENV]: marker };
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
    const { remote, travelled, fromQueue } = caught;
    const workers: Partial<Record<WorkerRole, WorkerAdapter>> = { ...o.workers };
    for (const role of ['builder', 'reviewer', 'architect'] as const) {
      const settings = config.workers[role];
      if (!workers[role] && settings)
        workers[role] = createWorker(settings, { repo, env, sandbox: sandbox.sandbox, replyLimit: config.limits.replyBytes });
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
      travelled: (id, sha) => {
        const came = travelled?.from.get(id);
        return came?.sha === sha ? came.source : undefined;
      },
      vouched: (id, sha) => fromQueue.some((e) => e.type === 'remote.recovered' && e.blocks.some((b) => b.block === id && b.sha === sha)),
    });
    for (const e of recovery.events) {
      const notice = bootNotice(e);
      if (notice) o.print(notice);
    }
    const idle =
      o.watch || [caught.cleared, caught.fromRemote, caught.fromQueue, caught.travelled?.events ?? []].some((notes) => notes.length > 0)
        ? undefined
        : nothingToDo(previous, before, recovery, blocks, readInbox(repo, key, new Set(recovery.answered)).answers.length);
    if (idle) {
      // A landing a killed run could not tell its issue is told now (engine/forge/progress.ts).
      if (forgeRun && Object.keys(forgeRun.issues).length > 0)
        await tellRecovered({ ...issueTelling(forgeRun, { repo, config, repoArg: o.repo }), print: o.print }, recovery.events);
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
    const runsDir = join(repo, '.tron', 'runs');
    const startedAt = o.clock.now();
    const runId = runIdAt(startedAt, (id) => existsSync(join(runsDir, id)));
    const runDir = join(runsDir, runId);
    writeRunFiles({
      runDir,
      runId,
      config,
      spineFile: SPINE_FILE,
      // Where trunk is now: a landing made local from the remote moved it since the lease was taken.
      trunkSha: await git.currentTrunkSha(repo, config.trunk),
      startedAt,
      sandbox: { kind: sandbox.sandbox.kind, ...(sandbox.notice ? { why: sandbox.notice } : {}) },
    });
    carrySessions(previousRunDir, runDir);
    const reporter = reporterFor(o, repo, runDir, (id) => blocks.find((b) => b.id === id)?.file);
    const say = reporter.print;
    if (sandbox.notice) say(sandbox.notice);
    // [notify]: a reporter too, delivering off the engine's path; its outcomes are notes in the log.
    const notifier: Notifier | undefined = config.notify
      ? new Notifier({ config: config.notify, repo, runDir, record: (body): boolean => engine.record(body), print: say })
      : undefined;
    // [forge]: issues told how their blocks go, [intake]'s issues polled and carried on every reload (runtime/forge-wiring.ts).
    const forge = forgeRun ? new ForgeWiring(forgeRun, { repo, config, repoArg: o.repo, watch: Boolean(o.watch), print: say }) : undefined;
    // With a database the table is the log; the run directory gets a copy when the run ends (pg-log.ts).
    const pgLog = seat ? await seat.openLog(runId, key, join(runDir, 'events.jsonl')) : undefined;
    const jobs = seat && pgLog ? brokerFor(seat.db, pgLog, config) : undefined;
    const engine: Engine = new Engine({
      ...(pgLog ? { log: (clock: Clock) => pgLog.attach(clock) } : {}),
      ...(jobs ? { jobs } : {}),
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
      sandbox: sandbox.sandbox,
      print: say,
      onAppend:
        notifier || forge?.watching
          ? (e) => {
              reporter.event(e);
              notifier?.event(e);
              forge?.event(e);
            }
          : reporter.event,
      report: renderReport,
      onOutput: reporter.output,
      watch: Boolean(o.watch),
      boot: [recovery.events[0]!, ...catchUpNotes(caught), ...recovery.events.slice(1)],
      ...(remote && { remote }),
      ...(forgeRun && { forge: forgeRun.forge }),
      consumed: recovery.answered,
      ...crashHook(o.env),
      ...(o.heartbeatMs ? { heartbeatMs: o.heartbeatMs } : {}),
      reloadBlocks: () => {
        const again = loadRegister(repo);
        if (again.problems.length === 0) return forge ? forge.withIssues(again.blocks) : again.blocks;
        for (const p of again.problems) say(`${p.code}: ${p.path}: ${p.message}`);
        say('tron: the register has problems; keeping the blocks as they were until they are fixed');
        return undefined;
      },
    });
    forge?.attach(engine);
    const offSignals = o.signals ? stopOnSignals(engine, say, () => reporter.close()) : undefined;
    // The database lost (connection broken, lease gone): the run ends now, naming it, rather than wait on results it cannot record.
    seat?.onLost((err) => engine.fail(err, 'the database'));
    const onAbort = () => engine.stop('SIGTERM');
    o.stop?.addEventListener('abort', onAbort);
    // The reporter says how the run ended (from run.finished): parked blocks with their answer command.
    return await engine.run().finally(() => {
      const forgeClosed = forge?.close();
      o.stop?.removeEventListener('abort', onAbort);
      offSignals?.();
      reporter.close();
      return Promise.all([notifier?.close(), forgeClosed]).then(() => undefined);
    });
  } finally {
    lock.release();
  }
}

/** The live board on a terminal; time-stamped lines anywhere else, or when asked for. */
function reporterFor(o: StartOptions, repo: string, runDir: string, blockFile: (id: string) => string | undefined): Reporter {
  // A terminal of no size (a headless pseudo-terminal) has no room for a board.
  const tty = o.output?.isTTY === true && (o.output.rows ?? 0) > 0 && !o.plain && o.env.TERM !== 'dumb';
  return tty && o.output
    ? liveBoard({ repo, runDir, blockFile, stream: o.output, clock: o.clock })
    : plainReporter({ repo, runDir, blockFile, print: o.print, clock: o.clock });
}

/** The crash test hook: TRON_CRASH_AFTER_EVENT=N makes the engine die right after event N. */
function crashHook(env: Record<string, string | undefined>): { crashAfter?: number } {
  const n = Number(env.TRON_CRASH_AFTER_EVENT);
  return Number.isInteger(n) && n > 0 ? { crashAfter: n } : {};
}
