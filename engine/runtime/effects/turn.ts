/**
 * Worker turns (see engine/core/decide/turns.ts for what is decided). A dispatched turn
 * is a job whose request holds the prompt's variables as the engine saw them when it
 * decided: another block landing while the turn waits for its review checkout changes
 * nothing it says. The job makes the turn's working folder (the worktree, a review
 * checkout pinned to the attested sha, or the repository), renders the prompt, runs the
 * worker, and reports its reply — or its failure — as `reply.received`.
 *
 * The decisions that stop turns (a parked or abandoned block, a spent run budget, a
 * re-issued turn) act through the turn table.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventBody, EventOf } from '../../core/events.ts';
import type { WorkerRole } from '../../core/roles.ts';
import * as git from '../../git/index.ts';
import { TurnLog } from '../../log/turn-log.ts';
import type { TurnObserver } from '../../workers/adapter.ts';
import { boundedTail } from '../../workers/output.ts';
import { costOf } from '../../workers/prices.ts';
import { type EffectContext, effect, errorLine } from './context.ts';
import { promptVars } from './prompt-vars.ts';
import { type PromptName, renderPrompt } from './prompts.ts';

/** A turn's job: the decision, and what its prompt and the run's liveness numbers were when it was made. */
export interface TurnRequest {
  decision: EventOf<'block.dispatched'>;
  prompt: { name: PromptName; vars: Record<string, string> };
  /** The sha a reviewer reads (the attested sha, or the one the decision names). */
  sha?: string;
  /** The block's base, for a review's diffstat. */
  base?: string;
  /** Where the engine last left trunk: a `tron agent` that holds it needs no fetch of trunk (engine/commands/agent.ts). */
  trunk?: string;
  criteria: string[];
  /** The run's liveness numbers: the adapter's own timeout is a backstop behind them. */
  liveness: { extensionMs: number; maxExtensions: number; probeWaitMs: number };
}

export const turn = effect({
  where: 'queue',
  request: (e: EventOf<'block.dispatched'>, at): TurnRequest => {
    const s = at.state;
    const b = s.blocks.get(e.block)!;
    const prompt = promptVars(s, e, at.blocks.get(e.block), { diffstat: '', history: at.history });
    const { extensionMs, maxExtensions, probeWaitMs } = s.liveness;
    const sha = e.sha ?? b.attested;
    return {
      decision: e,
      prompt,
      ...(sha ? { sha } : {}),
      ...(b.base ? { base: b.base } : {}),
      ...(s.trunkSha ? { trunk: s.trunkSha } : {}),
      criteria: [...b.info.criteria],
      liveness: { extensionMs, maxExtensions, probeWaitMs },
    };
  },
  run: (c, r) => runTurn(c, r),
  // The turn ran in the worker's folder, with the worker's process: its failure is the turn's.
  onFailure: (r, error) => {
    const e = r.decision;
    const detail = `the turn could not be carried out: ${errorLine(error)}`;
    return { type: 'reply.received', block: e.block, role: e.role, session: e.session, turn: e.turn, ok: false, failure: 'crash', detail };
  },
});

async function runTurn(c: EffectContext, r: TurnRequest): Promise<EventBody> {
  const e = r.decision;
  const worker = c.workers[e.role as WorkerRole];
  const base = { type: 'reply.received' as const, block: e.block, role: e.role, session: e.session, turn: e.turn };
  if (!worker) return { ...base, ok: false, failure: 'crash', detail: `no [workers.${e.role}] is configured` };
  // The review checkout and the diffstat are independent: made at once. The review
  // checkout is the reviewer's to write: one that cannot be made again is this turn's
  // failure, decided like any failed turn — never the run's end.
  let cwd: string;
  let diffstat: string;
  try {
    [cwd, diffstat] = await Promise.all([
      e.role === 'builder'
        ? git.worktreePath(c.repo, e.block)
        : e.role === 'reviewer'
          ? c.queues.worktrees.run(() => git.createReviewCheckout(c.repo, { id: e.block, sha: r.sha! }))
          : c.repo,
      e.kind === 'review' && r.base && r.sha ? git.diffStat(c.repo, r.base, r.sha) : '',
    ]);
  } catch (error) {
    const detail = `the ${e.role}'s working folder could not be prepared: ${errorLine(error)}`;
    return { ...base, ok: false, failure: 'crash', detail };
  }
  const vars = e.kind === 'review' ? { ...r.prompt.vars, diffstat } : r.prompt.vars;
  const prompt = renderPrompt(r.prompt.name, vars, { role: e.role, phase: e.phase, expect: e.expect as never });
  transcript(c, `## ${e.block} · ${e.role} · ${e.session} · turn ${e.turn} · ${e.kind}\n\n### prompt\n\n${fence(prompt)}\n`);
  const budget = turnBudget(c, e);
  const live = r.liveness;
  // The adapter's own timeout is only a backstop: liveness decides before it fires.
  const backstop = budget + live.maxExtensions * live.extensionMs + (live.maxExtensions + 2) * live.probeWaitMs + 60_000;
  const signal = c.turns.start(e.block, e.session, e.turn, e.seq);
  c.turns.arm(e.session, e.turn, budget);
  const log = TurnLog.open(c.runDir, e);
  try {
    // Stopped while its folder was being made: the worker never starts.
    if (signal.aborted) return { ...base, ok: false, failure: 'aborted', detail: 'stopped before the worker began' };
    const outcome = await worker.runTurn(
      {
        role: e.role as WorkerRole,
        block: e.block,
        session: e.session,
        turn: e.turn,
        phase: e.phase,
        kind: e.kind,
        prompt,
        cwd,
        runDir: c.runDir,
        timeoutMs: backstop,
        signal,
        clock: c.clock,
        criteria: r.criteria,
        trunk: c.config.trunk,
        repo: c.repo,
        expect: e.expect,
      },
      observer(c, e, log),
    );
    const text = outcome.ok
      ? outcome.reply
      : `(turn failed: ${outcome.failure}) ${outcome.detail}${outcome.output ? `\n${outcome.output}` : ''}${outcome.stderr ? `\n(stderr)\n${outcome.stderr}` : ''}`;
    // A worker without a process printed nothing: its reply ends its log.
    if (!log.sawOutput) log.note(outcome.ok ? `reply:\n${outcome.reply}` : `turn failed: ${outcome.detail}`);
    transcript(c, `### reply (${e.block} · ${e.session} · turn ${e.turn})\n\n${fence(text)}\n`);
    if (outcome.ok) return { ...base, ok: true, reply: outcome.reply };
    return {
      ...base,
      ok: false,
      failure: outcome.failure,
      detail: outcome.detail,
      ...(outcome.cause ? { cause: outcome.cause } : {}),
      ...(outcome.output ? { stdout_tail: boundedTail(outcome.output) } : {}),
      ...(outcome.stderr ? { stderr_tail: boundedTail(outcome.stderr) } : {}),
    };
  } finally {
    log.close();
    c.turns.end(e.session, e.turn);
  }
}

