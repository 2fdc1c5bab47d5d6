/**
 * The `sim` adapter: scripted workers for the SIM harness, the demo and tests. A script
 * lists, per block and role, the turns in the order they will be asked; each turn may
 * act on the checkout (write files, append to them, commit, bring the branch up to date, commit to trunk,
 * hang, fail) and then replies. When a block's script runs out, the worker behaves like
 * an honest, capable worker: it answers what the turn asks for.
 *
 * Script (TOML), e.g. `.tron/sim.toml`:
 *
 *   [[blocks.login.builder]]
 *   write = { "src/login.js" = "export const login = () => 'token';\n" }
 *   commit = "Add login"
 *   reply = ">>DONE"
 *
 *   [[blocks.login.builder]]
 *   kind = "merge"              # only for a merge turn: bring the branch up to date
 *   rebase = true
 *   resolve = { "src/login.js" = "…" }
 *
 * A block without a script of its own for a role plays the `"*"` block's script for that
 * role, with `{block}` standing for the block's id — `tron init --worker sim` writes one,
 * so a newcomer's own blocks make a real commit each:
 *
 *   [[blocks."*".builder]]
 *   write = { "sim-work/{block}.md" = "The sim builder's work for {block}.\n" }
 *   commit = "{block}: the sim builder's work"
 *
 * Which entry answers a turn: the first unused entry whose `kind` is the turn's kind,
 * else the first unused entry without a `kind`, else the honest default. So a script
 * without `kind` is simply read in order. A liveness probe (`kind = "probe"` turn) uses
 * only `kind = "probe"` entries; without one it answers like the turn it interrupts:
 * silent while that turn hangs, `>>WORKING` otherwise.
 *
 * `sleep` is a slow worker at work: it reports progress (`observer.progress`, a sign of
 * life for the liveness probe) as it goes. `hang` is a silent one. Both end when the
 * engine stops the turn, or at the turn's hard budget (`timeoutMs`), which fails the
 * turn as a timeout — as a command worker would.
 *
 * Which entry each turn (session, turn) took is kept in `.tron/sim-state/` of the
 * repository, so an engine restarted after a crash continues the script where the
 * previous run left it, and a turn issued again with the same identity gets the same entry.
 */
import { sleep, systemClock } from '../os/clock.ts';
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import TOML from '@iarna/toml';
import { z } from 'zod';
import { execa } from 'execa';
import { TURN_KINDS } from '../core/roles.ts';
import type { TurnObserver, TurnOutcome, TurnRequest, WorkerAdapter } from './adapter.ts';
import type { SimSettings } from '../project/worker-settings.ts';
import { parseDuration } from '../core/duration.ts';
import { failureCause, lastMeaningfulLine } from './output.ts';
import { NO_SANDBOX, turnConfinement, type Sandbox } from './sandbox.ts';

const SimTurn = z.strictObject({
  /** Only for a turn of this kind; without it, the entry answers the next turn of any kind but a probe. */
  kind: z.enum(TURN_KINDS).optional(),
  /** Files to write (path → content), relative to the checkout. */
  write: z.record(z.string(), z.string()).optional(),
  /** Text to add at the end of files (path → text), each created when absent. */
  append: z.record(z.string(), z.string()).optional(),
  /** Files to delete. */
  remove: z.array(z.string()).optional(),
  /** Commit everything with this message. */
  commit: z.string().optional(),
  /** Bring the branch up to date: rebase onto trunk; `resolve` answers conflicts (path → content). */
  rebase: z.boolean().optional(),
  resolve: z.record(z.string(), z.string()).optional(),
  /** Commit these files straight onto trunk (a worker misbehaving). */
  trunk_commit: z.record(z.string(), z.string()).optional(),
  /** A shell line to run in the checkout, after the commit (so it can leave work uncommitted). */
  run: z.string().optional(),
  /** Take this long before replying ("2s"). */
  sleep: z
    .string()
    .refine((s) => parseDuration(s) !== undefined, { message: 'a duration like "500ms" or "2s"' })
    .optional(),
  /** Never reply: wait until the engine stops the turn (or its hard budget ends it). */
  hang: z.boolean().optional(),
  /** Fail the turn as a process that exited with this code. */
  exit: z.number().int().optional(),
  /**
   * What the failing process printed as its last words, as a CLI prints its own error
   * ("Not logged in · Please run /login"): it ends the failure's detail, and names its
   * cause (auth, network, quota) as the command adapter would.
   */
  stdout: z.string().optional(),
  /** The reply text; omitted: the honest default for the turn. */
  reply: z.string().optional(),
  /** What the turn spent, reported as a CLI reports it (model "sim"): for budgets and reports. */
  usage: z
    .strictObject({ input: z.number().int().min(0), output: z.number().int().min(0), cost_usd: z.number().min(0).optional() })
    .optional(),
});
export type SimTurn = z.infer<typeof SimTurn>;

