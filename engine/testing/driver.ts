/**
 * Drives the pure decision step by hand in tests: inputs in, decisions collected, the
 * state kept, plus shortcuts that walk a block to approval and land a stack.
 */
import { decide } from '../core/decide/decide.ts';
import { initialState, type EngineState } from '../core/state.ts';
import { loadSpine } from '../spine/load.ts';
import { type BodyOf, EVENT_VERSION, type EventBody, type TronEvent } from '../core/events.ts';

export const ctx = { spine: loadSpine(), testCommand: 'node test.js' };
export const sha = (n: number) => n.toString(16).padStart(40, '0');

/** How a Driver's run starts: slots, --watch, [merge] and [budgets] as run.started records them. */
export interface BootOptions {
  maxParallel?: number;
  watch?: boolean;
  merge?: { batch: number; verify_trunk: boolean; gather?: boolean; speculate?: boolean };
  budgets?: { block_usd?: number; block_tokens?: number; run_usd?: number };
  /** [forge], as run.started records it (land = "pr": PR mode). */
  forge?: {
    repo: string;
    land: 'push' | 'pr';
    merge?: 'push' | 'queue';
    require_human_approval: boolean;
    retries: number;
    backoff_ms: number;
  };
}

/** Feeds inputs through the pure step, collecting every decision. */
export class Driver {
  state: EngineState = initialState();
  seq = 0;
  readonly decisions: EventBody[] = [];
  feed(body: EventBody): EventBody[] {
    const e = { ...body, v: EVENT_VERSION, seq: ++this.seq, ts: this.seq * 1000 } as TronEvent;
    const out = decide(this.state, e, ctx);
    this.state = out.state;
    this.seq += out.decisions.length;
    this.decisions.push(...out.decisions);
    return out.decisions;
  }
  /** Starts a run with these blocks: run.started, register.loaded, recovery.finished. */
  boot(blocks: Array<{ id: string; depends_on?: string[]; priority?: number }>, opts: BootOptions = {}): EventBody[] {
    const { maxParallel = 4, watch = false } = opts;
    const liveness = { probe_wait_ms: 1000, extension_ms: 1000, max_extensions: 1, reissues: 1 };
    this.feed({
      type: 'run.started',
      run: 'r',
      version: '0',
      trunk: 'main',
      trunk_sha: sha(1),
      main_status: '',
      max_parallel: maxParallel,
      architect: false,
      liveness,
      watch,
      pid: 1,
      ...(opts.merge ? { merge: opts.merge } : {}),
      ...(opts.budgets ? { budgets: opts.budgets } : {}),
      ...(opts.forge ? { forge: opts.forge } : {}),
    });
    this.feed({
      type: 'register.loaded',
      blocks: blocks.map((b) => ({
        id: b.id,
        title: b.id,
        depends_on: b.depends_on ?? [],
        priority: b.priority ?? 0,
        criteria: ['works'],
        digest: b.id,
      })),
    });
    return this.feed({ type: 'recovery.finished', answers: 0 });
  }
  /** Walks one block from worktree to an approved, attested head `head`. */
  approve(id: string, head: string, base = sha(1)): EventBody[] {
    const session = `${id}.${this.state.blocks.get(id)!.attempt}.builder`;
    this.feed({ type: 'worktree.ready', block: id, attempt: this.state.blocks.get(id)!.attempt, base, path: id });
    this.feed({ type: 'reply.received', block: id, role: 'builder', session, turn: 1, ok: true, reply: '>>DONE' });
    this.observe(id, head);
    this.feed({
      type: 'reply.received',
      block: id,
      role: 'builder',
      session,
      turn: 2,
      ok: true,
      reply: '>>CONFIRMED {"evidence":{"c1":"here"}}',
    });
    return this.feed({
      type: 'reply.received',
      block: id,
      role: 'reviewer',
      session: `${id}.1.reviewer`,
      turn: 1,
      ok: true,
      reply: '>>APPROVE',
    });
  }
  /** Answers the block's pending turn with `reply`. */
  answer(id: string, reply: string): EventBody[] {
    const w = this.state.blocks.get(id)!.waiting;
    if (w.on !== 'turn') throw new Error(`${id} waits on ${w.on}, not on a turn`);
    return this.feed({ type: 'reply.received', block: id, role: w.turn.role, session: w.turn.session, turn: w.turn.turn, ok: true, reply });
  }
  /** What the engine observes after DONE or MERGED: every fact green at `head` (patch id 'p'), but for the `facts` given. */
  observe(id: string, head: string, facts: Partial<BodyOf<'facts.observed'>> = {}): EventBody[] {
    const b = this.state.blocks.get(id)!;
    return this.feed({
      type: 'facts.observed',
      block: id,
      purpose: 'gate',
      base: b.base ?? sha(1),
      head,
      commits: 1,
      trunk_sha: this.state.trunkSha!,
      main_status: '',
      clean: true,
      status: '',
      tests: GREEN,
      patch_id: 'p',
      fast_forward: true,
      ...facts,
    });
  }
  /** Lands the stack in flight, whose blocks all sit on trunk as they are, with a green test at its top. */
  landStack(heads: Record<string, string>): EventBody[] {
    const stack = this.state.lane.stack!;
    const trunk = stack.trunk;
    let onto = trunk;
    const results = stack.asked.map((id) => {
      const r = { block: id, outcome: 'fast_forward' as const, onto, sha: heads[id]!, patch_before: 'p', patch_after: 'p' };
      onto = heads[id]!;
      return r;
    });
    const rebased = this.feed({ type: 'rebase.done', stack: stack.id, trunk_sha: trunk, results });
    const top = heads[stack.asked.at(-1)!]!;
    // A block on trunk as it is, found green by its own gate, lands without a candidate test.
    if (rebased.some((e) => e.type === 'candidate.requested'))
      this.feed({ type: 'candidate.tested', stack: stack.id, sha: top, blocks: [...stack.asked], ok: true, tests: GREEN });
    const out: EventBody[] = [];
    for (const id of stack.asked) out.push(...this.feed({ type: 'block.landed', block: id, sha: heads[id]!, from: trunk, top }));
    return out;
  }
}

export const GREEN = { exit: 0, timed_out: false, log: 'l', tail: '' };
