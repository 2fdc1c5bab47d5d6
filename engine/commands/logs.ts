/**
 * `tron logs [-f] [BLOCK]`: what the workers are saying, live.
 *
 * With BLOCK: every turn of that block in the run, in order — a header naming the turn,
 * then its output as the worker wrote it (`<runDir>/turns/<block>/…`, written as it
 * arrives, so a running turn shows what it has said so far), and between the turns each
 * failed gate of the block, as the console told it (the failing tests' own lines, the
 * log's path). `-f` keeps following: the running turn's file as it grows, then each next
 * turn, until the run finishes.
 *
 * Without BLOCK: the run's events told as readable lines — the same lines `tron start`
 * prints (engine/render/narrate.ts) — and with `-f`, as they are appended.
 *
 * The run is the latest of the repository (for BLOCK: the latest in which the block had
 * a turn), or the one `--run` names by id or directory.
 */
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Clock, sleep, systemClock } from '../os/clock.ts';
import type { EventOf, TronEvent } from '../core/events.ts';
import { InputError } from '../core/errors.ts';
import { parseEventLine } from '../log/eventlog-line.ts';
import { isHolderAlive, readLock } from '../log/lockfile.ts';
import { NOTE_MARK, outputRest, outputStep, type StreamedOutput, turnLogPath, wholeCharacters } from '../log/turn-log.ts';
import { runDirs, selectRun } from '../log/run-select.ts';
import { DatabaseRun, type DatabaseSource, databaseToRead, latestRunWithTurn } from '../log/db-read.ts';
import { Narrator, clockTime, stampLines } from '../render/narrate.ts';

export interface LogsOptions {
  repo: string;
  /** Show this block's turns; without it, narrate the run's events. */
  block?: string;
  follow?: boolean;
  /** A run id (or run directory); the latest run when absent. */
  run?: string;
  /** Whole lines (headers, narration). */
  print: (line: string) => void;
  /** Raw worker output, exactly as written. */
  write: (text: string) => void;
  /** Stops following (Ctrl-C, tests). */
  signal?: AbortSignal;
  /** --database: read the run from tron's database (any host); --run is then a run id. */
  database?: string;
  /** Whether --repo was given: with --database, it narrows the runs to that repository's. */
  repoGiven?: boolean;
  /** Where TRON_DATABASE_URL is read (default: none). */
  env?: Readonly<Record<string, string | undefined>>;
  /** How often a follower looks for more (ms). */
  pollMs?: number;
  /** Times a follower's looks (the system's by default). */
  clock?: Clock;
}

/** The events appended to a log since the last read: complete lines only, checked like any reader's. */
class LogTail {
  private offset = 0;
  private seq = 0;
  private rest = '';
  constructor(readonly file: string) {}

  read(): TronEvent[] {
    if (!existsSync(this.file)) return [];
    const text = this.rest + readFrom(this.file, this.offset, (n) => (this.offset += n));
    const lines = text.split('\n');
    this.rest = lines.pop() ?? '';
    const out: TronEvent[] = [];
    for (const line of lines) {
      const parsed = parseEventLine(line, ++this.seq);
      if (!parsed.ok) throw new Error(`${this.file}:${this.seq}: ${parsed.reason}`);
      out.push(parsed.event);
    }
    return out;
  }
}

/** The bytes of `file` from `offset` on, as text; `advance` learns how many were read. */
function readFrom(file: string, offset: number, advance: (n: number) => void): string {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    return '';
  }
  if (size <= offset) return '';
  const buf = Buffer.alloc(size - offset);
  const fd = openSync(file, 'r');
  try {
    const n = readSync(fd, buf, 0, buf.length, offset);
    const end = wholeCharacters(buf, n);
    advance(end);
    return buf.subarray(0, end).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** Whether the run's writer is still at work (it holds the run's events.lock). */
function writerAlive(runDir: string): boolean {
  const holder = readLock(join(runDir, 'events.lock'));
  return holder !== undefined && isHolderAlive(holder);
}