const RoleScripts = z.strictObject({
  builder: z.array(SimTurn).optional(),
  reviewer: z.array(SimTurn).optional(),
  architect: z.array(SimTurn).optional(),
});

export const SimScript = z.strictObject({ blocks: z.record(z.string(), RoleScripts).default({}) });
export type SimScript = z.infer<typeof SimScript>;

/** How often a sleeping (busy) sim worker reports progress. */
const PROGRESS_MS = 200;

/** The script key whose entries play for every block without a script of its own. */
export const ANY_BLOCK = '*';

/**
 * The entries that play for `block` in `role`: its own, else the `"*"` block's with
 * `{block}` replaced by its id (ids are `[a-z0-9-]`, so they are safe in JSON and a shell line).
 */
export function scriptFor(script: SimScript, block: string, role: keyof z.infer<typeof RoleScripts>): SimTurn[] {
  const own = script.blocks[block]?.[role];
  if (own) return own;
  const any = script.blocks[ANY_BLOCK]?.[role] ?? [];
  return any.map((turn) => JSON.parse(JSON.stringify(turn).replaceAll('{block}', block)) as SimTurn);
}

/** Where a repository's sim workers remember which script entry each turn took. */
export const SIM_STATE_DIR = join('.tron', 'sim-state');

/** Reads and validates a sim script file; an absent path means "honest defaults only". */
export function loadSimScript(file: string | undefined): SimScript {
  if (!file) return { blocks: {} };
  return SimScript.parse(TOML.parse(readFileSync(file, 'utf8')));
}

/** A script's shell line runs as a worker's command would: in the turn's sandbox. */
async function sh(request: TurnRequest, line: string, deps: SimDeps): Promise<void> {
  const entered = await deps.sandbox.enter(['sh', '-c', line], turnConfinement(request, [], deps.env));
  const [file, ...args] = entered.argv;
  await execa(file!, args, { cwd: request.cwd, reject: false, all: true });
  await entered.leave();
}

interface SimDeps {
  env: Readonly<Record<string, string | undefined>>;
  sandbox: Sandbox;
}
const git = (cwd: string, args: string[]) => execa('git', args, { cwd, reject: false, all: true });

/** The reply an honest worker gives when the script says nothing. */
export function defaultReply(request: TurnRequest): string {
  switch (request.kind) {
    case 'build':
      return '>>DONE';
    case 'challenge': {
      const evidence = Object.fromEntries((request.criteria ?? []).map((c, i) => [`c${i + 1}`, `checked: ${c}`]));
      return `>>CONFIRMED ${JSON.stringify({ evidence })}`;
    }
    case 'review':
      return '>>APPROVE';
    case 'merge':
      return '>>MERGED';
    case 'probe':
      return '>>WORKING {"progress":"still at it"}';
    case 'architect':
      return `>>PAGE ${JSON.stringify({ reason: `the sim architect has no script for ${request.block}` })}`;
    case 'restate':
      return '>>DONE';
  }
}