/** How long a turn may run before it overruns: the config's turn timeout, or its phase's time when shorter. */
export function turnBudget(c: Pick<EffectContext, 'spine' | 'config'>, e: EventOf<'block.dispatched'>): number {
  const phaseTime = c.spine.phases.find((p) => p.name === e.phase)?.timeMs ?? Number.POSITIVE_INFINITY;
  return Math.min(c.config.timeouts.turnMs, phaseTime);
}

/** The turn's observer: process facts and usage become events; output and notes go to its log and the reporter. */
function observer(c: EffectContext, e: EventOf<'block.dispatched'>, log: TurnLog): TurnObserver {
  const at = { block: e.block, session: e.session };
  const where = { ...at, turn: e.turn };
  return {
    progress: (note) => {
      c.turns.tick(e.session);
      log.note(note);
      c.onOutput?.(where, note);
    },
    output: (_stream, chunk) => {
      log.output(chunk);
      c.onOutput?.(where, chunk.toString('utf8'));
    },
    spawned: (p) => c.note({ type: 'worker.spawned', ...at, turn: e.turn, pid: p.pid, start_time: p.startTime }),
    exited: (p) => c.note({ type: 'worker.exited', ...at, turn: e.turn, pid: p.pid, code: p.code, signal: p.signal }),
    usage: (u) => {
      c.turns.tick(e.session);
      const cost = costOf(u, c.config.prices ?? {});
      // An input: the fold keeps each block's and the run's spend.
      c.input({
        type: 'usage.recorded',
        ...at,
        role: e.role,
        turn: e.turn,
        model: u.model,
        input_tokens: u.inputTokens,
        cached_tokens: u.cachedTokens,
        output_tokens: u.outputTokens,
        ...(cost ? { cost_usd: cost.costUsd, priced_by: cost.by } : {}),
      });
    },
    retry: (r) =>
      c.note({
        type: 'worker.retry',
        ...at,
        role: e.role,
        attempt: r.attempt,
        ...(r.status !== undefined ? { status: r.status } : {}),
        delay_ms: Math.round(r.delayMs),
        error: r.error,
      }),
  };
}

/** A parked or abandoned block's turns stop now. */
export const stopBlockTurns = effect({
  run: (c, e: EventOf<'block.parked' | 'block.abandoned'>) => void c.turns.stopBlock(e.block, e.seq),
});

/** The run's budget is spent: no new turn starts; the ones running stop now, and the run ends once nothing is in flight. */
export const stopForBudget = effect({
  run: (c, e: EventOf<'budget.exceeded'>) => {
    // A block's own budget: its block.parked stops its turn.
    if (e.scope === 'run') c.turns.stopAll();
    return undefined;
  },
});

/** A re-issued turn: the old one stops (its late reply is refused by decide). */
export const stopReissued = effect({
  run: (c, e: EventOf<'turn.reissued'>) => void c.turns.stop((t) => t.session === e.session && t.turn === e.turn),
});

function transcript(c: EffectContext, text: string): void {
  appendFileSync(join(c.runDir, 'transcript.md'), `${text}\n`);
}

/** A Markdown fence longer than any backtick run inside `text`, so the text stays verbatim. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const f = '`'.repeat(longest + 1);
  return `${f}text\n${text}\n${f}`;
}
