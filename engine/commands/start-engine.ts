/**
 * The second half of `tron start`: once the start has checked, caught up and recovered,
 * the run gets its directory, the engine is wired to whatever watches it — the reporter on
 * the terminal, [notify]'s webhooks, [telemetry]'s traces, [forge]'s issues, the database's
 * log and job queue —
 * and runs until every block is terminal (or, with --watch, until it is stopped).
 */
import { join } from 'node:path';
import type { EventBody } from '../core/events.ts';
import type { WorkerRole } from '../core/roles.ts';
import type { Seat } from '../log/cluster.ts';
import type { ForgeRun } from '../forge/session.ts';
import type { Clock } from '../os/clock.ts';
import type { Config } from '../project/config.ts';
import { loadRegister, type Block } from '../project/register.ts';
import { brokerFor } from '../queue/job-queue.ts';
import { liveBoard, plainReporter, type Reporter } from '../render/reporter.ts';
import { renderReport } from '../render/report.ts';
import { Engine } from '../runtime/engine.ts';
import { ForgeWiring } from '../runtime/forge-wiring.ts';
import type { Remote } from '../git/remote.ts';
import { openRunDir } from '../runtime/run-files.ts';
import { stopOnSignals } from '../runtime/signals.ts';
import { Notifier } from '../serve/notify.ts';
import { TraceReporter, tracesTarget } from '../serve/traces.ts';
import { TRON_VERSION } from '../root.ts';
import type { Spine } from '../spine/spine.ts';
import { SPINE_FILE } from '../spine/load.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { chooseSandbox } from '../workers/sandbox.ts';

/** How the run is driven and shown: the options of `tron start` that the run itself reads. */
export interface RunOptions {
  /** The repository as the user named it (messages repeat it: `tron answer --repo …`). */
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
  /** --watch: the interval of heartbeat events (default 60 s). */
  heartbeatMs?: number;
  /** Install SIGINT/SIGTERM handlers (the CLI does; in-process tests do not). */
  signals?: boolean;
  /** Stops the engine gracefully when aborted, as SIGTERM would (in-process callers: tests, the SIM harness). */
  stop?: AbortSignal;
}

/** What the first half of the start hands on. */
export interface RunInput {
  repo: string;
  config: Config;
  blocks: Block[];
  spine: Spine;
  sandbox: Awaited<ReturnType<typeof chooseSandbox>>;
  workers: Partial<Record<WorkerRole, WorkerAdapter>>;
  /** The workers' and tests' environment: no forge token, the run's marker. */
  env: Record<string, string | undefined>;
  key: Buffer;
  marker: string;
  /** Trunk now: a landing made local from the remote moved it since the lease was taken. */
  trunkSha: string;
  previousRunDir: string | undefined;
  /** The events the boot records, in order: recovery.started, the catch-up's notes, the rest of recovery's. */
  boot: EventBody[];
  /** Answers recovery found consumed already. */
  consumed: readonly string[];
  remote: Remote | undefined;
  seat: Seat | undefined;
  forgeRun: ForgeRun | undefined;
}

/** Opens the run's directory, wires the engine to what watches it, and runs it; the run's exit status. */
export async function runEngine(o: RunOptions, r: RunInput): Promise<number> {
  const { repo, config, blocks, seat, forgeRun } = r;
  const startedAt = o.clock.now();
  const { runId, runDir } = openRunDir({
    repo,
    config,
    spineFile: SPINE_FILE,
    trunkSha: r.trunkSha,
    startedAt,
    previousRunDir: r.previousRunDir,
    sandbox: { kind: r.sandbox.sandbox.kind, ...(r.sandbox.notice ? { why: r.sandbox.notice } : {}) },
  });
  const reporter = reporterFor(o, repo, runDir, (id) => blocks.find((b) => b.id === id)?.file);
  const say = reporter.print;
  if (r.sandbox.notice) say(r.sandbox.notice);
  // [notify]: a reporter too, delivering off the engine's path; its outcomes are notes in the log.
  const notifier: Notifier | undefined = config.notify
    ? new Notifier({ config: config.notify, repo, runDir, record: (body): boolean => engine.record(body), print: say, clock: o.clock })
    : undefined;
  // [telemetry] (or OTEL_EXPORTER_OTLP_ENDPOINT): spans made and exported off the engine's path.
  const target = tracesTarget(config.telemetry, o.env);
  const traces = target ? new TraceReporter({ ...target, repo, version: TRON_VERSION, clock: o.clock }) : undefined;
  // [forge]: issues told how their blocks go, [intake]'s issues polled and carried on every reload (runtime/forge-wiring.ts).
  const forge = forgeRun
    ? new ForgeWiring(forgeRun, { repo, config, repoArg: o.repo, watch: Boolean(o.watch), print: say, clock: o.clock })
    : undefined;
  // With a database the table is the log; the run directory gets a copy when the run ends (pg-log.ts).
  const pgLog = seat ? await seat.openLog(runId, r.key, join(runDir, 'events.jsonl')) : undefined;
  const jobs = seat && pgLog ? brokerFor(seat.db, pgLog, config) : undefined;
  const engine: Engine = new Engine({
    ...(pgLog ? { log: (clock: Clock) => pgLog.attach(clock) } : {}),
    ...(jobs ? { jobs } : {}),
    repo,
    runDir,
    runId,
    config,
    blocks,
    spine: r.spine,
    spineFile: SPINE_FILE,
    workers: r.workers,
    clock: o.clock,
    env: r.env,
    key: r.key,
    marker: r.marker,
    sandbox: r.sandbox.sandbox,
    print: say,
    onAppend:
      notifier || traces || forge?.watching
        ? (e) => {
            reporter.event(e);
            notifier?.event(e);
            traces?.event(e);
            forge?.event(e);
          }
        : reporter.event,
    report: renderReport,
    onOutput: reporter.output,
    watch: Boolean(o.watch),
    boot: r.boot,
    ...(r.remote && { remote: r.remote }),
    ...(forgeRun?.forge && { forge: forgeRun.forge }),
    consumed: r.consumed,
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
    return Promise.all([notifier?.close(), traces?.close(), forgeClosed]).then(() => undefined);
  });
}

/** The live board on a terminal; time-stamped lines anywhere else, or when asked for. */
function reporterFor(o: RunOptions, repo: string, runDir: string, blockFile: (id: string) => string | undefined): Reporter {
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