export function createSimWorker(
  settings: SimSettings,
  deps: { repo: string; env?: Readonly<Record<string, string | undefined>>; sandbox?: Sandbox },
): WorkerAdapter {
  const run: SimDeps = { env: deps.env ?? process.env, sandbox: deps.sandbox ?? NO_SANDBOX };
  const script = loadSimScript(settings.script ? join(deps.repo, settings.script) : undefined);
  const where = settings.script ?? 'a script file (script = ".tron/sim.toml" in each [workers.*] table)';
  /** The scripted turn each session is running now, so a probe can answer like it. */
  const inflight = new Map<string, SimTurn>();
  return {
    kind: 'sim',
    async runTurn(request, observer): Promise<TurnOutcome> {
      const turns = scriptFor(script, request.block, request.role);
      const index = pickEntry(join(deps.repo, SIM_STATE_DIR), request, turns);
      const turn = index >= 0 ? turns[index] : undefined;
      if (request.kind === 'probe' && !turn) {
        if (inflight.get(request.session)?.hang) return silence(request);
        return { ok: true, reply: defaultReply(request) };
      }
      if (!turn) {
        if (request.kind === 'merge') await rebase(request, {});
        if (request.kind === 'build' && request.role === 'builder' && turns.length === 0)
          observer.progress?.(`sim: no script for block ${request.block} in ${where}; this builder commits nothing`);
        // The usual reason an architect is asked about a sim block: its builder, having no
        // script, committed nothing. Say what is missing and where it goes.
        if (request.kind === 'architect' && scriptFor(script, request.block, 'builder').length === 0) {
          const reason = `the sim builder has no script for block ${request.block}, so it commits nothing: add [[blocks.${request.block}.builder]] entries (or a [[blocks."*".builder]] default for every block) to ${where}; the format is in docs/workers.md`;
          return { ok: true, reply: `>>PAGE ${JSON.stringify({ reason })}` };
        }
        return { ok: true, reply: request.kind === 'restate' ? restateDefault(request) : defaultReply(request) };
      }
      if (request.kind !== 'probe') inflight.set(request.session, turn);
      try {
        return await perform(turn, request, observer, run);
      } finally {
        if (inflight.get(request.session) === turn) inflight.delete(request.session);
      }
    },
  };
}

/**
 * The script entry for this turn (an index into `turns`, or -1 for the honest default),
 * remembered per block and role so the same turn always gets the same entry.
 */
function pickEntry(stateDir: string, request: TurnRequest, turns: readonly SimTurn[]): number {
  const file = join(stateDir, `${request.block}.${request.role}.json`);
  const taken = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, number>) : {};
  const key = `${request.session}#${request.turn}`;
  const known = taken[key];
  if (known !== undefined) return known;
  const used = new Set(Object.values(taken));
  const free = (i: number) => !used.has(i);
  let index = turns.findIndex((t, i) => free(i) && t.kind === request.kind);
  if (index < 0 && request.kind !== 'probe') index = turns.findIndex((t, i) => free(i) && t.kind === undefined);
  taken[key] = index;
  mkdirSync(dirname(file), { recursive: true });
  // Atomic: a crash mid-write must not leave a torn file the next start cannot read.
  writeFileSync(`${file}.tmp`, JSON.stringify(taken));
  renameSync(`${file}.tmp`, file);
  return index;
}

function restateDefault(request: TurnRequest): string {
  return defaultReply({ ...request, kind: (request.expect?.[0] === 'CONFIRMED' ? 'challenge' : 'build') as TurnRequest['kind'] });
}

async function perform(turn: SimTurn, request: TurnRequest, observer: TurnObserver, deps: SimDeps): Promise<TurnOutcome> {
  const cwd = request.cwd;
  for (const [path, content] of Object.entries(turn.write ?? {})) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true });
    writeFileSync(join(cwd, path), content);
  }
  for (const [path, text] of Object.entries(turn.append ?? {})) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true });
    appendFileSync(join(cwd, path), text);
  }
  for (const path of turn.remove ?? []) rmSync(join(cwd, path), { force: true });
  // What it did, as a coding agent's progress would read: for the board and the turn's log.
  const did = (note: string) => observer.progress?.(`sim: ${note}`);
  const touched = [...Object.keys(turn.write ?? {}), ...Object.keys(turn.append ?? {}), ...(turn.remove ?? []).map((p) => `-${p}`)];
  if (touched.length > 0) did(`wrote ${touched.join(', ')}`);
  if (turn.commit) {
    await git(cwd, ['add', '-A']);
    await git(cwd, ['commit', '-q', '-m', turn.commit]);
    did(`committed "${turn.commit}"`);
  }
  if (turn.run) {
    did(`running ${turn.run}`);
    await sh(request, turn.run, deps);
  }
  if (turn.trunk_commit) await commitToTrunk(request, turn.trunk_commit);
  if (turn.rebase) {
    did(`rebasing onto ${request.trunk ?? 'trunk'}`);
    const ok = await rebase(request, turn.resolve ?? {});
    if (!ok) return { ok: false, failure: 'exit', detail: 'the sim worker could not rebase onto trunk' };
  }
  const clock = request.clock ?? systemClock;
  const started = clock.now();
  if (turn.sleep) {
    const ms = parseDuration(turn.sleep) ?? 0;
    const stopTicking = clock.every(PROGRESS_MS, () => observer.progress?.(`sim: working on ${request.block}`), { keepAlive: true });
    try {
      await pause(request, Math.min(ms, request.timeoutMs));
    } finally {
      stopTicking();
    }
    if (ms > request.timeoutMs && !request.signal.aborted) return timedOut(request);
  }
  if (turn.hang) return silence(request, clock.now() - started);
  if (request.signal.aborted) return { ok: false, failure: 'aborted', detail: 'stopped' };
  if (turn.usage) {
    const { input, output, cost_usd } = turn.usage;
    observer.usage({
      model: 'sim',
      inputTokens: input,
      cachedTokens: 0,
      outputTokens: output,
      ...(cost_usd !== undefined ? { costUsd: cost_usd } : {}),
    });
  }
  if (turn.exit !== undefined && turn.exit !== 0) {
    const said = turn.stdout === undefined ? undefined : lastMeaningfulLine(turn.stdout);
    const cause = said === undefined ? undefined : failureCause(said);
    return {
      ok: false,
      failure: 'exit',
      detail: said ? `exited with ${turn.exit}: ${said}` : `exited with ${turn.exit}`,
      ...(turn.stdout !== undefined ? { output: turn.stdout } : {}),
      ...(cause ? { cause } : {}),
    };
  }
  return { ok: true, reply: turn.reply ?? (request.kind === 'restate' ? restateDefault(request) : defaultReply(request)) };
}

