/**
 * `tron replay [RUN] [--repo DIR]`: re-drive the pure decision step from a recorded run and prove
 * it decides exactly what the run recorded. The run directory carries everything the
 * step needs: `events.jsonl`, the spine that drove the run (`workflow.toml`) and the
 * test command (`manifest.json`, `config.test`), so an old run replays against its own
 * spine, not today's. Without RUN, the repository's latest run is replayed.
 *
 * A log without `run.finished` was cut short (a crash, or a run still going): the
 * decisions of its last input may be partly written, so replay stops before that input
 * and says so instead of calling the missing tail a divergence.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';
import { readLog } from '../log/eventlog.ts';
import { eventKind, type TronEvent } from '../core/events.ts';
import { replay, type ReplayResult } from '../core/replay.ts';
import { parseSpine } from '../spine/parse.ts';
import { resolveRun } from '../log/runs.ts';
import { DatabaseRun, type DatabaseSource, databaseToRead } from '../log/db-read.ts';

export interface ReplayOutcome {
  result: ReplayResult;
  /** Events in the log. */
  events: number;
  /** The log has no run.finished: replay stopped before its last input. */
  truncated: boolean;
}

/** The inputs a log can be replayed on: all of it, or up to its last input when cut short. */
export function replayable(events: readonly TronEvent[]): { events: readonly TronEvent[]; truncated: boolean } {
  if (events.some((e) => e.type === 'run.finished')) return { events, truncated: false };
  const lastInput = events.findLastIndex((e) => eventKind(e.type) === 'input');
  return { events: events.slice(0, Math.max(0, lastInput)), truncated: true };
}

/** Replays a recorded run from its directory. */
export function replayRunDir(dir: string): ReplayOutcome {
  const runDir = resolve(dir);
  const { events } = readLog(join(runDir, 'events.jsonl'));
  const spineFile = join(runDir, 'workflow.toml');
  const manifestFile = join(runDir, 'manifest.json');
  return replayRun({
    events,
    spine: { path: spineFile, text: existsSync(spineFile) ? readFileSync(spineFile, 'utf8') : undefined },
    manifest: { path: manifestFile, text: existsSync(manifestFile) ? readFileSync(manifestFile, 'utf8') : undefined },
  });
}

/** A run's fixed file as replay reads it: where it is (for messages), and its text when it is there. */
interface RunFile {
  path: string;
  text: string | undefined;
}

/** Replays a run from its events, the spine that drove it and its manifest (a run directory's, or the database's). */
export function replayRun(o: { events: readonly TronEvent[]; spine: RunFile; manifest: RunFile }): ReplayOutcome {
  const { events } = o;
  const spineFile = o.spine.path;
  if (o.spine.text === undefined) {
    throw new InputError([
      { code: 'TRON_REPLAY_SPINE', path: spineFile, message: 'missing: a run directory holds the spine that drove it; replay needs it' },
    ]);
  }
  const { spine, problems } = parseSpine(o.spine.text, spineFile);
  if (!spine) throw new InputError(problems);
  const testCommand = readTestCommand(o.manifest);
  const usable = replayable(events);
  const result = replay(usable.events, { spine, ...(testCommand !== undefined ? { testCommand } : {}) });
  return { result, events: events.length, truncated: usable.truncated };
}

function readTestCommand({ path: file, text }: RunFile): string | undefined {
  if (text === undefined) {
    throw new InputError([
      {
        code: 'TRON_REPLAY_MANIFEST',
        path: file,
        message: 'missing: a run directory holds manifest.json with the test command; replay needs it',
      },
    ]);
  }
  let manifest: { config?: { test?: unknown } };
  try {
    manifest = JSON.parse(text) as typeof manifest;
  } catch (err) {
    throw new InputError([
      { code: 'TRON_REPLAY_MANIFEST', path: file, message: `not JSON (${(err as Error).message}); restore the file the run wrote` },
    ]);
  }
  const test = manifest.config?.test;
  return typeof test === 'string' ? test : undefined;
}

/** Replays the run the database holds (`--database`, or the repository's `[cluster] database`). */
async function replayFromDatabase(source: DatabaseSource, run: string | undefined): Promise<{ where: string; outcome: ReplayOutcome }> {
  const dbRun = await DatabaseRun.open(source, run);
  try {
    const [events, files] = await Promise.all([dbRun.events(), dbRun.files()]);
    const where = dbRun.label;
    const outcome = replayRun({
      events,
      spine: { path: `${where}: workflow.toml`, text: files['workflow.toml'] },
      manifest: { path: `${where}: manifest.json`, text: files['manifest.json'] },
    });
    return { where, outcome };
  } finally {
    await dbRun.end();
  }
}

/** Prints one line when identical (exit 0), or the first divergence (exit 1). */
export async function replayCommand(opts: {
  repo: string;
  run: string | undefined;
  print: (line: string) => void;
  /** --database; and whether --repo was given (it narrows --database to that repository). */
  database?: string;
  repoGiven?: boolean;
  env?: Readonly<Record<string, string | undefined>>;
}): Promise<number> {
  const source = databaseToRead({
    repo: resolve(opts.repo),
    repoGiven: opts.repoGiven ?? true,
    ...(opts.database !== undefined ? { database: opts.database } : {}),
    ...(opts.run !== undefined ? { run: opts.run } : {}),
    env: opts.env ?? {},
  });
  let runDir: string;
  let outcome: ReplayOutcome;
  if (source) {
    ({ where: runDir, outcome } = await replayFromDatabase(source, opts.run));
  } else {
    runDir = resolveRun(opts.repo, opts.run);
    outcome = replayRunDir(runDir);
  }
  const r = outcome.result;
  const cut = outcome.truncated ? ' (the log ends without run.finished: its last input was not replayed)' : '';
  if (r.ok) {
    opts.print(`replay: ${runDir}: ${r.inputs} inputs, ${r.decisions} decisions, identical${cut}`);
    return 0;
  }
  const d = r.divergence;
  opts.print(`replay: ${runDir}: diverged at seq ${d.seq}, deciding input seq ${d.input.seq} (${d.input.type})${cut}`);
  opts.print(`recorded: ${d.recorded ? JSON.stringify(d.recorded) : '(no decision)'}`);
  opts.print(`derived:  ${d.derived ? JSON.stringify(d.derived) : '(no decision)'}`);
  return 1;
}
