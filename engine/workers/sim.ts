/**
 * The `sim` adapter: scripted workers for the SIM harness, the demo and tests. A script
 * lists, per block and role, the turns in the order they will be asked; each turn may
 * act on the checkout (write files, commit, bring the branch up to date, commit to trunk,
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
 * The number of turns used per block and role is kept in the run directory, so a
 * restarted engine continues the script where the previous run left it.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import TOML from '@iarna/toml';
import { z } from 'zod';
import { execa } from 'execa';
import type { TurnOutcome, TurnRequest, WorkerAdapter } from './adapter.ts';
import type { SimSettings } from './settings.ts';
import { parseDuration } from '../duration.ts';

const SimTurn = z.strictObject({
  /** Files to write (path → content), relative to the checkout. */
  write: z.record(z.string(), z.string()).optional(),
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
  sleep: z.string().optional(),
  /** Never reply: wait until the engine stops the turn. */
  hang: z.boolean().optional(),
  /** Fail the turn as a process that exited with this code. */
  exit: z.number().int().optional(),
  /** The reply text; omitted: the honest default for the turn. */
  reply: z.string().optional(),
});
export type SimTurn = z.infer<typeof SimTurn>;

const RoleScripts = z.strictObject({
  builder: z.array(SimTurn).optional(),
  reviewer: z.array(SimTurn).optional(),
  architect: z.array(SimTurn).optional(),
});

export const SimScript = z.strictObject({ blocks: z.record(z.string(), RoleScripts).default({}) });
export type SimScript = z.infer<typeof SimScript>;

/** Reads and validates a sim script file; an absent path means "honest defaults only". */
export function loadSimScript(file: string | undefined): SimScript {
  if (!file) return { blocks: {} };
  return SimScript.parse(TOML.parse(readFileSync(file, 'utf8')));
}

const sh = (cwd: string, line: string) => execa('sh', ['-c', line], { cwd, reject: false, all: true });
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
      return '>>WORKING';
    case 'architect':
      return '>>PAGE {"reason":"the sim architect has no script for this block"}';
    case 'restate':
      return '>>DONE';
  }
}

export function createSimWorker(settings: SimSettings, deps: { repo: string }): WorkerAdapter {
  const script = loadSimScript(settings.script ? join(deps.repo, settings.script) : undefined);
  return {
    kind: 'sim',
    async runTurn(request, observer): Promise<TurnOutcome> {
      void observer;
      const turns = script.blocks[request.block]?.[request.role] ?? [];
      const index = nextIndex(request);
      const turn = turns[index];
      if (!turn) {
        if (request.kind === 'merge') await rebase(request, {});
        return { ok: true, reply: request.kind === 'restate' ? restateDefault(request) : defaultReply(request) };
      }
      return perform(turn, request);
    },
  };
}

/** Counts turns per block and role in the run directory, so a restart continues the script. */
function nextIndex(request: TurnRequest): number {
  const file = join(request.runDir, 'sim', `${request.block}.${request.role}.json`);
  const seen = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as string[]) : [];
  const key = `${request.session}#${request.turn}`;
  const at = seen.indexOf(key);
  if (at >= 0) return at;
  seen.push(key);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(seen));
  return seen.length - 1;
}

function restateDefault(request: TurnRequest): string {
  return defaultReply({ ...request, kind: (request.expect?.[0] === 'CONFIRMED' ? 'challenge' : 'build') as TurnRequest['kind'] });
}

async function perform(turn: SimTurn, request: TurnRequest): Promise<TurnOutcome> {
  const cwd = request.cwd;
  for (const [path, content] of Object.entries(turn.write ?? {})) {
    mkdirSync(dirname(join(cwd, path)), { recursive: true });
    writeFileSync(join(cwd, path), content);
  }
  for (const path of turn.remove ?? []) rmSync(join(cwd, path), { force: true });
  if (turn.commit) {
    await git(cwd, ['add', '-A']);
    await git(cwd, ['commit', '-q', '-m', turn.commit]);
  }
  if (turn.run) await sh(cwd, turn.run);
  if (turn.trunk_commit) await commitToTrunk(request, turn.trunk_commit);
  if (turn.rebase) {
    const ok = await rebase(request, turn.resolve ?? {});
    if (!ok) return { ok: false, failure: 'exit', detail: 'the sim worker could not rebase onto trunk' };
  }
  if (turn.sleep) await sleep(parseDuration(turn.sleep) ?? 0, request.signal);
  if (turn.hang) {
    await sleep(Number.MAX_SAFE_INTEGER, request.signal);
    return { ok: false, failure: 'aborted', detail: 'the sim worker hung until it was stopped' };
  }
  if (request.signal.aborted) return { ok: false, failure: 'aborted', detail: 'stopped' };
  if (turn.exit !== undefined && turn.exit !== 0) return { ok: false, failure: 'exit', detail: `exited with ${turn.exit}` };
  return { ok: true, reply: turn.reply ?? (request.kind === 'restate' ? restateDefault(request) : defaultReply(request)) };
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
  const branch = (await git(cwd, ['for-each-ref', '--format=%(refname:short)', '--points-at', head, 'refs/heads/tron/'])).stdout.trim().split('\n')[0];
  await git(cwd, ['checkout', '-q', branch || head]);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(resolve, Math.min(ms, 2_147_483_647));
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
