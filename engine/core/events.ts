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
import { ANSWER_FILE, BLOCK_ID } from './names.ts';

const trouble = z.enum(Object.keys(ESCALATION) as [keyof typeof ESCALATION, ...(keyof typeof ESCALATION)[]]);
const handler = z.enum(Object.keys(HANDLERS) as [keyof typeof HANDLERS, ...(keyof typeof HANDLERS)[]]);

export const EVENT_VERSION = 2;

const block = z.string().describe('the block id');
/** A process on a `tron agent`'s host (its pool's name): its pid means nothing on the engine's, and recovery leaves it to the agent. */
const agent = z.string().optional().describe("the `tron agent` running the turn: the pid is on that agent's host");
const sha = z.string().regex(/^[0-9a-f]{40}$/);
/** An answer file's name in .tron/inbox/, as `tron answer` writes it: never a path of any other shape. */
const answerFile = z.string().regex(ANSWER_FILE).describe('the answer file, `<ms>-<block>.json` in .tron/inbox/');
const role = z.enum(['builder', 'reviewer', 'architect', 'operator']);
const stack = z.number().int().min(0).describe('the stack, numbered from 1 in each run (0: a landing logged before the merge lane)');
const stackEntry = z.strictObject({ block, sha: sha.describe("the block's own commit in the stack") });

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
  failures: z
    .string()
    .optional()
    .describe(
      "a failed run's failing tests, each by the runner's own lines, then the runner's summary; absent when tron does not recognise the runner's output",
    ),
  ms: z.number().int().min(0).optional().describe('how long it ran'),
  ran_on: z
    .string()
    .optional()
    .describe(
      'the `tron agent` that ran it (`[cluster] jobs = "agents"`), as it names itself; absent: the engine ran it in its own checkout',
    ),
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
      merge: z
        .strictObject({
          batch: z.number().int().positive(),
          verify_trunk: z.boolean(),
          gather: z
            .boolean()
            .optional()
            .describe(
              'a free lane waits for blocks past their build (being checked or reviewed) while its queue is short of a batch (absent: no)',
            ),
          speculate: z
            .boolean()
            .optional()
            .describe(
              'with gather: a free lane stacks the blocks being challenged or reviewed with those queued, and tests the stack while their turns run; it lands once each is approved at the sha stacked (absent: no)',
            ),
        })
        .optional()
        .describe(
          'the merge lane settings in force, from [merge] of the config (absent in logs of earlier versions: batch 8, no trunk check)',
        ),
      remote: z
        .strictObject({
          name: z.string(),
          url: z.string().describe('the push URL, without any user or password in it'),
          push_branches: z.boolean(),
          retries: z.number().int().min(0),
          backoff_ms: z.number().int().positive(),
        })
        .optional()
        .describe("[remote] in force: trunk is the remote's, and a landing is one atomic push (absent: trunk is local)"),
      forge: z
        .strictObject({
          repo: z.string(),
          land: z.enum(['push', 'pr']),
          merge: z.enum(['push', 'queue']).optional().describe("queue: trunk moves through the forge's merge queue (absent: push)"),
          required_checks: z
            .array(z.union([z.string(), z.strictObject({ name: z.string(), app: z.union([z.number(), z.string()]) })]))
            .optional()
            .describe("absent: the trunk branch protection's; a check with an app counts only from that app"),
          trusted: z
            .union([z.string(), z.array(z.string())])
            .optional()
            .describe('[forge] trusted: whose reviews, closings, labels and comments count (absent: "write")'),
          require_human_approval: z.boolean(),
          retries: z.number().int().min(0),
          backoff_ms: z.number().int().positive(),
        })
        .optional()
        .describe('[forge] in force (absent: none); with land = "pr" a landing waits for the hosted checks on its sha'),
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
      halts: z
        .boolean()
        .optional()
        .describe(
          'parked for a trunk touch: whether it still halts the merge lane — only the touch whose halt was in force when the previous run ended does (absent: it does)',
        ),
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
    .strictObject({ file: answerFile })
    .describe('note: an operator answer file was moved out of .tron/inbox/ into the run directory.'),
  'inbox.refused': z
    .strictObject({
      file: answerFile,
      block: z.string().regex(BLOCK_ID).optional().describe('the block the file names, when it is a block id'),
      reason: z.string(),
    })
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
      parked: z.array(z.string()).describe('left for the operator (or, after a stop, still under way); not the blocked ones'),
      abandoned: z.array(z.string()),
      blocked: z
        .array(z.strictObject({ block, by: block.describe('the dependency it waits on, which is parked, abandoned or blocked in turn') }))
        .optional()
        .describe('blocks waiting on a dependency that did not land: nothing for the operator to answer for them (absent when none)'),
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
  'worktree.failed': z
    .strictObject({ block, attempt: z.number().int().positive(), detail: z.string().describe("git's own words") })
    .describe(
      "input: the block's worktree or branch could not be made: something in its namespace (tron/<id>, .tron/worktrees/<id>) is in the way. The block's trouble, not the run's: the operator is paged.",
    ),
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
      setup: testRun
        .optional()
        .describe('the configured setup command, run before the tests; absent when none is configured or nothing was tested'),
      tests: testRun.nullable().describe('null when the tests were not run because an earlier fact (or setup) failed'),
      patch_id: z.string(),
      fast_forward: z.boolean().describe('trunk is an ancestor of head'),
      git_files: gitFiles.optional().describe("the shared git directory's config, hooks and info files now"),
      engine_files: z
        .array(z.string())
        .optional()
        .describe('.tron/config.toml and block files in the main checkout that differ from what the engine loaded'),
      engine_diff: z.array(z.string()).optional().describe("the branch's own changes under .tron/, as `<status> <path>`"),
      worktree: z
        .string()
        .optional()
        .describe(
          "what is wrong with the block's worktree when it could not be read, or its HEAD is not on its branch (the git error): the gate fails on it, and nothing else of the worktree was observed",
        ),
    })
    .describe(
      'input: what the engine itself observed in git, and from setup and the test command run in its own checkout of exactly `head` (never the worktree).',
    ),
  'gate.passed': z
    .strictObject({ block, sha, facts: z.array(fact) })
    .describe('decision: every fact of the truth gate held at this sha; it is now the attested sha.'),
  'gate.failed': z
    .strictObject({ block, sha: sha.optional(), purpose: z.enum(['gate', 'merge', 'evidence', 'lane']), facts: z.array(fact) })
    .describe(
      "decision: a fact of the truth gate failed (purpose lane: the block's addition turned the merge lane's stack red); the block goes back to its phase with the failing fact stated, or escalates.",
    ),
  'block.phase': z
    .strictObject({ block, from: z.string(), to: z.string(), on: z.string() })
    .describe('decision: the block moved along a transition of the spine.'),

  // ---- the merge lane ----
  'merge.queued': z
    .strictObject({ block })
    .describe(
      "decision: the approved block joins the merge lane's queue, to be stacked on trunk when the lane is free — or, stacked already while it was reviewed ([merge] speculate), joins its stack at the sha stacked.",
    ),
  'lane.stacked': z
    .strictObject({
      stack,
      trunk_sha: sha.describe('trunk, where the stack starts'),
      blocks: z
        .array(
          z.strictObject({
            block,
            sha: sha.describe('its approved head (for a block awaiting approval: the sha being challenged or reviewed)'),
            patch_id: z.string().optional().describe('the patch id the engine holds for it, which spares the rebase computing it again'),
          }),
        )
        .min(1),
      awaiting: z
        .array(block)
        .optional()
        .describe(
          '[merge] speculate: the blocks of the stack not yet approved — challenged or reviewed at the sha given, stacked before their verdict. The stack lands only once each is approved at that sha, and is given up when one is not (absent: none)',
        ),
    })
    .describe(
      "decision: the lane takes the first blocks of its queue (at most [merge] batch) as one stack on trunk: in its own checkout the engine replays each block's own commits onto the one before, with no worker (a rebase).",
    ),
  'rebase.done': z
    .strictObject({
      stack,
      trunk_sha: sha.describe('trunk as the engine found it (not where the stack starts: someone else moved it; nothing was replayed)'),
      results: z.array(
        z.strictObject({
          block,
          outcome: z
            .enum(['fast_forward', 'clean', 'changed', 'conflict'])
            .describe(
              'fast_forward: the head already sat on it; clean: replayed, same patch; changed: replayed, the patch changed; conflict: not replayable',
            ),
          onto: sha.describe('the commit it was replayed onto: trunk, or the block before it'),
          sha: sha.optional().describe('its commit after the replay (not for a conflict)'),
          patch_before: z.string().describe("the patch id of the block's own change as approved"),
          patch_after: z.string().optional().describe('the patch id after the replay'),
          files: z.array(z.string()).optional().describe('conflict: the paths that conflicted'),
        }),
      ),
    })
    .describe(
      'input: how each block of the stack replayed; fast_forward and clean blocks stay in the stack, each on the one before (a changed or conflicting one is left out, and the next goes on the one before it).',
    ),
  'candidate.requested': z
    .strictObject({ stack, sha: sha.describe('the top of the stack'), blocks: z.array(block).min(1).describe('the stack, bottom first') })
    .describe(
      "decision: test the top of the stack — setup and the test command in the engine's `_lane` checkout of exactly that sha. Green lands the whole stack; red is bisected.",
    ),
  'bisect.step': z
    .strictObject({
      stack,
      sha: sha.describe('the top of the prefix under test'),
      blocks: z.array(block).min(1).describe('the prefix, bottom first'),
      green: z.number().int().min(0).describe('the longest prefix known green (0: trunk)'),
      red: z.number().int().positive().describe('the shortest prefix known red'),
    })
    .describe(
      'decision: the stack was red: test a prefix halfway between the known green and red ones, to find the first block whose addition turned it red.',
    ),
  'candidate.tested': z
    .strictObject({
      stack,
      sha,
      blocks: z.array(block).min(1),
      ok: z.boolean(),
      setup: testRun.optional().describe('the configured setup command, when there is one'),
      tests: testRun.nullable().describe('null when setup failed'),
    })
    .describe("input: setup and the test command at a stack's top (or a prefix's), in a clean checkout of exactly that sha."),
  'land.intent': z
    .strictObject({
      stack,
      sha: sha.describe('the top of what lands'),
      from: sha.describe('trunk now: the compare-and-swap value'),
      blocks: z.array(stackEntry).min(1),
      attempt: z.number().int().min(2).optional().describe('[remote]: which try of the push this is (absent: the first)'),
      queued: z
        .boolean()
        .optional()
        .describe(
          '[forge] merge = "queue": the merge queue already moved the remote\'s trunk to `sha`; push only the landed refs, then move local trunk',
        ),
      tested: z
        .enum(['lane', 'gate'])
        .describe(
          'where `sha` passed setup and the tests in a clean checkout of exactly it: a candidate test in the lane, or — a block that sits on trunk as it is — its own gate',
        ),
    })
    .describe(
      "decision: in ONE ref transaction, fast-forward trunk from `from` to `sha`, create refs/tron/landed/<id> at each block's own commit and move its branch there.",
    ),
  'block.landed': z
    .strictObject({ block, sha: sha.describe("the block's own commit"), from: sha, top: sha.describe('trunk after the transaction') })
    .describe("input: the ref transaction went through: trunk is at `top`, and refs/tron/landed/<id> at the block's own commit."),
  'land.refused': z
    .strictObject({ stack, blocks: z.array(block), actual: sha.nullable(), detail: z.string() })
    .describe('input: the ref transaction was refused (trunk was not where the engine left it); nothing changed.'),
  // ---- the remote ([remote]) ----
  'remote.fetched': z
    .strictObject({
      stack,
      from: sha.describe('trunk where the stack was asked to start'),
      sha: sha.describe("the remote's trunk, fetched: local trunk and your checkout followed it there"),
    })
    .describe(
      "input: before stacking, the remote's trunk was fetched and had moved ahead (someone else pushed): local trunk and your checkout followed it, and the stack is built on it.",
    ),
  'remote.pushed': z
    .strictObject({
      stack,
      from: sha.nullable().describe("the remote's trunk the push expected (null: the remote had none)"),
      sha: sha.describe('the top: where the remote trunk is now'),
      blocks: z.array(stackEntry).min(1),
      found: z.boolean().optional().describe('the remote already held exactly this landing (a push whose answer was lost)'),
    })
    .describe(
      'input: the remote accepted the landing: its trunk is at `sha` and refs/tron/landed/<id> exists there for each block. Local trunk, the landed refs and your checkout follow (block.landed, one each).',
    ),
  'remote.moved': z
    .strictObject({
      stack,
      blocks: z.array(block),
      from: sha.describe('the trunk the push expected'),
      sha: sha.describe("the remote's trunk now: local trunk and your checkout followed it"),
      detail: z.string(),
    })
    .describe(
      "input: the landing push's lease was refused: someone else pushed to the remote's trunk. Nothing of the stack landed; local trunk followed the remote's, and the same blocks are stacked again on it, tested and pushed.",
    ),
  'remote.failed': z
    .strictObject({
      stack,
      op: z.enum(['fetch', 'push']),
      kind: z.enum(['transient', 'refused']).describe('transient: unreachable or no answer in time; refused: will not pass by itself'),
      reason: z.string().describe('timeout, unreachable, auth, protected, hook, rejected, missing or failed'),
      code: z.string().describe('the TRON_REMOTE_… problem a page names'),
      message: z.string().describe("the remote's own words (or git's)"),
      attempt: z.number().int().min(1).describe('which try of this stack’s push (or fetch) this was'),
    })
    .describe(
      'input: a network call to the remote failed; nothing changed there. A failed fetch lets the stack go on from local trunk (the push’s lease still guards it); a transient push failure is tried again after a backoff, a lasting one pages the operator with the remote’s words.',
    ),
  'remote.retry': z
    .strictObject({ stack, attempt: z.number().int().min(1), wait_ms: z.number().int().min(0) })
    .describe('decision: wait `wait_ms` ([remote] backoff, doubled at each attempt), then push the stack again.'),
  'remote.waited': z
    .strictObject({ stack, attempt: z.number().int().min(1) })
    .describe("input: the backoff before a push's next try has passed."),
  'remote.branch.pushed': z
    .strictObject({
      block,
      sha,
      ok: z.boolean(),
      detail: z.string().optional().describe('why not: the remote’s words, or a branch there tron did not put'),
    })
    .describe(
      "note: [remote] push_branches: the block's attested sha was pushed as `tron/<id>` on the remote, for teammates and other hosts to fetch (by lease: a branch there that tron did not put is never overwritten).",
    ),
  'remote.recovered': z
    .strictObject({ blocks: z.array(stackEntry), sha, detail: z.string() })
    .describe(
      'note: at boot, the remote already held a landing the previous run announced and never recorded (killed mid-push): local trunk and the landed refs were moved to match, so it is recognised, not pushed again.',
    ),
  'remote.followed': z
    .strictObject({
      from: sha.describe('local trunk before: behind the remote’s'),
      to: sha.describe('the remote’s trunk, where local trunk (and your checkout of it) now is'),
      blocks: z.array(stackEntry).describe('the landed refs made local: each block landed there, as the remote has it'),
      detail: z.string(),
    })
    .describe(
      'note: at boot, this clone lacked landings the remote holds — landings the run’s log records that it did not make (a standby on another host), or landings of blocks this clone never built (a teammate’s fresh clone, engine/runtime/landed-travel.ts): local trunk fast-forwarded to the remote’s and their landed refs were made local, so recovery finds those blocks landed instead of building them again.',
    ),
  'work.restored': z
    .strictObject({
      blocks: z.array(stackEntry).describe('each block and its attested sha, now its branch here'),
      detail: z.string(),
    })
    .describe(
      "note: at boot, this clone lacked the verified work of blocks the run's log has at review or merge (it did not make it: a standby on another host); the remote had it (`refs/tron/work/<id>` of the agents, or `tron/<id>` of push_branches), so each block's branch was made at its attested sha and it resumes there.",
    ),
  // ---- the forge ([forge] land = "pr") ----
  'pr.requested': z
    .strictObject({
      stack,
      sha: sha.describe('the top tron tested green: the sha the hosted checks must be green on'),
      blocks: z.array(stackEntry).min(1),
      tested: z.enum(['lane', 'gate']),
      attempt: z.number().int().min(1),
      queue: z
        .enum(['enqueue', 'watch'])
        .optional()
        .describe(
          '[forge] merge = "queue": enqueue — every check was green on `sha`: put the pull request in the merge queue at exactly `sha` (unless it is there); watch — it was put there: only read how it goes',
        ),
    })
    .describe(
      'decision: ([forge] land = "pr") push tron/<id> for each block at its commit of the landing, open or update its one pull request, and read the required hosted checks on `sha` and the reviews.',
    ),
  'pr.observed': z
    .strictObject({
      stack,
      sha,
      attempt: z.number().int().min(1),
      pulls: z.array(
        z.strictObject({
          block,
          number: z.number().int().positive(),
          url: z.string(),
          state: z.enum(['open', 'closed', 'merged']),
          words: z.string().optional().describe('closed by a person: their last comment on it'),
        }),
      ),
      checks: z.array(
        z.strictObject({
          name: z.string(),
          state: z.enum(['success', 'failure', 'pending', 'missing']),
          text: z.string().optional().describe("a red check's own words (its output, trimmed)"),
          url: z.string().optional(),
        }),
      ),
      changes: z
        .array(z.strictObject({ block, author: z.string(), notes: z.string() }))
        .describe('changes requested by a person on the pushed head'),
      approved: z.array(block).describe('blocks whose pull request a person approved'),
      queue: z
        .strictObject({
          state: z.enum(['queued', 'merged', 'removed']),
          commit: sha.optional().describe("merged: the queue's commit, on the remote's trunk"),
          tree: z
            .boolean()
            .optional()
            .describe("merged: whether that commit's tree is exactly the tree of `sha`, and its parent the trunk tron tested on"),
          reason: z.string().optional().describe('removed: why the queue took it out'),
        })
        .optional()
        .describe('[forge] merge = "queue", asked to enqueue or watch: where the pull request is in the merge queue'),
    })
    .describe(
      'input: the pull requests of a landing, their reviews, and the required hosted checks on its sha, as the forge reported them.',
    ),
  'pr.failed': z
    .strictObject({
      stack,
      attempt: z.number().int().min(1),
      kind: z.enum(['rate_limited', 'transient', 'auth', 'refused']),
      wait_ms: z.number().int().min(0).optional().describe('rate_limited: how long the forge asked tron to wait'),
      message: z.string(),
    })
    .describe("input: a call to the forge failed (or a push of a block's branch); nothing landed."),
  'pr.wait': z
    .strictObject({ stack, attempt: z.number().int().min(1), wait_ms: z.number().int().min(0), reason: z.string() })
    .describe('decision: wait `wait_ms` (checks still running, a rate limit, a 5xx backoff), then ask the forge again.'),
  'pr.waited': z
    .strictObject({ stack, attempt: z.number().int().min(1) })
    .describe('input: the wait before asking the forge again has passed.'),
  'issue.withdrawn': z
    .strictObject({
      block,
      issue: z.number().int().positive().describe("the block's issue on the forge"),
      action: z.enum(['closed', 'unlabelled']).describe('what a person did: closed the issue, or took the intake label off it'),
      by: z.string().optional().describe('who closed it, when the forge says'),
      words: z.string().optional().describe('their last comment on the issue'),
    })
    .describe(
      "input: ([intake]) a block's issue left the labelled list while the run went — a person closed it or removed the label (engine/forge/watch.ts); the block stops unless it landed or its landing is under way.",
    ),
  'lane.closed': z
    .strictObject({
      stack,
      landed: z.array(block),
      returned: z.array(block).describe('back to the front of the queue, in order, to be stacked again on the new trunk'),
      detail: z.string(),
    })
    .describe('decision: the stack is over — landed, bisected or given up — and the lane takes the next.'),
  'test.requested': z
    .strictObject({ block, sha })
    .describe(
      "decision: ([merge] verify_trunk) run setup and the tests once more on trunk at a landed top, in the engine's `_trunk` checkout, off the lane's path: red means the suite is not repeatable.",
    ),
  'trunk.tested': z
    .strictObject({ block, sha, ok: z.boolean(), tests: testRun })
    .describe('input: the result of the check of trunk (the tests, or setup when it failed).'),
  'merge.locked': z
    .strictObject({ block, sha, base: sha.optional() })
    .describe('note: legacy (logs of version 1): the block took the engine-wide MERGE lock, which the merge lane replaced.'),
  'merge.observed': z
    .strictObject({ block, trunk_sha: sha, sha, fast_forward: z.boolean(), patch_id: z.string() })
    .describe('note: legacy (logs of version 1): trunk as found under the MERGE lock.'),
  'merge.unlocked': z.strictObject({ block }).describe('note: legacy (logs of version 1): the MERGE lock was released.'),

  // ---- wrap ----
  'wrap.requested': z
    .strictObject({
      block,
      summary: z.string().describe("what the block's record keeps: the builder's summary, or its title and landed sha"),
    })
    .describe('decision: remove the worktree and the branch (or preserve it), record the summary.'),
  'block.wrapped': z
    .strictObject({
      block,
      orphan: z.string().optional(),
      summary: z.string(),
      leftover: z
        .string()
        .optional()
        .describe(
          'what of the worktree or branch could not be removed, and why (the block landed all the same; `tron clean` removes it later)',
        ),
    })
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
      file: answerFile,
      trunk_sha: sha,
      written_at: z.number().int().optional().describe('when `tron answer` wrote it (ms since the epoch)'),
      by: z
        .string()
        .optional()
        .describe('who answered, when not `tron answer` at the console: "serve:<token name>" for an answer made through `tron serve`'),
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
  'notify.delivered': z
    .strictObject({
      channel: z.enum(['webhook', 'command']),
      on: z.enum(['page', 'landed', 'run']).describe('what it told of'),
      about: z.number().int().describe('the seq of the event it told of'),
      block: z.string().optional(),
      attempts: z.number().int().positive(),
    })
    .describe("note: a [notify] notification was delivered (engine/serve/notify.ts), off the engine's path, after this many attempts."),
  'notify.failed': z
    .strictObject({
      channel: z.enum(['webhook', 'command']),
      on: z.enum(['page', 'landed', 'run']),
      about: z.number().int(),
      block: z.string().optional(),
      attempts: z.number().int().positive(),
      error: z.string().describe('what the last attempt met'),
    })
    .describe('note: a [notify] notification was given up after its last attempt; the run goes on regardless.'),
  'forge.commented': z
    .strictObject({
      block,
      issue: z.number().int().positive().describe('the issue (or pull request) number on the forge'),
      about: z
        .enum(['started', 'parked', 'landed', 'abandoned', 'closed'])
        .describe('what the comment told of (closed: the issue was closed)'),
      comment: z.union([z.number().int(), z.string()]).optional().describe("the comment's id on the forge (Linear's: a uuid)"),
      issue_url: z.string().optional().describe("the issue's page on the forge"),
      posted: z.boolean().describe('false: a comment with the same marker was already there (a retry, or a restart), and none was posted'),
    })
    .describe("note: tron told a block's issue how it goes (engine/forge/progress.ts), off the engine's path."),
  'forge.failed': z
    .strictObject({ block, issue: z.number().int().positive(), about: z.string(), error: z.string() })
    .describe("note: a comment on a block's issue was given up after its last attempt; the run goes on regardless."),
  'forge.ignored': z
    .strictObject({
      who: z.string().describe('the forge account (a login, or the app that reported a check)'),
      what: z.enum(['review', 'comment', 'closing', 'label', 'check']),
      issue: z.number().int().positive().optional().describe('the issue or pull request number'),
      why: z.string(),
    })
    .describe(
      "note: something on the forge from someone [forge] trusted does not name (a review, a closing, a label, a comment with tron's marker, a check from another app) was ignored; noted once per account, kind and issue (engine/forge/trust.ts).",
    ),

  // ---- notes ----
  'worker.spawned': z
    .strictObject({ block, session: z.string(), turn: z.number().int(), pid: z.number().int(), start_time: z.string(), agent })
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
      agent,
    })
    .describe('note: a worker process (or test run) ended.'),
  'tests.queued': z
    .strictObject({
      block,
      session: z.string().describe('tests:gate, tests:lane, tests:trunk…, as the test run is named'),
      sha,
      ref: z.string().describe('the tron-owned ref on the remote that holds the sha for the agent to fetch'),
    })
    .describe(
      'note: [cluster] jobs = "agents": a test run was handed to the agents: the sha pushed to the remote as `ref`, and its job (role test) committed with this line (engine/queue/agent-tests.ts).',
    ),
  'tests.refused': z
    .strictObject({
      block,
      session: z.string(),
      sha,
      agent: z.string().optional().describe('the agent whose result it was, as it names itself'),
      reason: z.string().describe('why it was not believed: another sha reported, a malformed result, or the run not carried out'),
    })
    .describe(
      "note: an agent's test run was not believed (the sha it reports is not the one asked for, or it could not be had); the engine ran the suite itself.",
    ),
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