/** Says nothing until the engine stops the turn, or its hard budget runs out. */
async function silence(request: TurnRequest, spent = 0): Promise<TurnOutcome> {
  await pause(request, Math.max(0, request.timeoutMs - spent));
  if (request.signal.aborted) return { ok: false, failure: 'aborted', detail: 'the sim worker hung until it was stopped' };
  return timedOut(request);
}

function timedOut(request: TurnRequest): TurnOutcome {
  return { ok: false, failure: 'timeout', detail: `the sim worker gave no reply within ${request.timeoutMs}ms` };
}

/** Rebase the checkout onto trunk, answering conflicts with `resolve`; false if it stays conflicted. */
async function rebase(request: TurnRequest, resolve: Record<string, string>): Promise<boolean> {
  const cwd = request.cwd;
  const trunk = request.trunk ?? 'main';
  const first = await git(cwd, ['-c', 'core.editor=true', 'rebase', trunk]);
  if (first.exitCode === 0) return true;
  for (let round = 0; round < 20; round += 1) {
    if (Object.keys(resolve).length === 0) break;
    for (const [path, content] of Object.entries(resolve)) {
      writeFileSync(join(cwd, path), content);
      await git(cwd, ['add', path]);
    }
    const next = await git(cwd, ['-c', 'core.editor=true', 'rebase', '--continue']);
    if (next.exitCode === 0) return true;
  }
  await git(cwd, ['rebase', '--abort']);
  return false;
}

/** A misbehaving worker: a commit made straight on trunk, leaving its own branch alone. */
async function commitToTrunk(request: TurnRequest, files: Record<string, string>): Promise<void> {
  const cwd = request.cwd;
  const trunk = request.trunk ?? 'main';
  const head = (await git(cwd, ['rev-parse', 'HEAD'])).stdout.trim();
  const trunkSha = (await git(cwd, ['rev-parse', `refs/heads/${trunk}`])).stdout.trim();
  await git(cwd, ['checkout', '-q', '--detach', trunkSha]);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true });
    writeFileSync(join(cwd, path), content);
  }
  await git(cwd, ['add', '-A']);
  await git(cwd, ['commit', '-q', '-m', 'A commit straight on trunk']);
  const touched = (await git(cwd, ['rev-parse', 'HEAD'])).stdout.trim();
  await git(cwd, ['update-ref', `refs/heads/${trunk}`, touched]);
  const branch = (await git(cwd, ['for-each-ref', '--format=%(refname:short)', '--points-at', head, 'refs/heads/tron/'])).stdout
    .trim()
    .split('\n')[0];
  await git(cwd, ['checkout', '-q', branch || head]);
}

/** The sim's work takes `ms` on the turn's clock, or ends when the turn is stopped; it keeps the process alive, as a worker's would. */
function pause(request: TurnRequest, ms: number): Promise<void> {
  return sleep(request.clock ?? systemClock, ms, { keepAlive: true, signal: request.signal });
}
