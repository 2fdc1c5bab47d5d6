/**
 * Planted bugs, to show the simulator finds what it claims to: each is a variant of the
 * pure core handed to the simulator through its seam (`Engine`: the decision step and the
 * recovery planning it drives), never an edit of the engine's files. Each names the
 * invariant that must catch it.
 */
import { decide } from '../../engine/core/decide/decide.ts';
import type { EventBody, TronEvent } from '../../engine/core/events.ts';
import { planRecovery } from '../../engine/core/recover.ts';
import { apply, type EngineState } from '../../engine/core/state.ts';
import type { Engine } from './run.ts';

export interface Mutation {
  name: string;
  about: string;
  /** The invariant that must catch it. */
  caughtBy: string;
  engine: Engine;
}

/** A step that decides `d` alone on `input`: the input folded, then `d`. */
function decidingOnly(state: EngineState, input: TronEvent, d: EventBody): { state: EngineState; decisions: EventBody[] } {
  return { state: apply(apply(state, input), { ...d, v: input.v, seq: input.seq + 1, ts: input.ts } as TronEvent), decisions: [d] };
}

/** A decision step whose decisions `change` rewrites; the state follows the rewritten decisions. */
function rewriting(change: (after: EngineState, decisions: EventBody[]) => EventBody[] | undefined): typeof decide {
  return (state, input, ctx) => {
    const out = decide(state, input, ctx);
    const changed = change(out.state, out.decisions);
    if (!changed) return out;
    let s = apply(state, input);
    for (const d of changed) s = apply(s, { ...d, v: input.v, seq: input.seq, ts: input.ts } as TronEvent);
    return { state: s, decisions: changed };
  };
}

export const MUTATIONS: readonly Mutation[] = [
  {
    name: 'land-without-candidate-test',
    about: 'the merge lane lands a stack as soon as it is rebased, without testing its top',
    caughtBy: 'trunk-tested-green',
    engine: {
      planRecovery,
      decide: rewriting((after, decisions) => {
        if (!decisions.some((d) => d.type === 'candidate.requested')) return undefined;
        return decisions.map((d) => {
          if (d.type !== 'candidate.requested') return d;
          const stack = after.lane.stack!;
          return { type: 'land.intent', stack: d.stack, sha: d.sha, from: after.trunkSha!, blocks: [...stack.entries], tested: 'lane' };
        });
      }),
    },
  },
  {
    name: 'forget-landed-on-recovery',
    about: 'recovery does not read refs/tron/landed/: a block the log does not show wrapped is built and landed again',
    caughtBy: 'lands-once',
    engine: {
      decide,
      planRecovery: (events, blocks, world) => planRecovery(events, blocks, { ...world, landedRefs: new Map() }),
    },
  },
  {
    name: 'parked-dependency-through',
    about: 'a block whose dependency is parked (not landed) is dispatched as if the dependency had landed',
    caughtBy: 'no-landing-past-dependency',
    engine: {
      planRecovery,
      decide: rewriting((after, decisions) => {
        if (!after.registered || after.finished || after.stopping !== undefined || after.index.active >= after.maxParallel)
          return undefined;
        for (const id of after.order) {
          const b = after.blocks.get(id)!;
          if (b.phase !== 'pending') continue;
          const deps = b.info.depends_on.map((d) => after.blocks.get(d)?.phase);
          if (deps.some((p) => p === 'parked') && deps.every((p) => p === 'parked' || p === 'landed')) {
            return [...decisions, { type: 'worktree.requested', block: id, attempt: b.attempt + 1, base: after.trunkSha! }];
          }
        }
        return undefined;
      }),
    },
  },
];

/**
 * PR mode's planted bug (kept out of MUTATIONS: the SIM templates cannot stage a forge, so
 * it is not written as a template): a landing whose required hosted check the forge
 * reported red lands all the same, as if tron's own green test were enough.
 */