/** Where the command reads the run: its events, whether its writer is still at work, and where its turns' output is. */
interface RunReader {
  /** The events appended since the last read. */
  read(): Promise<TronEvent[]>;
  writerAlive(): Promise<boolean>;
  /** How messages name the run. */
  label: string;
  /** The run directory on this host (turn output, the narrator's paths); undefined when this host has none. */
  runDir: string | undefined;
  /** The end of a turn's output that a `tron agent` ran, from the database (for a turn whose file is not on this host). */
  agentTurnOutput?(seq: number): Promise<{ output: string; worker: string } | undefined>;
  /** A turn on an agent as it runs: its output notes after `after`, and its result's end once it ended (db-read.ts). */
  agentTurnProgress?: DatabaseRun['agentTurnProgress'];
  end(): Promise<void>;
}

function pickRun(o: LogsOptions, repo: string): string {
  if (o.block && !o.follow && o.run === undefined) {
    // The latest run in which the block had a turn: its output is what there is to show.
    const had = runDirs(repo).findLast((d) =>
      new LogTail(join(d, 'events.jsonl')).read().some((e) => e.type === 'block.dispatched' && e.block === o.block),
    );
    if (had) return had;
  }
  return selectRun(repo, o.run);
}

function fileReader(o: LogsOptions, repo: string): RunReader {
  const runDir = pickRun(o, repo);
  const tail = new LogTail(join(runDir, 'events.jsonl'));
  return {
    read: async () => tail.read(),
    writerAlive: async () => writerAlive(runDir),
    label: runDir,
    runDir,
    end: async () => undefined,
  };
}

/**
 * The run in the database: its committed lines, read as the file's. The writer is at work
 * while the run has not finished and an engine holds the repository's lease. The turns'
 * output is where the engine wrote it: shown when this host holds the run directory.
 */
async function databaseReader(o: LogsOptions, repo: string, source: DatabaseSource): Promise<RunReader> {
  // As from the run directories: for BLOCK, the latest run in which the block had a turn.
  const had = o.block && !o.follow && o.run === undefined ? await latestRunWithTurn(source, o.block) : undefined;
  const run = await DatabaseRun.open(source, o.run ?? had);
  let seq = 0;
  const local = join(repo, '.tron', 'runs', run.at.run);
  return {
    read: async () => {
      const events = await run.eventsAfter(seq);
      seq = events.at(-1)?.seq ?? seq;
      return events;
    },
    writerAlive: async () => (await run.leader()) !== undefined,
    label: run.label,
    runDir: source.repository !== undefined && existsSync(local) ? local : undefined,
    agentTurnOutput: (at) => run.agentTurnOutput(at),
    agentTurnProgress: (at, after) => run.agentTurnProgress(at, after),
    end: () => run.end(),
  };
}

export async function logsCommand(o: LogsOptions): Promise<number> {
  const repo = resolve(o.repo);
  const source = databaseToRead({
    repo,
    repoGiven: o.repoGiven ?? true,
    ...(o.database !== undefined ? { database: o.database } : {}),
    ...(o.run !== undefined ? { run: o.run } : {}),
    env: o.env ?? {},
  });
  const reader = source ? await databaseReader(o, repo, source) : fileReader(o, repo);
  try {
    return await follow(o, repo, reader);
  } finally {
    await reader.end();
  }
}

/** A turn's end as its agent sent it with its result, under a line naming the agent. */
function endOfTurn(worker: string, output: string): string {
  return `${NOTE_MARK}run on ${worker}; the end of its output (the whole stays on that host)\n${output}${output.endsWith('\n') ? '' : '\n'}`;
}

type TurnProgress = NonNullable<Awaited<ReturnType<DatabaseRun['agentTurnProgress']>>>;

