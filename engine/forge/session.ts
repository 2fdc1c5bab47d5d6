/**
 * What `tron start` does with `[forge]` before the run: takes the token out of the
 * environment (workers and test runs are given an environment built from what is left,
 * so no pass-through pattern can reach it), opens the forge, and with `[intake]` takes the
 * labelled issues in as blocks beside the block files — the forge's, or with `source =
 * "linear"` a Linear team's (linear.ts), whose API key is kept the same way and which
 * needs no `[forge]`: its blocks land through trunk, the remote or the forge. A rate
 * limit or a transient failure here is waited out (no decision has been made yet, so
 * nothing needs replaying); a refused token is a problem with the configuration (exit 2),
 * a forge that stays unreachable a fault (exit 1).
 */
import { type Clock, sleep, systemClock } from '../os/clock.ts';
import { InputError, type Problem } from '../core/errors.ts';
import { coded } from '../core/problems.ts';
import { CONFIG_FILE, type ForgeSettings, type LinearSettings, WEBHOOK_SECRET_ENV } from '../project/config.ts';
import { checkRegister, type Block } from '../project/register.ts';
import { type Forge, ForgeError, type IssueTracker } from './forge.ts';
import { GitHubForge } from './github.ts';
import { GitLabForge } from './gitlab.ts';
import { LinearTeamError, LinearTracker } from './linear.ts';
import { TrustingForge } from './trust.ts';
import { type Intake, takeIssuesIn } from './sync.ts';

/** The variable used when `token_env` is unset. */
export const FALLBACK_TOKEN_ENV = 'TRON_FORGE_TOKEN';

/** `env` without the forge's token and webhook secret (all their names) and Linear's API key, for everything tron starts. */
export function withoutForgeToken(
  env: Record<string, string | undefined>,
  config: { forge?: ForgeSettings; intake?: { linear?: LinearSettings } },
): Record<string, string | undefined> {
  const rest = { ...env };
  if (config.intake?.linear) delete rest[config.intake.linear.tokenEnv];
  const settings = config.forge;
  if (!settings) return rest;
  delete rest[settings.tokenEnv];
  delete rest[FALLBACK_TOKEN_ENV];
  // The webhook secret is `tron serve`'s; a shell that exports it for serve and start alike hands it on to nobody.
  delete rest[settings.webhookSecretEnv];
  delete rest[WEBHOOK_SECRET_ENV];
  return rest;
}

/** The token, or the problem of its absence. */
export function forgeToken(env: Record<string, string | undefined>, settings: ForgeSettings): string {
  const token = env[settings.tokenEnv] || env[FALLBACK_TOKEN_ENV];
  if (token) return token;
  throw new InputError([
    {
      code: 'TRON_FORGE_TOKEN',
      path: `$${settings.tokenEnv}`,
      message: `[forge] needs a token for ${settings.repo}: export ${settings.tokenEnv} (or ${FALLBACK_TOKEN_ENV}) with the scopes docs/forge.md lists`,
    },
  ]);
}

/** The forge as the engine reads it: the kind's client, through `[forge] trusted` (engine/forge/trust.ts). */
export function openForge(settings: ForgeSettings, token: string): Forge {
  const o = { repo: settings.repo, token, apiUrl: settings.apiUrl, timeoutMs: settings.timeoutMs };
  const clients: Record<ForgeSettings['kind'], () => Forge> = {
    github: () => new GitHubForge(o),
    gitlab: () => new GitLabForge(o),
  };
  return new TrustingForge(clients[settings.kind](), settings.trusted);
}

/** Linear's API key, or the problem of its absence. */
export function linearToken(env: Record<string, string | undefined>, settings: LinearSettings): string {
  const token = env[settings.tokenEnv];
  if (token) return token;
  throw new InputError([
    {
      code: 'TRON_LINEAR_TOKEN',
      path: `$${settings.tokenEnv}`,
      message: `[intake] source = "linear" needs an API key for team ${settings.team}: export ${settings.tokenEnv} (docs/forge.md#linear says how to make one)`,
    },
  ]);
}

/** Linear's client for `[intake]`: its issues come in and are told through it; it lands nothing. */
export function openLinear(settings: LinearSettings, token: string, clock: Clock = systemClock): LinearTracker {
  return new LinearTracker({
    clock,
    team: settings.team,
    ...(settings.state && { state: settings.state }),
    apiKey: token,
    apiUrl: settings.apiUrl,
    timeoutMs: settings.timeoutMs,
  });
}

/** How an API is asked again, and how its failures are named: `[forge]`'s, or `[intake]`'s for Linear. */
export type Patience = Pick<ForgeSettings, 'repo' | 'apiUrl' | 'tokenEnv' | 'retries' | 'backoffMs'>;