export const LAND_PAST_RED_HOSTED_CHECK: Mutation = {
  name: 'land-past-red-hosted-check',
  about: 'in PR mode, a landing lands although the forge reported a required hosted check red on its sha',
  caughtBy: 'trunk-checks-green',
  engine: {
    planRecovery,
    decide: (state, input, ctx) => {
      const stack = state.lane.stack;
      const pr = stack?.step.at === 'forge' ? stack.step.pr : undefined;
      if (
        input.type !== 'pr.observed' ||
        !input.checks.some((c) => c.state === 'failure') ||
        !stack ||
        !pr ||
        stack.id !== input.stack ||
        pr.sha !== input.sha
      )
        return decide(state, input, ctx);
      const d: EventBody = {
        type: 'land.intent',
        stack: stack.id,
        sha: pr.sha,
        from: state.trunkSha!,
        blocks: [...pr.blocks],
        tested: pr.tested,
      };
      return decidingOnly(state, input, d);
    },
  },
};

/** A decision step that sees one more of a limit than the user configured (`limit` reads and writes it on the state). */
function beyond(limit: { get: (s: EngineState) => number; set: (s: EngineState, n: number) => EngineState }): typeof decide {
  return (state, input, ctx) => {
    // run.started sets the limit as the run configured it; every later step sees one more.
    if (input.type === 'run.started') return decide(state, input, ctx);
    const out = decide(limit.set(state, limit.get(state) + 1), input, ctx);
    return { ...out, state: limit.set(out.state, limit.get(state)) };
  };
}

/**
 * The limits the user configures, each broken by one (kept out of MUTATIONS: what they
 * break is a count, which a template's expectation does not show): caught in the CI range
 * by their invariants in simulator.test.ts.
 */
export const LIMIT_MUTATIONS: readonly Mutation[] = [
  {
    name: 'one-more-slot',
    about: 'the schedule starts a block when max_parallel blocks are already in build or review',
    caughtBy: 'within-parallelism',
    engine: { planRecovery, decide: beyond({ get: (s) => s.maxParallel, set: (s, n) => ({ ...s, maxParallel: n }) }) },
  },
  {
    name: 'one-more-in-the-stack',
    about: 'the merge lane stacks one block more than [merge] batch',
    caughtBy: 'within-batch',
    engine: { planRecovery, decide: beyond({ get: (s) => s.lane.batch, set: (s, n) => ({ ...s, lane: { ...s.lane, batch: n } }) }) },
  },
];

/** A decision step whose input `change` rewrites before deciding (the log keeps the input as it came). */
function misreading(change: (state: EngineState, input: TronEvent) => TronEvent): typeof decide {
  return (state, input, ctx) => decide(state, change(state, input), ctx);
}

/**
 * The rest of what tron promises, each broken on purpose (kept out of MUTATIONS, as the
 * limits are: what most break is a count, a replay or a pair of runs, which a template's
 * expectation does not show): caught in the CI range by their invariants in
 * simulator.test.ts. docs/evaluation.md has the table, promise by promise.
 */
