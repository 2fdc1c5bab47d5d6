/**
 * The event types: one zod schema per dotted `type`, in one table. The log writer
 * validates every line against it and docs/EVENTS.md is rendered from it, so an event
 * cannot exist without a schema and a description.
 *
 * Every line carries `v` (schema version), `seq` (1, 2, … with no gaps), `ts` (ms since
 * the epoch, from the injected clock) and `type`. Block-scoped events carry `block`.
 *
 * Each type is one of three kinds (EVENT_KINDS):
 * - `input`: a fact from outside the decision step — a worker reply, a git or test
 *   observation, an operator answer. Replay feeds these back through the step.
 * - `decision`: what the pure step decided. Each one fully describes the effect it
 *   asks for, so resuming after a crash can find intents that have no outcome yet.
 * - `note`: bookkeeping that informs reports but drives no decision (usage, pids).
 */
import { z } from 'zod';
import { FAILURE_CAUSES, RESTATABLE_KINDS, TURN_KINDS } from './roles.ts';
import { ESCALATION, HANDLERS } from '../spine/spine.ts';

const trouble = z.enum(Object.keys(ESCALATION) as [keyof typeof ESCALATION, ...(keyof typeof ESCALATION)[]]);
const handler = z.enum(Object.keys(HANDLERS) as [keyof typeof HANDLERS, ...(keyof typeof HANDLERS)[]]);

export const EVENT_VERSION = 2;

const block = z.string().describe('the block id');
const sha = z.string().regex(/^[0-9a-f]{40}$/);
const role = z.enum(['builder', 'reviewer', 'architect', 'operator']);

const fact = z.strictObject({
  name: z.string(),
  ok: z.boolean(),
  evidence: z.string(),
});
export type Fact = z.infer<typeof fact>;

/** Path in the shared git directory → a short digest of what is there (engine/git/admin.ts). */
const gitFiles = z.record(z.string(), z.string());

const blockInfo = z.strictObject({
  id: z.string(),
  title: z.string(),
  depends_on: z.array(z.string()),
  priority: z.number(),
  criteria: z.array(z.string()),
  digest: z.string(),
});
export type BlockInfo = z.infer<typeof blockInfo>;

const testRun = z.strictObject({
  exit: z.number().int().nullable(),
  timed_out: z.boolean(),
  log: z.string().describe('path of the saved output, relative to the run directory'),
  tail: z.string().describe('the last lines of the output'),
});
export type TestRun = z.infer<typeof testRun>;

