/**
 * What the engine loop is given: the repository and its run, the config and spine, the
 * workers, and every outside thing it must not reach for itself — the clock, the
 * environment, the key, the sandbox, where notices and events go.
 */
import type { Clock } from '../os/clock.ts';
import type { RunLog } from '../log/run-log.ts';
import type { EventBody, TronEvent } from '../core/events.ts';
import type { WorkerRole } from '../core/roles.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import type { Spine } from '../spine/spine.ts';
import type { WorkerAdapter } from '../workers/adapter.ts';
import type { Sandbox } from '../workers/sandbox.ts';
import type { Remote } from '../git/remote.ts';
import type { JobBroker } from '../queue/job-queue.ts';
import type { Forge } from '../forge/forge.ts';

export interface EngineOptions {
  /**
   * The run's log, opened by the caller (the database's: engine/log/pg-log.ts), stamped by
   * the engine's clock; without it, the run directory's file.
   */
  log?: (clock: Clock) => RunLog;
  /** [cluster] database: turns and test runs go through the database's queue (engine/queue/job-queue.ts). */
  jobs?: JobBroker;
  repo: string;
  runDir: string;
  runId: string;
  config: Config;
  blocks: Block[];
  spine: Spine;
  spineFile: string;
  workers: Partial<Record<WorkerRole, WorkerAdapter>>;
  clock: Clock;
  env: Record<string, string | undefined>;
  /** The repository's key: signs the log, checks inbox answers (engine/log/keys.ts). */
  key: Buffer;
  /** TRON_RUN_MARKER of this run: in `env`, and so in every worker and test process. */
  marker?: string;
  /** Where the engine's test runs are confined; none unless given. */
  sandbox?: Sandbox;
  /** [remote], opened at start (engine/git/remote.ts): trunk is the remote's, and a landing is a push. */
  remote?: Remote;
  /** [forge], opened at start (engine/forge/session.ts): PR mode's pull requests and checks. */
  forge?: Forge;
  /** Notices that are not events (a problem with an answer file, a checkout left behind). */
  print: (line: string) => void;
  /** Sees every event right after it is appended: the console reporter, the live board. */
  onAppend?: (event: TronEvent) => void;
  /** Sees a worker's live output (and progress notes) as it arrives, after its turn log has it. */
  onOutput?: (at: { block: string; session: string; turn: number }, text: string) => void;
  watch: boolean;
  /** What boot recovery found (engine/runtime/recovery.ts), fed after the register. */
  boot?: EventBody[];
  /** Inbox files an earlier run already consumed (moved now, never answered twice). */
  consumed?: readonly string[];
  /** Renders report.md from the run's events when the run ends (the caller's renderer: render/ sits above the loop). */
  report?: (events: readonly TronEvent[]) => string;
  /** Test hook (TRON_CRASH_AFTER_EVENT, read once at start): die abruptly right after appending this seq. */
  crashAfter?: number;
  /** --watch: the interval of run.heartbeat notes. */
  heartbeatMs?: number;
  /** --watch: re-reads the register after a change under .tron/blocks/ (undefined when it has problems). */
  reloadBlocks?: () => Block[] | undefined;
}
