/**
 * The phase spine. `engine/workflow.toml` holds the pass spine (phases, gates, legal
 * words, transitions, budgets); `ESCALATION` below is the exception spine. Both are
 * parsed and linted here; docs/WORKFLOW.md and workflow/tron.bpmn are rendered from them.
 *
 * The types are the contract the driver, the docs and the BPMN generator share. This
 * file is pure data, so the decision step (engine/core/) can use it; the parser is
 * engine/spine/parse.ts, the named lint rules engine/spine/lint.ts, and
 * engine/spine/load.ts reads the file and refuses a spine with any problem.
 */
import type { Role } from '../core/roles.ts';

/** Engine-derived outcomes that can drive a transition besides a glossary word. */
export const SIGNALS = {
  'gate.failed': 'a fact of the gate failed at the head under test',
  landed:
    'the stack the block was in passed setup and the tests at its top, in a clean checkout of exactly that sha, and trunk was fast-forwarded to it in one ref transaction',
  'patch.changed': "bringing the branch up to date (the engine's rebase, or the builder's MERGED) changed its patch id",
  culprit: 'the stack was red, and bisection found that adding this block is what turned it red',
  wrapped: 'the worktree was removed and the branch deleted or preserved',
} as const;
export type Signal = keyof typeof SIGNALS;

export type GateKind = 'truth' | 'review' | 'merge' | 'wrap';

/**
 * The phases the engine's own code acts on by name. The spine may add phases of its own
 * (it is data), but it must define these — `tron lint` checks it (TRON_SPINE_PHASE_MISSING).
 */
export const ENGINE_PHASES = ['build', 'review', 'merge', 'wrap', 'landed', 'parked', 'abandoned'] as const;
export type EnginePhase = (typeof ENGINE_PHASES)[number];
/** Where a block can be: an engine phase, `pending` before its first dispatch, or a phase the spine adds. */
export type BlockPhase = EnginePhase | 'pending' | (string & {});

export interface Transition {
  /** A glossary word or a SIGNALS key. */
  on: string;
  to: string;
  when: string;
}

export interface Phase {
  name: string;
  title: string;
  description: string;
  gate?: GateKind;
  terminal: boolean;
  /** Attempts (gate failures, review rounds, merge re-checks) before escalation. */
  attempts?: number;
  /** Budget of one turn in this phase, ms. */
  timeMs?: number;
  words: Partial<Record<Role, string[]>>;
  transitions: Transition[];
}

export interface Liveness {
  probeWaitMs: number;
  extensionMs: number;
  maxExtensions: number;
  reissues: number;
}

export interface Spine {
  version: number;
  start: string;
  budgets: { architect: number };
  liveness: Liveness;
  /** In file order. */
  phases: Phase[];
}

/** The handlers of the exception spine, in the order a trouble may visit them. */
export const HANDLERS = {
  restate: 'the same worker session is asked once to restate its reply with exactly one >> line, quoting the reason',
  probe: 'the overrunning worker is probed for signs of life; life earns an extension',
  reissue: 'the silent turn is stopped (process group killed) and issued again, once',
  architect: 'the architect makes a typed choice: RETRY, PAGE or ABANDON',
  operator: 'the operator is paged and the block is parked until `tron answer`',
} as const;
export type Handler = keyof typeof HANDLERS;

/** What an architect or operator answer does to the block. */
export const OUTCOMES = {
  RETRY: { to: 'build', effect: 're-dispatched from trunk with the guidance in the builder prompt' },
  ABANDON: { to: 'abandoned', effect: 'abandoned with the reason; every dependent block is parked' },
  PAGE: { to: 'parked', effect: 'handed to the operator' },
} as const;

export interface EscalationRow {
  /** What went wrong, for docs and the escalation.raised event. */
  description: string;
  /** Handlers tried in order; a handler that cannot resolve it passes to the next. */
  handlers: readonly Handler[];
}

/**
 * The exception spine. Every stuck or uninterpretable signal is one of these troubles,
 * and is handled by its row, in order: never guessed at, never silently dropped.
 */
export const ESCALATION = {
  budget_exceeded: {
    description:
      'a block spent past its [budgets] limit (block_usd or block_tokens): its running turn is stopped and the operator gets the spend',
    handlers: ['operator'],
  },
  uninterpretable: {
    description: 'a reply the gateway refused: no >> line, several, an unknown or illegal word, a bad payload',
    handlers: ['restate', 'architect', 'operator'],
  },
  turn_failed: {
    description: 'a worker turn failed: non-zero exit, crash, step cap, API error',
    handlers: ['restate', 'architect', 'operator'],
  },
  blocked: {
    description: 'the builder answered BLOCKED',
    handlers: ['architect', 'operator'],
  },
  gate_budget: {
    description: "the truth gate failed more times than the build phase's attempt budget",
    handlers: ['architect', 'operator'],
  },
  review_budget: {
    description: "the reviewer asked for changes more times than the review phase's attempt budget",
    handlers: ['architect', 'operator'],
  },
  merge_failed: {
    description:
      "merge turns (a rebase that conflicts with trunk, a failed re-check after MERGED) ran past the merge phase's attempt budget",
    handlers: ['architect', 'operator'],
  },
  overrun: {
    description: 'a turn ran past its budget',
    handlers: ['probe', 'reissue', 'operator'],
  },
  trunk_touched: {
    description: 'trunk moved by anyone but the engine; no merge is dispatched until the operator answers',
    handlers: ['operator'],
  },
  remote_refused: {
    description:
      "the remote ([remote]) refused the landing push — authentication, a protected branch, a declining pre-receive hook — or stayed unreachable through every retry: the page quotes the remote's words and its TRON_REMOTE_… code; nothing lands until the operator answers",
    handlers: ['operator'],
  },
  trunk_red: {
    description:
      'the check of trunk ([merge] verify_trunk) failed at a landed sha that passed in the merge lane: the tests are not repeatable; the block stays landed, and the run cannot exit 0',
    handlers: ['operator'],
  },
  engine_files: {
    description:
      "the block's branch changes .tron/ (the engine's config or block files), or its block file changed while a run without --watch ran: only the operator can let that through",
    handlers: ['operator'],
  },
  architect_failed: {
    description: "the architect's own reply was uninterpretable, its turn failed, or its per-block budget is spent",
    handlers: ['operator'],
  },
  worktree_failed: {
    description:
      "the block's worktree or branch could not be made — a ref under tron/<id>, a folder or a worktree record in the way: git's words go to the operator, who clears it and answers RETRY; the other blocks go on",
    handlers: ['operator'],
  },
  worker_unavailable: {
    description:
      "a worker's turn failed the way its previous turn failed: its login or key refused, its endpoint unreachable, or its quota spent. Restating or consulting the architect cannot fix that, so the operator is paged at once with the worker's own words, and no turn of that worker starts until the operator answers",
    handlers: ['operator'],
  },
} as const satisfies Record<string, EscalationRow>;
export type Trouble = keyof typeof ESCALATION;