/** The table. Keys are the dotted types; each schema holds the fields beyond v/seq/ts/type. */
export const EVENT_SCHEMAS = {
  // ---- run ----
  'run.started': z
    .strictObject({
      run: z.string(),
      version: z.string(),
      trunk: z.string(),
      trunk_sha: sha,
      main_status: z.string().describe('porcelain status of the main checkout at start'),
      max_parallel: z.number().int().positive(),
      architect: z.boolean().describe('whether an architect worker is configured'),
      liveness: z
        .strictObject({
          probe_wait_ms: z.number().int(),
          extension_ms: z.number().int(),
          max_extensions: z.number().int(),
          reissues: z.number().int(),
        })
        .describe("the liveness numbers in force: the spine's, with config overrides"),
      watch: z.boolean(),
      pid: z.number().int(),
      budgets: z
        .strictObject({
          block_usd: z.number().optional(),
          block_tokens: z.number().int().optional(),
          run_usd: z.number().optional(),
        })
        .optional()
        .describe('the [budgets] in force; absent or empty: no limit'),
      config_digest: z
        .string()
        .optional()
        .describe('sha256 of .tron/config.toml as the run read it: the next start sees whether it changed while this run ran'),
      marker: z
        .string()
        .optional()
        .describe(
          'TRON_RUN_MARKER: in the environment of every worker and test process of the run; recovery kills only a process that carries it',
        ),
    })
    .describe('input: the engine started a run, holds the log, and observed trunk.'),
  'register.loaded': z
    .strictObject({ blocks: z.array(blockInfo) })
    .describe('input: the block register as read from .tron/blocks/ (at start, and on every change in --watch).'),
  'block.recovered': z
    .strictObject({
      block,
      phase: z
        .string()
        .describe('where the block resumes: landed, abandoned, parked, pending (re-dispatched from trunk), review, merge or wrap'),
      detail: z.string(),
      sha: sha.optional().describe('landed: the landed sha; review/merge/wrap: the attested sha'),
      attempt: z.number().int().min(0),
      base: sha.optional(),
      patch_id: z.string().optional(),
      turns: z.record(z.string(), z.number().int()).describe('turns used per session, so a resumed session continues its numbering'),
      architect_calls: z.number().int().min(0),
      rounds: z.strictObject({ build: z.number().int(), review: z.number().int(), merge: z.number().int() }),
      reason: z.string().optional(),
      trouble: trouble.optional(),
      page: z.boolean().describe('parked without its page having been sent: send it now'),
      summary: z.string().optional(),
      answered_at: z.number().int().optional().describe('written_at of the last operator answer acted on: older answers are stale'),
      since: z
        .number()
        .int()
        .optional()
        .describe('ms since the epoch when the block entered this phase, when it resumes in the phase it had: ages count across runs'),
    })
    .describe(
      "input: at boot, where a block of an earlier run resumes, from that run's log and from git (refs/tron/landed/<id> is the record of what landed).",
    ),
  'recovery.started': z
    .strictObject({ previous: z.string().nullable(), torn: z.boolean().describe('the previous log had a torn last line, set aside') })
    .describe('input: boot recovery read the previous run; the block.recovered events that follow say where each block resumes.'),
  'recovery.finished': z
    .strictObject({ answers: z.number().int().describe('operator answers found waiting in .tron/inbox/') })
    .describe('input: boot is over (recovery applied, waiting answers read); dispatching starts.'),
  'worker.killed': z
    .strictObject({ block, session: z.string(), pid: z.number().int(), start_time: z.string(), run: z.string() })
    .describe('note: at boot, a worker process an earlier run started and never saw end was killed (matched by pid and start time).'),
  'lock.cleared': z
    .strictObject({ block, file: z.string(), detail: z.string() })
    .describe(
      'note: at boot, a git lock file on a ref only the engine writes (or taken by a landing the previous run died in the middle of) was removed.',
    ),
  'inbox.consumed': z
    .strictObject({ file: z.string() })
    .describe('note: an operator answer file was moved out of .tron/inbox/ into the run directory.'),
  'inbox.refused': z
    .strictObject({ file: z.string(), block: z.string().optional(), reason: z.string() })
    .describe(
      'note: a file in .tron/inbox/ was not acted on — not written by `tron answer` (no valid signature), unreadable, stale, or for a block this run does not have — and was moved to answers/refused/ in the run directory.',
    ),
  'log.foreign': z
    .strictObject({
      run: z.string().describe('the run whose log it is'),
      lines: z.array(z.number().int()).describe('line numbers set aside; empty when the whole log was'),
      detail: z.string(),
    })
    .describe(
      "note: at boot, lines of the previous run's log that tron did not write (they do not follow its signature chain) were set aside and not acted on.",
    ),
  'landed.untrusted': z
    .strictObject({ block, sha, reason: z.string(), kept: z.string().describe('where the ref was moved: refs/tron/untrusted/<id>-<n>') })
    .describe(
      'note: at boot, a refs/tron/landed/<id> that is not on trunk, or whose landing no run log records, was not believed: it was moved aside and the block is built.',
    ),
  'worker.spared': z
    .strictObject({ block, session: z.string(), pid: z.number().int(), start_time: z.string(), reason: z.string() })
    .describe(
      "note: at boot, a process recorded as a worker matched by pid and start time but did not carry the run's marker: it is not tron's, and was left alone.",
    ),
  'run.stopping': z
    .strictObject({ signal: z.string() })
    .describe('input: SIGINT or SIGTERM: no new dispatches; running turns are stopped and recorded, then the run finishes.'),
  'run.failed': z
    .strictObject({
      detail: z.string().describe('what failed, one line'),
      after: z.string().describe('the decision whose effect failed, and the block it was about'),
    })
    .describe('input: an effect failed in a way the engine cannot recover from in this run; decide ends the run with exit 1.'),
  'run.finished': z
    .strictObject({
      reason: z.enum(['done', 'signal', 'error', 'budget']),
      exit: z.number().int(),
      landed: z.array(z.string()),
      parked: z.array(z.string()),
      abandoned: z.array(z.string()),
      detail: z.string().optional(),
    })
    .describe('decision: the run ended; the log is closed.'),

  // ---- build: worktree and turns ----
  'worktree.requested': z
    .strictObject({
      block,
      attempt: z.number().int().positive(),
      base: sha.describe('trunk as the engine left it: the new branch starts here'),
    })
    .describe(
      'decision: give the block a fresh worktree on tron/<id> from the current trunk (preserving earlier unverified work as an orphan branch).',
    ),
  'worktree.ready': z
    .strictObject({
      block,
      attempt: z.number().int().positive(),
      base: sha,
      path: z.string(),
      orphan: z.string().optional(),
      git_files: gitFiles.optional().describe("the shared git directory's config, hooks and info files as the attempt began"),
    })
    .describe('input: the worktree exists at `base`; `orphan` names the branch earlier work was preserved on.'),
  'block.dispatched': z
    .strictObject({
      block,
      role,
      session: z.string(),
      turn: z.number().int().positive(),
      kind: z.enum(TURN_KINDS),
      phase: z.string(),
      attempt: z.number().int().positive(),
      expect: z.array(z.string()).describe('the words legal in this turn'),
      sha: sha.optional().describe('review: the attested sha the checkout is pinned to; challenge: the sha whose facts held'),
      restating: z.enum(RESTATABLE_KINDS).optional().describe('restate turns: the kind of turn being restated'),
    })
    .describe('decision: a worker turn was issued for a block.'),
  'reply.received': z
    .strictObject({
      block,
      role,
      session: z.string(),
      turn: z.number().int().positive(),
      ok: z.boolean(),
      reply: z.string().optional(),
      failure: z.string().optional(),
      detail: z.string().optional().describe("a failed turn: what happened, ending with the worker's own last meaningful line"),
      cause: z
        .enum(FAILURE_CAUSES)
        .optional()
        .describe(
          'a failed turn whose worker named why: its login or key was refused (auth), its endpoint unreachable (network), its quota spent (quota)',
        ),
      stdout_tail: z.string().optional().describe('a failed turn: the last 2000 characters the worker printed on stdout'),
      stderr_tail: z.string().optional().describe('a failed turn: the last 2000 characters the worker printed on stderr'),
    })
    .describe('input: a worker turn ended: its raw reply, or why the turn failed.'),
  'worker.unavailable': z
    .strictObject({
      block: block.describe('the block whose failed turn showed it'),
      role: z.enum(['builder', 'reviewer', 'architect']),
      cause: z.enum(FAILURE_CAUSES),
      detail: z.string(),
    })
    .describe(
      "decision: the role's worker failed twice in a row with the same cause; its turns are held (turn.held) until the operator answers a block paged about it.",
    ),
  'turn.held': z
    .strictObject({
      block,
      role: z.enum(['builder', 'reviewer', 'architect']),
      session: z.string(),
      turn: z.number().int().positive(),
      kind: z.enum(TURN_KINDS),
      phase: z.string(),
      attempt: z.number().int().positive(),
      expect: z.array(z.string()),
      sha: sha.optional(),
      restating: z.enum(RESTATABLE_KINDS).optional(),
    })
    .describe(
      'decision: a turn for a worker that is unavailable was not issued; it is issued as block.dispatched, unchanged, once the operator answers.',
    ),
  'reply.accepted': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), word: z.string(), payload: z.record(z.string(), z.unknown()) })
    .describe('decision: the gateway read exactly one legal >> line.'),
  'reply.refused': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), kind: z.string(), message: z.string() })
    .describe('decision: the reply was uninterpretable (or the turn failed); it is never guessed at.'),

  // ---- the truth gate ----
  'facts.requested': z
    .strictObject({
      block,
      purpose: z.enum(['gate', 'merge']),
      base: sha,
      trunk_sha: sha.describe('trunk as the engine left it when the facts were requested'),
    })
    .describe('decision: derive the facts at the branch head — commits, trunk untouched, clean worktree, tests.'),
  'facts.observed': z
    .strictObject({
      block,
      purpose: z.enum(['gate', 'merge']),
      base: sha,
      head: sha,
      commits: z.number().int(),
      trunk_sha: sha.nullable(),
      main_status: z.string(),
      clean: z.boolean(),
      status: z.string(),
      tests: testRun.nullable().describe('null when the tests were not run because an earlier fact failed'),
      patch_id: z.string(),
      fast_forward: z.boolean().describe('trunk is an ancestor of head'),
      git_files: gitFiles.optional().describe("the shared git directory's config, hooks and info files now"),
      engine_files: z
        .array(z.string())
        .optional()
        .describe('.tron/config.toml and block files in the main checkout that differ from what the engine loaded'),
      engine_diff: z.array(z.string()).optional().describe("the branch's own changes under .tron/, as `<status> <path>`"),
    })
    .describe('input: what the engine itself observed in git and from the test command.'),
  'gate.passed': z
    .strictObject({ block, sha, facts: z.array(fact) })
    .describe('decision: every fact of the truth gate held at this sha; it is now the attested sha.'),
  'gate.failed': z
    .strictObject({ block, sha: sha.optional(), purpose: z.enum(['gate', 'merge', 'evidence']), facts: z.array(fact) })
    .describe('decision: a fact of the truth gate failed; the block goes back to its phase with the failing fact stated, or escalates.'),
  'block.phase': z
    .strictObject({ block, from: z.string(), to: z.string(), on: z.string() })
    .describe('decision: the block moved along a transition of the spine.'),

  // ---- merge and land ----
  'merge.queued': z.strictObject({ block }).describe('decision: the block waits for the engine-wide MERGE lock.'),
  'merge.locked': z
    .strictObject({ block, sha, base: sha.optional().describe("the block's base, for the patch id of the attested sha") })
    .describe('decision: the block holds the MERGE lock; the engine checks whether its attested sha fast-forwards trunk.'),
  'merge.observed': z
    .strictObject({ block, trunk_sha: sha, sha, fast_forward: z.boolean(), patch_id: z.string() })
    .describe('input: trunk as found under the lock, and whether the attested sha fast-forwards it.'),
  'merge.unlocked': z.strictObject({ block }).describe('decision: the MERGE lock was released.'),
  'land.intent': z
    .strictObject({ block, sha, from: sha })
    .describe('decision: fast-forward trunk from `from` to `sha` and create refs/tron/landed/<id>, in one ref transaction.'),
  'block.landed': z
    .strictObject({ block, sha, from: sha })
    .describe('input: trunk was fast-forwarded to the block head, with refs/tron/landed/<id>, in one ref transaction.'),
  'land.refused': z
    .strictObject({ block, actual: sha.nullable(), detail: z.string() })
    .describe('input: the ref transaction was refused (trunk was not where the engine left it); nothing changed.'),
  'test.requested': z.strictObject({ block, sha }).describe('decision: run the test command on trunk at the landed sha, once more.'),
  'trunk.tested': z
    .strictObject({ block, sha, ok: z.boolean(), tests: testRun })
    .describe('input: the result of the test command on trunk.'),

  // ---- wrap ----
  'wrap.requested': z
    .strictObject({
      block,
      summary: z.string().describe("what the block's record keeps: the builder's summary, or its title and landed sha"),
    })
    .describe('decision: remove the worktree and the branch (or preserve it), record the summary.'),
  'block.wrapped': z
    .strictObject({ block, orphan: z.string().optional(), summary: z.string() })
    .describe('input: the worktree is gone; the branch was deleted, or preserved as `orphan` when it held commits not on trunk.'),

  // ---- exception spine ----
  'escalation.raised': z
    .strictObject({
      block,
      trouble,
      detail: z.string(),
      handler,
      sha: sha.optional().describe('trunk_touched: the foreign trunk sha'),
    })
    .describe('decision: a block entered (or moved along) the exception spine; names the trouble and the handler it goes to.'),
  'page.sent': z
    .strictObject({ block, page: z.string(), reason: z.string(), command: z.string().optional() })
    .describe('input: the operator was paged (console, pages.md, page_command).'),
  'operator.answered': z
    .strictObject({
      block,
      word: z.string(),
      payload: z.record(z.string(), z.unknown()),
      file: z.string(),
      trunk_sha: sha,
      written_at: z.number().int().optional().describe('when `tron answer` wrote it (ms since the epoch)'),
    })
    .describe('input: an operator answer was read from .tron/inbox/.'),
  'block.parked': z
    .strictObject({ block, reason: z.string() })
    .describe('decision: the block waits for the operator (or for a dependency that will not land).'),
  'block.abandoned': z.strictObject({ block, reason: z.string() }).describe('decision: the block was given up.'),

  // ---- liveness: talk before you page ----
  'timer.fired': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), timer: z.enum(['overrun']), elapsed_ms: z.number().int() })
    .describe('input: a turn ran past its budget (or past an extension).'),
  'worker.overran': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), elapsed_ms: z.number().int() })
    .describe('decision: the turn overran; probe the worker for signs of life before anything else.'),
  'worker.probed': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), alive: z.boolean(), signs: z.array(z.string()) })
    .describe('input: what the probe saw over the probe wait: cpu, output, worktree changes, progress — or silence.'),
  'worker.extended': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), extension_ms: z.number().int(), count: z.number().int() })
    .describe('decision: the worker showed life; its turn gets a bounded extension.'),
  'turn.reissued': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), reason: z.string() })
    .describe('decision: the silent turn is stopped (its process group killed) and issued again as the next turn of the same session.'),
  'run.heartbeat': z
    .strictObject({ running: z.number().int().describe('turns in flight'), parked: z.number().int() })
    .describe('note: the engine is alive (--watch), at a modest interval.'),

  // ---- notes ----
  'worker.spawned': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), pid: z.number().int(), start_time: z.string() })
    .describe(
      "note: a worker process, or the engine's own test run (session tests:…, turn 0), started; recovery kills it by pid and start time if it outlives the run.",
    ),
  'worker.exited': z
    .strictObject({
      block,
      session: z.string(),
      turn: z.number().int(),
      pid: z.number().int(),
      code: z.number().int().nullable(),
      signal: z.string().nullable(),
    })
    .describe('note: a worker process (or test run) ended.'),
  'budget.exceeded': z
    .strictObject({
      scope: z.enum(['block', 'run']),
      block: z.string().optional().describe('scope block: the block over its budget'),
      limit: z.string().describe('the budget crossed, as configured: "block_usd = 0.5"'),
      spent_usd: z.number(),
      spent_tokens: z.number().int(),
    })
    .describe(
      'decision: a block or the run spent past its [budgets] limit. A block: its running turn is stopped and the operator is paged with the spend. The run: no new turn starts, running turns are stopped, and the run ends with exit 3.',
    ),
  'usage.recorded': z
    .strictObject({
      block,
      role,
      session: z.string(),
      turn: z.number().int().positive(),
      model: z.string().describe('the model the worker named; for a CLI that names none, its -m/--model argument'),
      input_tokens: z.number().int().min(0).describe('prompt tokens not read from a cache (cache writes included)'),
      cached_tokens: z.number().int().min(0).describe('prompt tokens read from a cache'),
      output_tokens: z.number().int().min(0),
      cost_usd: z
        .number()
        .min(0)
        .optional()
        .describe('what the tokens cost: as the worker reported it, or priced from [prices] in config.toml; absent when neither says'),
      priced_by: z.enum(['worker', 'prices']).optional().describe('where cost_usd comes from'),
    })
    .describe(
      'input: tokens and cost of one model call (openai) or of one CLI turn, per model (command). The report totals them per block, role and run; budgets fold them the same way.',
    ),
  'worker.usage': z
    .strictObject({
      block,
      role,
      session: z.string(),
      model: z.string(),
      prompt_tokens: z.number().int(),
      completion_tokens: z.number().int(),
      total_tokens: z.number().int(),
    })
    .describe(
      'note: token usage of one model call, as runs recorded it before usage.recorded replaced it; still read by tron report (prompt tokens as input, no cost).',
    ),
  'worker.retry': z
    .strictObject({
      block,
      role,
      session: z.string(),
      attempt: z.number().int(),
      status: z.number().int().optional(),
      delay_ms: z.number().int(),
      error: z.string(),
    })
    .describe('note: a transient model API failure, retried after a delay.'),
} as const satisfies Record<string, z.ZodObject>;

export type EventType = keyof typeof EVENT_SCHEMAS;
export type EventKind = 'input' | 'decision' | 'note';

/** The kind of every type, read from the first word of its description. */
export function eventKind(type: EventType): EventKind {
  const description = EVENT_SCHEMAS[type].description ?? '';
  const kind = description.slice(0, description.indexOf(':'));
  if (kind !== 'input' && kind !== 'decision' && kind !== 'note') throw new Error(`event ${type} has no kind`);
  return kind;
}

/** Fields every line carries. */
export interface EventEnvelope {
  v: number;
  seq: number;
  ts: number;
}

export type EventOf<T extends EventType> = EventEnvelope & { type: T } & z.infer<(typeof EVENT_SCHEMAS)[T]>;
export type TronEvent = { [T in EventType]: EventOf<T> }[EventType];
/** An event before the writer stamps it with v, seq and ts. */
export type EventBody = { [T in EventType]: { type: T } & z.infer<(typeof EVENT_SCHEMAS)[T]> }[EventType];
export type BodyOf<T extends EventType> = { type: T } & z.infer<(typeof EVENT_SCHEMAS)[T]>;
