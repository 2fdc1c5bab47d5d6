/**
 * `tron answer BLOCK '>>WORD {…}'`: the operator's reply to a page. The answer is checked
 * against the glossary for the operator role and against the block's state; a bad one is
 * refused (exit 2) and nothing is written. A good one lands in `.tron/inbox/`, where a
 * running engine reads it at once, or the next `tron start` does.
 */
import { blockedBy, blockerWords } from '../core/blocked.ts';
import { resolve } from 'node:path';
import { InputError } from '../core/errors.ts';
import { loadRegister } from '../project/register.ts';
import { writeAnswer } from '../runtime/inbox.ts';
import { repoKey } from '../log/keys.ts';
import { foldRun, latestRun } from '../log/runs.ts';
import type { Clock } from '../core/clock.ts';
import { readLock } from '../log/lockfile.ts';
import { join } from 'node:path';

export async function answerCommand(opts: {
  repo: string;
  block: string | undefined;
  line: string | undefined;
  clock: Clock;
  print: (line: string) => void;
}): Promise<number> {
  const repo = resolve(opts.repo);
  if (!opts.block || !opts.line) {
    throw new InputError([
      { code: 'TRON_USAGE', path: 'tron answer', message: `name the block and the answer: tron answer BLOCK '>>RETRY {"guidance":"…"}'` },
    ]);
  }
  const { blocks } = loadRegister(repo);
  if (!blocks.some((b) => b.id === opts.block)) {
    throw new InputError([
      {
        code: 'TRON_ANSWER_BLOCK',
        path: opts.block,
        message: `no block "${opts.block}" in .tron/blocks/; answer one of: ${blocks.map((b) => b.id).join(', ') || '(none)'}`,
      },
    ]);
  }
  const run = latestRun(repo);
  const state = run ? foldRun(run) : undefined;
  const phase = state?.blocks.get(opts.block)?.phase;
  const blocker = state ? blockedBy(state, opts.block) : undefined;
  if (phase !== 'parked' || blocker?.is === 'parked') {
    // A block waiting on a parked dependency moves when that dependency does: say which one to answer.
    const message = blocker
      ? `${opts.block} is blocked: it ${blockerWords(blocker)}${blocker.is === 'parked' ? `; answer ${blocker.dependency} instead` : ''} (see tron status)`
      : `${opts.block} is ${phase ?? 'not started'}, not parked; only a parked block takes an operator answer (see tron status)`;
    throw new InputError([{ code: 'TRON_ANSWER_NOT_PARKED', path: opts.block, message }]);
  }
  const file = writeAnswer(repo, opts.block, opts.line, opts.clock, repoKey(repo, { create: true }).key);
  const engine = readLock(join(repo, '.tron', 'engine.lock'));
  opts.print(
    engine
      ? `tron answer: ${opts.block} answered (${file}); the running engine (pid ${engine.pid}) reads it now`
      : `tron answer: ${opts.block} answered (${file}); the next \`tron start\` reads it`,
  );
  return 0;
}
