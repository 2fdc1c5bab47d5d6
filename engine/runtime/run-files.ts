/**
 * What a run starts from: its fixed files (manifest.json, the spine that drives it) and
 * the first inputs the loop feeds itself — run.started with the numbers it runs by, and
 * the register as loaded.
 *
 * The manifest is read by whoever reads the run (its directory, and `tron_run_files`,
 * which the database's readers' role may read): no secret goes in — the database URL's
 * password, a URL's user part, a notification webhook's path are written as `***`.
 */
import { copyFileSync, cpSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { BodyOf } from '../core/events.ts';
import type { Config } from '../project/config.ts';
import type { Block } from '../project/register.ts';
import { TRON_VERSION } from '../root.ts';
import type { Spine } from '../spine/spine.ts';
import type { Sandbox } from '../workers/sandbox.ts';
import type { EngineOptions } from './options.ts';
import { redactUrl } from '../git/remote.ts';
import { redactUrlSecrets } from '../core/database-url.ts';

/** The run.started input: the run's id, trunk, and every number it runs by. */
export function runStarted(
  o: Pick<EngineOptions, 'runId' | 'config' | 'spine' | 'workers' | 'watch' | 'marker' | 'remote'>,
  trunkSha: string,
  mainStatus: string,
  configDigest: string | undefined,
): BodyOf<'run.started'> {
  const budgets = o.config.budgets;
  return {
    type: 'run.started',
    run: o.runId,
    version: TRON_VERSION,
    trunk: o.config.trunk,
    trunk_sha: trunkSha,
    main_status: mainStatus,
    max_parallel: o.config.maxParallel,
    architect: Boolean(o.workers.architect),
    liveness: livenessNumbers(o.spine, o.config),
    watch: o.watch,
    pid: process.pid,
    ...(configDigest ? { config_digest: configDigest } : {}),
    ...(o.marker ? { marker: o.marker } : {}),
    budgets: {
      ...(budgets.blockUsd !== undefined && { block_usd: budgets.blockUsd }),
      ...(budgets.blockTokens !== undefined && { block_tokens: budgets.blockTokens }),
      ...(budgets.runUsd !== undefined && { run_usd: budgets.runUsd }),
    },
    merge: {
      batch: o.config.merge.batch,
      verify_trunk: o.config.merge.verifyTrunk,
      gather: o.config.merge.gather,
      speculate: o.config.merge.speculate,
    },
    ...(o.remote &&
      o.config.remote && {
        remote: {
          name: o.remote.name,
          url: redactUrl(o.remote.pushUrl),
          push_branches: o.config.remote.pushBranches,
          retries: o.config.remote.retries,
          backoff_ms: o.config.remote.backoffMs,
        },
      }),
    ...(o.config.forge && {
      forge: {
        repo: o.config.forge.repo,
        land: o.config.forge.land,
        ...(o.config.forge.land === 'pr' && o.config.forge.merge === 'queue' && { merge: 'queue' as const }),
        ...(o.config.forge.requiredChecks && {
          required_checks: o.config.forge.requiredChecks.map((c) => (c.app === undefined ? c.name : { name: c.name, app: c.app })),
        }),
        ...(o.config.forge.trusted !== 'write' && { trusted: o.config.forge.trusted }),
        require_human_approval: o.config.forge.requireHumanApproval,
        retries: o.config.forge.retries,
        backoff_ms: o.config.forge.backoffMs,
      },
    }),
  };
}

/** The spine's liveness numbers with the config's overrides: what this run uses. */
export function livenessNumbers(spine: Spine, config: Config) {
  const l = { ...spine.liveness, ...config.liveness };
  return { probe_wait_ms: l.probeWaitMs, extension_ms: l.extensionMs, max_extensions: l.maxExtensions, reissues: l.reissues };
}

/** A block as register.loaded records it. */
export function infoOf(b: Block) {
  return { id: b.id, title: b.title, depends_on: b.dependsOn, priority: b.priority, criteria: b.criteria, digest: b.digest };
}

/** Writes the run directory's fixed files: manifest.json and the spine that drives the run. */
/** A run id that sorts by start time: 20261130-024812-001. */
export function runIdAt(ms: number, taken: (id: string) => boolean): string {
  const stamp = new Date(ms).toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  for (let n = 1; ; n += 1) {
    const id = `${stamp}-${String(n).padStart(3, '0')}`;
    if (!taken(id)) return id;
  }
}

/**
 * Makes the run's directory under `.tron/runs/`, named by its start time, with its fixed
 * files, and what the previous run's adapters persisted per session carried into it.
 */
export function openRunDir(
  o: Pick<EngineOptions, 'repo' | 'config' | 'spineFile'> & {
    trunkSha: string;
    startedAt: number;
    previousRunDir: string | undefined;
    /** Which sandbox the run uses, and why none when `auto` found none. */
    sandbox?: { kind: Sandbox['kind']; why?: string };
  },
): { runId: string; runDir: string } {
  const runsDir = join(o.repo, '.tron', 'runs');
  const runId = runIdAt(o.startedAt, (id) => existsSync(join(runsDir, id)));
  const runDir = join(runsDir, runId);
  mkdirSync(runDir, { recursive: true });
  copyFileSync(o.spineFile, join(runDir, 'workflow.toml'));
  const manifest = {
    tron: TRON_VERSION,
    run: runId,
    started_at: new Date(o.startedAt).toISOString(),
    trunk: o.config.trunk,
    trunk_sha: o.trunkSha,
    config: { ...withoutSecrets(o.config), workers: undefined },
    workers: withoutSecrets(o.config.workers),
    ...(o.sandbox
      ? { sandbox: { mode: o.config.sandbox.mode, used: o.sandbox.kind, ...(o.sandbox.why ? { why: o.sandbox.why } : {}) } }
      : {}),
    host: { hostname: hostname(), platform: process.platform, arch: process.arch, node: process.version },
  };
  writeFileSync(join(runDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  carrySessions(o.previousRunDir, runDir);
  return { runId, runDir };
}

/** Copies what adapters persist per session (openai conversations, sim progress) into the new run. */
function carrySessions(previousRunDir: string | undefined, runDir: string): void {
  if (!previousRunDir) return;
  for (const name of ['sessions', 'sim']) {
    const from = join(previousRunDir, name);
    if (existsSync(from)) cpSync(from, join(runDir, name), { recursive: true });
  }
}

/**
 * `value` with every URL's secrets as `***` (engine/core/database-url.ts) — the database's
 * password, a user part, a password parameter — and a notification webhook's path and
 * query hidden too: a chat webhook's path is its secret (`/services/T…/B…/…`).
 */
export function withoutSecrets<T>(value: T): T {
  return hide(value, []) as T;
}

function hide(value: unknown, path: readonly string[]): unknown {
  if (typeof value === 'string') {
    if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return value;
    const url = redactUrlSecrets(value);
    return path.join('.') === 'notify.webhook' ? url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#]*)[/?#][\s\S]+$/i, '$1/***') : url;
  }
  if (Array.isArray(value)) return value.map((v) => hide(v, path));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, hide(v, [...path, k])]));
  return value;
}