/** Calls `f`, waiting out rate limits and transient failures up to `settings.retries` times. */
export async function patiently<T>(settings: Patience, f: () => Promise<T>, sleep = waitOn(systemClock)): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await f();
    } catch (err) {
      if (err instanceof InputError) throw err;
      const e = err instanceof ForgeError ? err : new ForgeError('transient', String(err));
      if (e.kind === 'auth')
        throw new InputError([
          {
            code: 'TRON_FORGE_AUTH',
            path: `$${settings.tokenEnv}`,
            message: `${settings.apiUrl} refused the token for ${settings.repo} (${e.message}); check it and its scopes (docs/forge.md)`,
          },
        ]);
      if (e.kind === 'refused' || attempt > settings.retries)
        throw new Error(coded('TRON_FORGE_UNREACHABLE', `${settings.apiUrl} (${settings.repo}) after ${attempt} tries: ${e.message}`));
      await sleep(Math.min(60_000, e.retryAfterMs ?? settings.backoffMs * 2 ** (attempt - 1)));
    }
  }
}

/** A retry's wait on `clock`: the start awaits it, so it keeps the process alive. */
function waitOn(clock: Clock): (ms: number) => Promise<void> {
  return (ms) => sleep(clock, ms, { keepAlive: true });
}

/**
 * The register with the issues taken in: the block files' blocks, then the issues'. An
 * issue whose id a block file already has is left to the file (the file is the user's
 * word); the whole is checked as one register (unknown dependencies, cycles).
 */
export async function registerWithIssues(
  forge: IssueTracker,
  settings: Patience,
  label: string,
  files: readonly Block[],
  clock: Clock = systemClock,
): Promise<{ blocks: Block[]; intake: Intake }> {
  const intake = (await patiently(settings, () => takeIssuesIn(forge, label), waitOn(clock))) as Intake;
  const ids = new Set(files.map((b) => b.id));
  const blocks = [...files, ...intake.blocks.filter((b) => !ids.has(b.id))];
  const problems: Problem[] = checkRegister(blocks);
  if (problems.length > 0) throw new InputError(problems);
  return { blocks, intake };
}

/** The forge of a run: its client, and the issue behind each block taken in. */
export interface ForgeRun {
  /** `[forge]`'s client: PR mode's pull requests and checks (absent: Linear's intake alone). */
  forge?: Forge;
  /** Where the issues come from and are told how their blocks go: the forge, or Linear. */
  tracker: IssueTracker;
  settings: Patience;
  blocks: Block[];
  issues: Intake['issues'];
  /** [intake]: the label, the blocks taken in from issues and the list's ETag (for --watch's polls). */
  intake?: { label: string; pollMs: number; blocks: Block[]; etag?: string };
}

/** At start, with `[forge]` or Linear's `[intake]`: the tokens (or exit 2), the clients, and with `[intake]` the register with the issues. */
export async function forgeAtStart(
  config: { forge?: ForgeSettings; intake?: { label: string; pollMs: number; linear?: LinearSettings } },
  files: Block[],
  env: Record<string, string | undefined>,
  make: (settings: ForgeSettings, token: string) => Forge = openForge,
  clock: Clock = systemClock,
): Promise<ForgeRun | undefined> {
  const linear = config.intake?.linear;
  if (!config.forge && !linear) return undefined;
  const forge = config.forge && make(config.forge, forgeToken(env, config.forge));
  const tracker = linear ? openLinear(linear, linearToken(env, linear), clock) : forge!;
  const settings: Patience = linear ? { ...linear, repo: tracker.repo } : config.forge!;
  const run = { ...(forge && { forge }), tracker, settings };
  if (!config.intake) return { ...run, blocks: files, issues: {} };
  // The team, and its done state, before any issue is read: a wrong key is the config's problem, said now.
  if (tracker instanceof LinearTracker) await patiently(settings, () => teamOrProblem(tracker, linear!), waitOn(clock));
  const { blocks, intake } = await registerWithIssues(tracker, settings, config.intake.label, files, clock);
  return {
    ...run,
    blocks,
    issues: intake.issues,
    intake: { label: config.intake.label, pollMs: config.intake.pollMs, blocks: intake.blocks, ...(intake.etag && { etag: intake.etag }) },
  };
}

/** Reads the team and its Done state; a team that is not there is the config's problem (TRON_LINEAR_TEAM), not a failure to retry. */
async function teamOrProblem(tracker: LinearTracker, settings: LinearSettings): Promise<void> {
  try {
    await tracker.team();
  } catch (err) {
    if (!(err instanceof LinearTeamError)) throw err;
    throw new InputError([
      { code: 'TRON_LINEAR_TEAM', path: `${CONFIG_FILE}: intake.team`, message: `${err.message} (${settings.apiUrl})` },
    ]);
  }
}