async function follow(o: LogsOptions, repo: string, reader: RunReader): Promise<number> {
  const { runDir } = reader;
  const pollMs = o.pollMs ?? 200;
  const stopped = () => o.signal?.aborted === true;
  let finished = false;
  let last = false;

  if (!o.block) {
    const narrator = new Narrator({ repo, ...(runDir !== undefined ? { runDir } : {}) });
    for (;;) {
      for (const e of await reader.read()) {
        if (e.type === 'run.finished') finished = true;
        for (const line of narrator.lines(e)) o.print(stampLines(e.ts, line));
      }
      if (!o.follow || finished || stopped() || last) return 0;
      // One more read after the writer is gone, for what it appended last.
      if (!(await reader.writerAlive())) last = true;
      await sleep(o.clock ?? systemClock, pollMs, { keepAlive: true });
    }
  }

  const block = o.block;
  let known = false;
  // The block's turns and failed gates, in the order they happened.
  const shown: Array<EventOf<'block.dispatched'> | { gate: string[]; ts: number }> = [];
  // The console's telling of a failed gate: the failing tests and the log's path.
  const narrator = new Narrator({ repo, ...(runDir !== undefined ? { runDir } : {}) });
  let current: { file: string; offset: number } | undefined;
  // A turn running on an agent, followed through the database from a host without its file.
  let remote: { seq: number; after: number; streamed: StreamedOutput | undefined } | undefined;
  let turnsSeen = 0;
  const write = (parts: Array<string | Buffer>) => {
    for (const part of parts) o.write(typeof part === 'string' ? part : part.toString('utf8'));
  };
  const drainRemote = async (read?: TurnProgress): Promise<void> => {
    if (!remote) return;
    const at = remote;
    const progress = read ?? (await reader.agentTurnProgress!(at.seq, at.after));
    if (!progress) return;
    for (const n of progress.notes) {
      const step = outputStep(progress.worker ?? 'an agent', at.streamed, n);
      write(step.write);
      at.streamed = step.now;
      at.after = n.id;
    }
    if (!progress.done) return;
    remote = undefined;
    const { output, outputAt, attempt } = progress.done;
    if (output === null) o.print("(the turn's output is on the engine's host: tron logs there shows it)");
    else if (at.streamed && at.streamed.attempt === attempt && outputAt !== undefined) write(outputRest(output, at.streamed, outputAt));
    else o.write(`${at.streamed ? '\n' : ''}${endOfTurn(progress.worker ?? 'an agent', output)}`);
  };
  const drain = async () => {
    await drainRemote();
    if (!current) return;
    const text = readFrom(current.file, current.offset, (n) => (current!.offset += n));
    if (text) o.write(text);
  };
  for (;;) {
    for (const e of await reader.read()) {
      if (e.type === 'register.loaded' && e.blocks.some((b) => b.id === block)) known = true;
      if (e.type === 'block.dispatched' && e.block === block) shown.push(e);
      const told = narrator.lines(e);
      if (e.type === 'gate.failed' && e.block === block) shown.push({ gate: told, ts: e.ts });
      if (e.type === 'run.finished') finished = true;
    }
    // Show every turn in order; all but the newest are over.
    while (shown.length > 0) {
      await drain();
      const t = shown.shift()!;
      if ('gate' in t) {
        o.print(`── ${block} · gate failed · ${clockTime(t.ts)} ──`);
        for (const line of t.gate) o.print(line);
        current = undefined;
        continue;
      }
      o.print(`── ${block} · ${t.role} · ${t.kind} · ${t.session} turn ${t.turn} · ${clockTime(t.ts)} ──`);
      const file = runDir === undefined ? undefined : turnLogPath(runDir, block, t.session, t.turn);
      if (file !== undefined && existsSync(file)) current = { file, offset: 0 };
      else {
        current = undefined;
        // Not on this host: a turn an agent runs sends its output to the database as it comes, and its end with its result.
        const progress = file === undefined ? await reader.agentTurnProgress?.(t.seq, 0) : undefined;
        // Queued, or on an agent (an agent's name starts so: agent.ts), or ended with its end: followed there.
        const onAgent =
          progress && (progress.done ? progress.done.output !== null : progress.worker === null || progress.worker.startsWith('agent '));
        if (progress && onAgent) {
          remote = { seq: t.seq, after: 0, streamed: undefined };
          await drainRemote(progress);
          turnsSeen += 1;
          continue;
        }
        const sent = await reader.agentTurnOutput?.(t.seq);
        if (sent) o.write(endOfTurn(sent.worker, sent.output));
        else if (file === undefined) o.print("(the turn's output is on the engine's host: tron logs there shows it)");
        // A file not made yet: the turn's first words are on their way (followed below).
        else current = { file, offset: 0 };
      }
      turnsSeen += 1;
    }
    await drain();
    if (!o.follow || finished || stopped() || last) break;
    if (!(await reader.writerAlive())) last = true;
    await sleep(o.clock ?? systemClock, pollMs, { keepAlive: true });
  }
  if (!known && turnsSeen === 0) {
    throw new InputError([
      { code: 'TRON_USAGE', path: block, message: `no block "${block}" in run ${reader.label}; \`tron status\` lists the blocks` },
    ]);
  }
  if (turnsSeen === 0) o.print(`${block}: no turn yet in run ${reader.label}`);
  return 0;
}
