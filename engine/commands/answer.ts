/**
 * `tron answer BLOCK '>>WORD {…}'`: the operator's reply to a page. The answer is checked
 * against the glossary for the operator role and against the block's state; a bad one is
 * refused (exit 2) and nothing is written. A good one lands in `.tron/inbox/`, where a
 * running engine reads it at once, or the next `tron start` does.
 *
 * The block's state comes from where the run lives: with `[cluster] database` (or
 * `TRON_DATABASE_URL`) the repository's runs in the table — a live run's lines are only
 * there — else the latest run directory. The inbox is this host's: answer on the engine's.
 */
import { blockedBy, blockerWords } from '../core/blocked.ts';
import { resolve } from 'node:path';
import { InputError, type Problem } from '../core/errors.ts';
import { loadRegister } from '../project/register.ts';
import { parseAnswer, writeAnswer } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';
import { foldRun, latestRun } from '../log/runs.ts';
import type { Clock } from '../os/clock.ts';
import { readLock } from '../log/lockfile.ts';
import { join } from 'node:path';
import { hostname } from 'node:os';
import { DatabaseRun, databaseToRead } from '../log/db-read.ts';
import { apply, type EngineState, initialState } from '../core/state.ts';

/** The latest run's state and whether its engine runs: from the repository's database, or its run directories. */
async function latestState(
  repo: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<{ state: EngineState | undefined; running: string | undefined; elsewhere?: string }> {
  const source = databaseToRead({ repo, repoGiven: true, env });
  if (source === undefined) {
    const run = latestRun(repo);
    const engine = readLock(join(repo, '.tron', 'engine.lock'));
    return { state: run ? foldRun(run) : undefined, running: engine && `the running engine (pid ${engine.pid})` };
  }
  const run = await DatabaseRun.open(source).catch((err: unknown) => {
    if (err instanceof InputError && err.problems[0]?.code === 'TRON_NO_RUN') return undefined;
    throw err;
  });
  if (run === undefined) return { state: undefined, running: undefined };
  try {
    const state = (await run.events()).reduce(apply, initialState());
    const leader = state.finished ? undefined : await run.leader();
    // The lease's holder is `<host> pid <pid>` (log/lease.ts): an engine on another host reads its own inbox, not this one's.
    const host = leader?.holder.replace(/ pid \d+$/, '');
    return {
      state,
      running: leader && `the running engine (${leader.holder}, generation ${leader.generation})`,
      ...(leader && host !== hostname() ? { elsewhere: leader.holder } : {}),
    };
  } finally {
    await run.end();
  }
}

export async function answerCommand(opts: {
  repo: string;
  block: string | undefined;
  line: string | undefined;
  clock: Clock;
  print: (line: string) => void;
  /** Where TRON_DATABASE_URL is read (default: none). */
  env?: Readonly<Record<string, string | undefined>>;
}): Promise<number> {
  const repo = resolve(opts.repo);
  if (!opts.block || !opts.line) {
    throw new InputError([
      { code: 'TRON_USAGE', path: 'tron answer', message: `name the block and the answer: tron answer BLOCK '>>RETRY {"guidance":"…"}'` },
    ]);
  }
  // Every fault of the answer at once: the block, its words, and the block's state.
  const problems: Problem[] = [];
  const { blocks } = loadRegister(repo);
  const known = blocks.some((b) => b.id === opts.block);
  if (!known)
    problems.push({
      code: 'TRON_ANSWER_BLOCK',
      path: opts.block,
      message: `no block "${opts.block}" in .tron/blocks/; answer one of: ${blocks.map((b) => b.id).join(', ') || '(none)'}`,
    });
  try {
    parseAnswer(opts.block, opts.line);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    problems.push(...err.problems);
  }
  const { state, running, elsewhere } = known ? await latestState(repo, opts.env ?? {}) : { state: undefined, running: undefined };
  const phase = state?.blocks.get(opts.block)?.phase;
  const blocker = state ? blockedBy(state, opts.block) : undefined;
  if (known && (phase !== 'parked' || blocker?.is === 'parked')) {
    // A block waiting on a parked dependency moves when that dependency does: say which one to answer.
    const message = blocker
      ? `${opts.block} is blocked: it ${blockerWords(blocker)}${blocker.is === 'parked' ? `; answer ${blocker.dependency} instead` : ''} (see tron status)`
      : `${opts.block} is ${phase ?? 'not started'}, not parked; only a parked block takes an operator answer (see tron status)`;
    problems.push({ code: 'TRON_ANSWER_NOT_PARKED', path: opts.block, message });
  }
  if (problems.length > 0) throw new InputError(problems);
  if (elsewhere !== undefined)
    throw new InputError([
      {
        code: 'TRON_ANSWER_ELSEWHERE',
        path: opts.block,
        message: `the engine running this run leads from ${elsewhere}, which reads answers from its own .tron/inbox/: run this tron answer on that host`,
      },
    ]);
  const file = writeAnswer(repo, opts.block, opts.line, opts.clock, repoKey(repo, { create: true }).key);
  opts.print(
    running
      ? `tron answer: ${opts.block} answered (${file}); ${running} reads it now`
      : `tron answer: ${opts.block} answered (${file}); the next \`tron start\` reads it`,
  );
  return 0;
}