/**
 * How a line of an earlier schema version reads today: its fields, upgraded. Version 2
 * (the merge lane) made landing several blocks at once one intent and one refusal.
 */
export const UPGRADES: Partial<Record<EventType, (fields: Record<string, unknown>, v: number) => Record<string, unknown>>> = {
  'land.intent': (f, v) => (v >= 2 ? f : { stack: 0, sha: f.sha, from: f.from, blocks: [{ block: f.block, sha: f.sha }], tested: 'gate' }),
  'block.landed': (f, v) => (v >= 2 ? f : { ...f, top: f.sha }),
  'land.refused': (f, v) => (v >= 2 ? f : { stack: 0, blocks: [f.block], actual: f.actual, detail: f.detail }),
};
/**
 * Every decision type, by name: the effects table is keyed on it, so a new decision does
 * not compile until it says what it does. A test checks it against the descriptions.
 */
export const DECISION_TYPES = [
  'run.finished',
  'worktree.requested',
  'block.dispatched',
  'worker.unavailable',
  'turn.held',
  'reply.accepted',
  'reply.refused',
  'facts.requested',
  'gate.passed',
  'gate.failed',
  'block.phase',
  'merge.queued',
  'lane.stacked',
  'candidate.requested',
  'bisect.step',
  'land.intent',
  'remote.retry',
  'pr.requested',
  'pr.wait',
  'lane.closed',
  'test.requested',
  'wrap.requested',
  'escalation.raised',
  'block.parked',
  'block.abandoned',
  'worker.overran',
  'worker.extended',
  'turn.reissued',
  'budget.exceeded',
] as const satisfies readonly EventType[];
export type DecisionType = (typeof DECISION_TYPES)[number];

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