export const PROMISE_MUTATIONS: readonly Mutation[] = [
  {
    name: 'answered-still-told-operator',
    about:
      "a parked block the operator answered RETRY, put back to pending for want of a slot, is still told to wait on the operator (the fold's bug the simulator found at seed 53)",
    caughtBy: 'waiting-told-true',
    engine: {
      planRecovery,
      decide: (state, input, ctx) => {
        const out = decide(state, input, ctx);
        const back = out.decisions.flatMap((d) => (d.type === 'block.phase' && d.from === 'parked' && d.to === 'pending' ? [d.block] : []));
        if (back.length === 0) return out;
        let blocks = out.state.blocks;
        for (const id of back) blocks = blocks.set(id, { ...blocks.get(id)!, waiting: { on: 'operator' } });
        return { ...out, state: { ...out.state, blocks } };
      },
    },
  },
  {
    name: 'restack-without-rebase',
    about: 'a landing refused because trunk moved is tried again with the new trunk as its lease, its stack not replayed onto it',
    caughtBy: 'trunk-linear',
    engine: {
      planRecovery,
      decide: (state, input, ctx) => {
        const stack = state.lane.stack;
        const moved = input.type === 'land.refused' ? input.actual : input.type === 'remote.moved' ? input.sha : undefined;
        if (
          moved == null ||
          !('stack' in input) ||
          !stack ||
          stack.id !== input.stack ||
          stack.step.at !== 'landing' ||
          moved === state.trunkSha
        )
          return decide(state, input, ctx);
        const landing = stack.step;
        const blocks = stack.entries.filter((e) => landing.blocks.includes(e.block));
        if (blocks.length === 0) return decide(state, input, ctx);
        const d: EventBody = {
          type: 'land.intent',
          stack: stack.id,
          sha: blocks.at(-1)!.sha,
          from: moved,
          blocks,
          tested: landing.tested,
        };
        return decidingOnly(state, input, d);
      },
    },
  },
  {
    name: 'changed-replay-as-clean',
    about: 'the merge lane takes a replay whose patch changed for a clean one: the block lands with a change its reviewer never saw',
    caughtBy: 'lands-what-was-reviewed',
    engine: {
      planRecovery,
      decide: misreading((_state, input) =>
        input.type === 'rebase.done'
          ? {
              ...input,
              results: input.results.map((r) =>
                r.outcome === 'changed' ? { ...r, outcome: 'clean' as const, patch_after: r.patch_before } : r,
              ),
            }
          : input,
      ),
    },
  },
  {
    name: 'person-closing-ignored',
    about: 'in PR mode, a pull request a person closed is read as open: the block lands against their word',
    caughtBy: 'closed-stays-closed',
    engine: {
      planRecovery,
      decide: misreading((_state, input) =>
        input.type === 'pr.observed'
          ? { ...input, pulls: input.pulls.map(({ words: _words, ...p }) => ({ ...p, state: 'open' as const })) }
          : input,
      ),
    },
  },
  {
    name: 'person-changes-ignored',
    about: "in PR mode, a person's requested changes are not read: the head they asked changes on lands",
    caughtBy: 'changes-honoured',
    engine: { planRecovery, decide: misreading((_state, input) => (input.type === 'pr.observed' ? { ...input, changes: [] } : input)) },
  },
  {
    name: 'budgets-unread',
    about: 'the schedule never reads [budgets]: a block past block_usd, or a run past run_usd, is given another turn',
    caughtBy: 'spend-within-budget',
    engine: {
      planRecovery,
      decide: (state, input, ctx) => {
        if (input.type === 'run.started') return decide(state, input, ctx);
        const out = decide({ ...state, budgets: {} }, input, ctx);
        return { ...out, state: { ...out.state, budgets: state.budgets } };
      },
    },
  },
  {
    name: 'facts-never-asked',
    about: "a builder's DONE moves the block on to its facts, but the request for them is never made",
    caughtBy: 'no-silent-stall',
    engine: {
      planRecovery,
      decide: rewriting((_after, decisions) =>
        decisions.some((d) => d.type === 'facts.requested') ? decisions.filter((d) => d.type !== 'facts.requested') : undefined,
      ),
    },
  },
  {
    name: 'test-again-instead-of-landing',
    about: 'a stack found green is tested again instead of landed, and again, for ever',
    caughtBy: 'terminates',
    engine: {
      planRecovery,
      decide: rewriting((_after, decisions) =>
        decisions.some((d) => d.type === 'land.intent')
          ? decisions.map((d) =>
              d.type === 'land.intent'
                ? { type: 'candidate.requested', stack: d.stack, sha: d.sha, blocks: d.blocks.map((b) => b.block) }
                : d,
            )
          : undefined,
      ),
    },
  },
  {
    name: 'state-beyond-the-log',
    about: 'the decision step lowers max_parallel in its own state, which no event records: the run decides what its log does not',
    caughtBy: 'replays',
    engine: {
      planRecovery,
      decide: (state, input, ctx) => {
        const out = decide(state, input, ctx);
        if (input.type !== 'recovery.finished') return out;
        return { ...out, state: { ...out.state, maxParallel: Math.max(1, out.state.maxParallel - 1) } };
      },
    },
  },
  {
    name: 'review-given-up-on-recovery',
    about: 'recovery gives up every block it finds in review: a crash changes which blocks land',
    caughtBy: 'crash-converges',
    engine: {
      decide,
      planRecovery: (events, blocks, world) => {
        const plan = planRecovery(events, blocks, world);
        return {
          ...plan,
          recovered: plan.recovered.map((r) => (r.phase === 'review' ? { ...r, phase: 'abandoned', detail: 'given up at recovery' } : r)),
        };
      },
    },
  },
  {
    name: 'no-transition-for-a-stopped-turn',
    about: 'the spine has no transition for the reply of a turn the engine stopped: the decision step throws',
    caughtBy: 'decides-every-input',
    engine: {
      planRecovery,
      decide: (state, input, ctx) => {
        if (input.type === 'reply.received' && input.failure === 'aborted')
          throw new Error(`no transition for ${input.type} (aborted) in ${input.block}`);
        return decide(state, input, ctx);
      },
    },
  },
];

/**
 * The cluster's planted bugs: each reverts one fix of issue 37 in what the database and
 * the processes around the engine do (cluster.ts RULES), or makes the engine read a job's
 * result blind — caught in the cluster runs by the invariant of the promise it breaks.
 */
export const CLUSTER_MUTATIONS: readonly Mutation[] = [
  {
    name: 'generation-unfenced',
    about: "the log's trigger is gone: a line of a replaced leader's generation is stored",
    caughtBy: 'stale-generation-never-writes',
    engine: { decide, planRecovery, cluster: { fenced: () => true } },
  },
  {
    name: 'attempt-unfenced',
    about: "tron_complete records a result whatever attempt reports it: a dead agent's late result is kept",
    caughtBy: 'stale-attempt-never-writes',
    engine: { decide, planRecovery, cluster: { completes: (job) => job.state !== 'dropped' } },
  },
  {
    name: 'results-read-blind',
    about: "the engine takes a job's result as it comes, not by its kind: what an agent slips in is appended",
    caughtBy: 'forged-never-read',
    engine: { decide, planRecovery, cluster: { readResult: (_decision, result) => result } },
  },
  {
    name: 'claim-unscoped',
    about: "tron_claim checks the role, not the repository: an agent runs another repository's job (issue 37's first fault)",
    caughtBy: 'own-repository-only',
    engine: { decide, planRecovery, cluster: { mayClaim: (pool, job) => pool.roles.includes(job.role) } },
  },
  {
    name: 'lease-loss-ignored',
    about: 'a leader woken after its lease was taken goes on with what it had in flight (issue 37: a paused leader never exits)',
    caughtBy: 'replaced-leader-stops',
    engine: { decide, planRecovery, cluster: { stopsOnLeaseLost: false } },
  },
  {
    name: 'standby-dies-on-restart',
    about: 'a waiting standby ends when the database restarts under it (issue 37: a standby dying on a database restart)',
    caughtBy: 'standby-rides-restart',
    engine: { decide, planRecovery, cluster: { standbyRidesRestart: false } },
  },
  {
    name: 'older-jobs-kept',
    about: "the next leader leaves the previous generation's jobs queued: agents carry out effects the current log never asked for",
    caughtBy: 'intent-before-effect',
    engine: { decide, planRecovery, cluster: { dropsOlderJobs: false } },
  },
];

export function mutation(name: string): Mutation {
  const all = [...MUTATIONS, LAND_PAST_RED_HOSTED_CHECK, ...LIMIT_MUTATIONS, ...PROMISE_MUTATIONS, ...CLUSTER_MUTATIONS];
  const m = all.find((x) => x.name === name);
  if (!m) throw new Error(`no mutation ${name}: ${all.map((x) => x.name).join(', ')}`);
  return m;
}
