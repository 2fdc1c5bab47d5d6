/**
 * `.tron/config.toml`: parsed with a strict schema (an unknown key is a problem, never
 * ignored), then normalised into a typed `Config` with durations in ms. Every problem is
 * collected, so the user sees all of them at once, each with its file, key and fix.
 */
import { POSTGRES_URL, POSTGRES_URL_FORM } from '../core/database-url.ts';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { schemaProblems, parseToml, type IssueStyle } from './config-problems.ts';
import { parseDuration } from '../core/duration.ts';
import { parseSize } from '../core/size.ts';
import type { Problem } from '../core/errors.ts';
import { WORKER_ROLES, type WorkerRole } from '../core/roles.ts';
import type { Liveness } from '../spine/spine.ts';
import { SANDBOX_MODES, workerSettings, type SandboxMode, type WorkerSettings } from './worker-settings.ts';

/** Where the config lives, relative to the repository root (and how problems name it). */
export const CONFIG_FILE = '.tron/config.toml';

/** Defaults for the optional fields; `tron init` writes the same values. */
export const CONFIG_DEFAULTS = {
  trunk: 'main',
  max_parallel: 4,
  timeouts: { turn: '20m', test: '10m' },
  merge: { batch: 8, verify_trunk: false, gather: true, speculate: true },
  remote: { name: 'origin', push_branches: false, timeout: '60s', retries: 6, backoff: '5s' },
} as const;

const duration = z
  .string()
  .refine((s) => parseDuration(s) !== undefined, { message: 'a duration like "90s", "20m" or "1h"' })
  .refine((s) => parseDuration(s) !== 0, { message: 'must be longer than 0s; a zero budget would fail every turn' });

/** Whether `s` is a branch name git would accept (the common rules of `git check-ref-format --branch`): never a path out of refs/heads/. */
export function isBranchName(s: string): boolean {
  return /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*@\{)[^\s~^:?*[\\\x00-\x1f\x7f]+$/.test(s) && !/(^|\/)\.|\.lock$|[/.]$/.test(s);
}

const branch = z.string().refine(isBranchName, {
  message: 'not a valid branch name; write the name of the branch blocks land on, e.g. "main"',
});

const TimeoutsTable = z.strictObject({
  turn: duration.default(CONFIG_DEFAULTS.timeouts.turn),
  test: duration.default(CONFIG_DEFAULTS.timeouts.test),
});

const size = z
  .string()
  .refine((s) => parseSize(s) !== undefined, { message: 'a size like "4MB", "512KB" or "65536" (bytes)' })
  .refine((s) => (parseSize(s) ?? 1024) >= 1024, { message: 'must be at least 1KB' });

const LimitsTable = z.strictObject({
  reply: size.default('4MB'),
});

const LivenessOverrides = z.strictObject({
  probe_wait: duration.optional(),
  extension: duration.optional(),
  max_extensions: z.number().int().min(0).optional(),
  reissues: z.number().int().min(0).optional(),
});

/** USD per million tokens of one model; cached prompt tokens cost `input` unless `cached` says otherwise. */
const PriceRow = z.strictObject({
  input: z.number().min(0),
  cached: z.number().min(0).optional(),
  output: z.number().min(0),
});

/** `[prices."<model>"]`: model names, or patterns with `*` ("claude-*"). */
const PricesTable = z.record(z.string().min(1), PriceRow);

/** `[budgets]`: spend limits that stop a runaway block or run (USD as workers report or [prices] price it). */
const BudgetsTable = z.strictObject({
  block_usd: z.number().positive().optional(),
  block_tokens: z.number().int().positive().optional(),
  run_usd: z.number().positive().optional(),
});

const SandboxTable = z.strictObject({
  mode: z.enum(SANDBOX_MODES).default('auto'),
  test_network: z.boolean().default(false),
});

/** A variable name a test may be given from the engine's environment. */
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: 'an environment variable name, e.g. "DATABASE_URL"' });

const MergeTable = z.strictObject({
  batch: z.number().int().min(1).max(64).default(CONFIG_DEFAULTS.merge.batch),
  verify_trunk: z.boolean().default(CONFIG_DEFAULTS.merge.verify_trunk),
  gather: z.boolean().default(CONFIG_DEFAULTS.merge.gather),
  speculate: z.boolean().default(CONFIG_DEFAULTS.merge.speculate),
});

/** What `[notify]` can tell of: a page to the operator, a block landed, the run's end. */
export const NOTIFY_ON = ['page', 'landed', 'run'] as const;
export type NotifyOn = (typeof NOTIFY_ON)[number];
/** The webhook's body: `{"text": …}`, Slack's incoming-webhook blocks, or tron's own JSON (engine/serve/notify-shapes.ts). */
export const NOTIFY_FORMATS = ['text', 'slack', 'json'] as const;
export type NotifyFormat = (typeof NOTIFY_FORMATS)[number];

/** `[notify]`: notifications off the engine's path (engine/serve/notify.ts). */
const NotifyTable = z
  .strictObject({
    webhook: z
      .string()
      .regex(/^https?:\/\/\S+$/, { message: 'an http(s) URL, e.g. "https://hooks.slack.com/services/…"' })
      .optional(),
    command: z.array(z.string().min(1)).min(1).optional(),
    format: z.enum(NOTIFY_FORMATS).default('text'),
    on: z.array(z.enum(NOTIFY_ON)).min(1).default(['page', 'run']),
    attempts: z.number().int().min(1).max(20).default(5),
    backoff: duration.default('1s'),
    timeout: duration.default('10s'),
  })
  .refine((t) => t.webhook !== undefined || t.command !== undefined, {
    message: 'say where notifications go: webhook = "https://…" and/or command = ["…"]',
  });
/**
 * `[telemetry]`: OpenTelemetry traces of each run, sent to an OTLP/HTTP collector
 * (engine/serve/traces.ts). `otlp_endpoint` is the collector's base URL, as
 * OTEL_EXPORTER_OTLP_ENDPOINT is (tron posts to `<it>/v1/traces`); `timeout` bounds one
 * export and the flush at the run's end.
 */
const TelemetryTable = z.strictObject({
  otlp_endpoint: z
    .string()
    .regex(/^https?:\/\/\S+$/, { message: 'an http(s) URL of an OTLP/HTTP collector, e.g. "http://127.0.0.1:4318"' })
    .optional(),
  timeout: duration.default('5s'),
});
/**
 * `[remote]`: the remote's trunk is the truth (DESIGN §3). `timeout` bounds each network
 * call; a transient failure (unreachable, timed out) is tried again `retries` times,
 * waiting `backoff`, then twice that, and so on, before the operator is paged.
 */
const RemoteTable = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { message: 'the name of a git remote of this repository, e.g. "origin"' })
    .default(CONFIG_DEFAULTS.remote.name),
  push_branches: z.boolean().default(CONFIG_DEFAULTS.remote.push_branches),
  timeout: duration.default(CONFIG_DEFAULTS.remote.timeout),
  retries: z.number().int().min(0).max(100).default(CONFIG_DEFAULTS.remote.retries),
  backoff: duration.default(CONFIG_DEFAULTS.remote.backoff),
});

/** Where tron lands a block on a forge: one atomic push of trunk, or through a pull request per block. */
export const FORGE_LAND = ['push', 'pr'] as const;
export type ForgeLand = (typeof FORGE_LAND)[number];
/** PR mode: how trunk moves once a pull request may land — tron's atomic push, or the forge's merge queue. */
export const FORGE_MERGE = ['push', 'queue'] as const;
export type ForgeMerge = (typeof FORGE_MERGE)[number];
/** The forges tron speaks: GitHub and GitLab, each a client in engine/forge/. */
export const FORGE_KINDS = ['github', 'gitlab'] as const;
export type ForgeKind = (typeof FORGE_KINDS)[number];
/** `[forge] token_env` and `api_url` when unset, by kind. */
export const FORGE_DEFAULTS: Record<ForgeKind, { tokenEnv: string; apiUrl: string }> = {
  github: { tokenEnv: 'GITHUB_TOKEN', apiUrl: 'https://api.github.com' },
  gitlab: { tokenEnv: 'GITLAB_TOKEN', apiUrl: 'https://gitlab.com/api/v4' },
};
/** The variable holding the webhook secret when `webhook_secret_env` is unset. */
export const WEBHOOK_SECRET_ENV = 'TRON_WEBHOOK_SECRET';

/**
 * `[forge]`: the team's forge (DESIGN §3, docs/forge.md). The token is read from the
 * environment variable `token_env` names (or TRON_FORGE_TOKEN), by the engine alone.
 * `timeout`, `retries` and `backoff` govern each API call as `[remote]`'s do a git call.
 */
const ForgeTable = z.strictObject({
  kind: z.enum(FORGE_KINDS).default('github'),
  // Each kind narrows it further (forgeProblems): GitHub's owner/name, GitLab's group path or project id.
  repo: z.string().refine((s) => /^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)+$/.test(s) || /^[1-9]\d*$/.test(s), {
    message: 'the repository as "owner/name", e.g. "acme/app" (GitLab: "group/subgroup/project", or the numeric project id)',
  }),
  // The defaults are the kind's: see FORGE_DEFAULTS.
  token_env: envName.optional(),
  api_url: z
    .string()
    .refine((s) => /^https?:\/\/\S+$/.test(s), {
      message: 'the API\'s base URL, e.g. "https://github.example.com/api/v3" (GitLab: "https://gitlab.example.com/api/v4")',
    })
    .optional(),
  land: z.enum(FORGE_LAND).default('push'),
  merge: z.enum(FORGE_MERGE).default('push'),
  webhook_secret_env: envName.default(WEBHOOK_SECRET_ENV),
  /** A check's name, or its name and the app that must report it (GitHub's app id or slug). */
  required_checks: z
    .array(
      z.union([
        z.string().min(1),
        z.strictObject({ name: z.string().min(1), app: z.union([z.number().int().positive(), z.string().min(1)]).optional() }),
      ]),
    )
    .optional(),
  /** Whose reviews, closings, labels and comments count: a least role on the repository, or these logins. */
  trusted: z
    .union([
      z.enum(['write', 'maintain']),
      z.array(z.string().regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\[bot\])?$/, 'a forge login, e.g. "ada"')).min(1),
    ])
    .default('write'),
  require_human_approval: z.boolean().default(false),
  timeout: duration.default('30s'),
  retries: z.number().int().min(0).max(100).default(6),
  backoff: duration.default('2s'),
});

/** Where `[intake]` takes issues from: the forge's (the default), or Linear's (engine/forge/linear.ts). */
export const INTAKE_SOURCES = ['forge', 'linear'] as const;
/** `[intake] token_env`, `api_url`, `timeout`, `retries` and `backoff` when unset, with `source = "linear"`. */
export const LINEAR_DEFAULTS = {
  tokenEnv: 'LINEAR_API_KEY',
  apiUrl: 'https://api.linear.app/graphql',
  timeout: '30s',
  retries: 6,
  backoff: '2s',
} as const;

/**
 * `[intake]`: open issues with `label` become blocks (engine/forge/intake.ts). With
 * `source = "linear"` they are a Linear team's (`team`, its key), narrowed by `state`, read
 * with the key in `token_env`; the Linear keys mean nothing to the forge's intake.
 */
const IntakeTable = z.strictObject({
  source: z.enum(INTAKE_SOURCES).default('forge'),
  label: z.string().trim().min(1).default('tron'),
  /** --watch: how often the labelled list is read again (a conditional request: free while nothing changed). */
  poll: duration.default('60s'),
  team: z.string().optional(),
  state: z.string().trim().min(1).optional(),
  token_env: envName.optional(),
  api_url: z
    .string()
    .refine((s) => /^https?:\/\/\S+$/.test(s), { message: 'the GraphQL endpoint, e.g. "https://api.linear.app/graphql"' })
    .optional(),
  // Linear's API calls, as [forge]'s govern the forge's (defaults: LINEAR_DEFAULTS).
  timeout: duration.optional(),
  retries: z.number().int().min(0).max(100).optional(),
  backoff: duration.optional(),
});

/** `[cluster]`: the event log and the lease in PostgreSQL (engine/log/pg-log.ts, docs/cluster.md). */
const ClusterTable = z.strictObject({
  // refine, not regex: a refinement's message is what the problem says (config-problems.ts).
  database: z
    .string()
    .refine((s) => POSTGRES_URL.test(s), { message: POSTGRES_URL_FORM })
    .optional(),
  repository: z
    .string()
    .refine((s) => /^[A-Za-z0-9._-]{1,100}$/.test(s), {
      message: 'must be a name of letters, digits, ".", "_" and "-" (the name the hosts of this repository share)',
    })
    .optional(),
  lease: duration.default('10s'),
  // Who runs turns and test runs: the engine, in process, or `tron agent`s (docs/cluster.md).
  jobs: z.enum(['here', 'agents']).default('here'),
  heartbeat: duration.default('2s'),
});

const WorkersTable = z.strictObject({
  builder: workerSettings,
  reviewer: workerSettings,
  architect: workerSettings.optional(),
});

const ConfigTable = z.strictObject({
  trunk: branch.default(CONFIG_DEFAULTS.trunk),
  max_parallel: z.number().int().min(1).default(CONFIG_DEFAULTS.max_parallel),
  test: z.string().trim().min(1),
  setup: z.string().trim().min(1).optional(),
  test_env: z.array(envName).default([]),
  timeouts: TimeoutsTable.prefault({}),
  sandbox: SandboxTable.prefault({}),
  limits: LimitsTable.prefault({}),
  merge: MergeTable.prefault({}),
  workers: WorkersTable,
  page_command: z.array(z.string().min(1)).min(1).optional(),
  liveness: LivenessOverrides.optional(),
  prices: PricesTable.optional(),
  budgets: BudgetsTable.optional(),
  notify: NotifyTable.optional(),
  telemetry: TelemetryTable.optional(),
  remote: RemoteTable.optional(),
  forge: ForgeTable.optional(),
  intake: IntakeTable.optional(),
  cluster: ClusterTable.optional(),
});

/** The settings of one repository, normalised: durations in ms, workers parsed per adapter. */
export interface Config {
  /** The branch blocks land on. */
  trunk: string;
  /** Build/review slots at once. */
  maxParallel: number;
  /** The engine's own test command (run by a shell); exit 0 = green. */
  test: string;
  /** Run by a shell before `test` in every checkout the engine tests in (e.g. "npm ci"). */
  setup?: string;
  /** Variables of tron's environment a test run sees, beyond PATH, HOME, LANG, TERM (and CI). */
  testEnv: string[];
  /** Where workers and test runs are confined (engine/workers/sandbox.ts). */
  sandbox: {
    mode: SandboxMode;
    /** Whether test runs may use the network (workers always may). */
    testNetwork: boolean;
  };
  /** The merge lane: the most blocks tested together as one stack, and the optional check of trunk after a landing. */
  merge: { batch: number; verifyTrunk: boolean; gather: boolean; speculate: boolean };
  timeouts: {
    /** Budget of one worker turn. */
    turnMs: number;
    /** Budget of one engine test run (setup and test together); past it the run counts as red. */
    testMs: number;
  };
  limits: {
    /** Bytes a worker's reply may hold; past it the turn fails as reply_too_large. */
    replyBytes: number;
  };
  /** Without an architect, troubles that would consult it go straight to the operator. */
  workers: { builder: WorkerSettings; reviewer: WorkerSettings; architect?: WorkerSettings };
  /** argv run with a JSON page on stdin when the operator is paged. */
  pageCommand?: string[];
  /** Overrides of the spine's `[liveness]` numbers; absent keys keep the spine's value. */
  liveness: Partial<Liveness>;
  /** USD per million tokens by model (or model pattern), for workers that report tokens but no cost. */
  prices: Prices;
  /** Spend limits; an absent one is no limit. */
  budgets: Budgets;
  /** `[notify]`: where page, landing and run-end notifications go; absent: none. */
  notify?: NotifyConfig;
  /** `[telemetry]`: where traces go (OTEL_EXPORTER_OTLP_ENDPOINT stands in for `otlpEndpoint`); absent: the environment's, or none. */
  telemetry?: TelemetryConfig;
  /** With `[remote]`: trunk is the remote's branch, and a landing is one atomic push. Absent: trunk is local. */
  remote?: RemoteSettings;
  /** `[cluster]`: the log in PostgreSQL; absent (and no TRON_DATABASE_URL): the file log. */
  cluster?: ClusterConfig;
  /** `[forge]`: the team's forge; absent: none. */
  forge?: ForgeSettings;
  /** `[intake]`: issues with this label become blocks (the forge's, or with `linear` a Linear team's); --watch reads them again every `pollMs`. */
  intake?: { label: string; pollMs: number; linear?: LinearSettings };
}

/** `[intake] source = "linear"`, normalised: whose issues, and how Linear's API is reached. */
export interface LinearSettings {
  /** The team's key, upper case ("ENG"): its issues are ENG-1, ENG-2, … */
  team: string;
  /** Only issues in the workflow state of this name (absent: every open state). */
  state?: string;
  /** The variable holding the API key. */
  tokenEnv: string;
  apiUrl: string;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
}

/** `[forge]`, normalised. */
export interface ForgeSettings {
  kind: ForgeKind;
  /** GitHub: "owner/name"; GitLab: the project's full path ("group/subgroup/project") or its numeric id. */
  repo: string;
  /** The variable holding the token (TRON_FORGE_TOKEN stands in when it is unset). */
  tokenEnv: string;
  apiUrl: string;
  land: ForgeLand;
  /** PR mode: "queue" hands a pull request that may land to the forge's merge queue instead of pushing trunk. */
  merge: ForgeMerge;
  /** The variable holding the secret `tron serve` checks GitHub's webhook signatures with. */
  webhookSecretEnv: string;
  /** Checks that must be green on the landing sha, each with the app it must come from; absent: the branch protection's (PR mode). */
  requiredChecks?: { name: string; app?: number | string }[];
  /** Whose reviews, closings, labels and comments count (engine/forge/trust.ts): a least role, or these logins. */
  trusted: 'write' | 'maintain' | string[];
  requireHumanApproval: boolean;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
}

export interface ClusterConfig {
  /** The database URL; TRON_DATABASE_URL overrides it (and stands in for it when absent). */
  database?: string;
  /** The name the hosts of this repository share in the database; default: the repository folder's name. */
  repository?: string;
  /** How long the engine's lease lasts unrenewed: a standby takes over within two of these after the leader dies. */
  leaseMs: number;
  /** Who claims turns and test runs from the queue: the engine itself ("here"), or `tron agent`s. */
  jobs: 'here' | 'agents';
  /** How often a worker pool heartbeats; a job of a pool silent for 1.5 of these is re-run. */
  heartbeatMs: number;
}

export interface NotifyConfig {
  /** POSTed as JSON, shaped as `format` says. */
  webhook?: string;
  /** The webhook's body: "text" `{"text": …}`, "slack" (text and blocks), "json" (tron's own object). */
  format: NotifyFormat;
  /** argv run with the notification as JSON on stdin. */
  command?: string[];
  on: NotifyOn[];
  /** Tries per notification and channel; the wait doubles after each failure, from `backoffMs`. */
  attempts: number;
  backoffMs: number;
  /** One attempt's budget. */
  timeoutMs: number;
}

export interface TelemetryConfig {
  /** The OTLP/HTTP collector's base URL; traces go to `<it>/v1/traces`. */
  otlpEndpoint?: string;
  /** One export's budget, and the longest the run's end waits for the last spans. */
  timeoutMs: number;
}

/** `[remote]`, normalised. */
export interface RemoteSettings {
  /** The git remote whose trunk branch is the truth. */
  name: string;
  /** Also push `tron/<id>` as blocks pass their gate. */
  pushBranches: boolean;
  /** Budget of one network call. */
  timeoutMs: number;
  /** Transient failures tried again before the operator is paged. */
  retries: number;
  /** The first wait before a retry; each next wait doubles. */
  backoffMs: number;
}

export interface Budgets {
  /** USD one block may spend (per attempt stretch: an operator RETRY starts it afresh). */
  blockUsd?: number;
  /** Tokens one block may spend, likewise. */
  blockTokens?: number;
  /** USD the whole run may spend; past it no new turn starts and the run ends with exit 3. */
  runUsd?: number;
}

/** One model's prices, USD per million tokens. */
export interface Price {
  input: number;
  cached: number;
  output: number;
}
export type Prices = Record<string, Price>;

function workerKeys(data: unknown, role: PropertyKey): string[] {
  const table = (data as { workers?: Record<PropertyKey, unknown> })?.workers?.[role];
  const adapter = (table as { adapter?: unknown } | undefined)?.adapter;
  const option = workerSettings.options.find((o) => o.shape.adapter.value === adapter);
  return option ? Object.keys(option.shape) : ['adapter', '(the rest depends on the adapter: openai, command or sim)'];
}

/** Every key some adapter's `[workers.*]` table accepts. */
const ANY_WORKER_KEY = [...new Set(workerSettings.options.flatMap((o) => Object.keys(o.shape)))];

const MISSING_HINTS: Record<string, string> = {
  test: 'add the command the engine runs to test a head (exit 0 = green), e.g. test = "npm test"',
  workers: 'add [workers.builder] and [workers.reviewer] tables; `tron init` in a scratch repository writes a full example',
  'workers.builder': 'add a [workers.builder] table with adapter = "openai", "command" or "sim"',
  'workers.reviewer': 'add a [workers.reviewer] table with adapter = "openai", "command" or "sim"',
};

const CONFIG_STYLE: IssueStyle = {
  codes: {
    unknownKey: 'TRON_CONFIG_UNKNOWN_KEY',
    required: 'TRON_CONFIG_REQUIRED',
    invalid: 'TRON_CONFIG_INVALID',
    duration: 'TRON_CONFIG_DURATION',
  },
  knownKeysAt(parts, data) {
    const [first, role] = parts;
    if (parts.length === 0) return Object.keys(ConfigTable.shape);
    if (first === 'timeouts') return Object.keys(TimeoutsTable.shape);
    if (first === 'liveness') return Object.keys(LivenessOverrides.shape);
    if (first === 'prices' && parts.length === 2) return Object.keys(PriceRow.shape);
    if (first === 'budgets') return Object.keys(BudgetsTable.shape);
    if (first === 'cluster') return Object.keys(ClusterTable.shape);
    if (first === 'notify') return ['webhook', 'command', 'format', 'on', 'attempts', 'backoff', 'timeout'];

    if (first === 'sandbox') return Object.keys(SandboxTable.shape);
    if (first === 'limits') return Object.keys(LimitsTable.shape);
    if (first === 'merge') return Object.keys(MergeTable.shape);
    if (first === 'remote') return Object.keys(RemoteTable.shape);
    if (first === 'telemetry') return Object.keys(TelemetryTable.shape);
    if (first === 'forge') return Object.keys(ForgeTable.shape);
    if (first === 'intake') return Object.keys(IntakeTable.shape);
    if (first === 'workers' && parts.length === 1) return [...WORKER_ROLES];
    if (first === 'workers') return workerKeys(data, role!);
    return [];
  },
  anyKeysAt: (parts) => (parts[0] === 'workers' && parts.length === 2 ? ANY_WORKER_KEY : CONFIG_STYLE.knownKeysAt(parts, undefined)),
  missingHint: (parts) => MISSING_HINTS[parts.join('.')],
};

function ms(text: string): number {
  return parseDuration(text)!;
}

function toConfig(raw: z.infer<typeof ConfigTable>): Config {
  const live = raw.liveness ?? {};
  const liveness: Partial<Liveness> = {
    ...(live.probe_wait !== undefined && { probeWaitMs: ms(live.probe_wait) }),
    ...(live.extension !== undefined && { extensionMs: ms(live.extension) }),
    ...(live.max_extensions !== undefined && { maxExtensions: live.max_extensions }),
    ...(live.reissues !== undefined && { reissues: live.reissues }),
  };
  const workers: Config['workers'] = { builder: raw.workers.builder, reviewer: raw.workers.reviewer };
  if (raw.workers.architect !== undefined) workers.architect = raw.workers.architect;
  return {
    trunk: raw.trunk,
    maxParallel: raw.max_parallel,
    test: raw.test,
    testEnv: raw.test_env,
    sandbox: { mode: raw.sandbox.mode, testNetwork: raw.sandbox.test_network },
    ...(raw.setup !== undefined && { setup: raw.setup }),
    merge: { batch: raw.merge.batch, verifyTrunk: raw.merge.verify_trunk, gather: raw.merge.gather, speculate: raw.merge.speculate },
    timeouts: { turnMs: ms(raw.timeouts.turn), testMs: ms(raw.timeouts.test) },
    limits: { replyBytes: parseSize(raw.limits.reply)! },
    workers,
    ...(raw.page_command !== undefined && { pageCommand: raw.page_command }),
    liveness,
    prices: Object.fromEntries(
      Object.entries(raw.prices ?? {}).map(([model, p]) => [model, { input: p.input, cached: p.cached ?? p.input, output: p.output }]),
    ),
    budgets: {
      ...(raw.budgets?.block_usd !== undefined && { blockUsd: raw.budgets.block_usd }),
      ...(raw.budgets?.block_tokens !== undefined && { blockTokens: raw.budgets.block_tokens }),
      ...(raw.budgets?.run_usd !== undefined && { runUsd: raw.budgets.run_usd }),
    },
    ...(raw.notify !== undefined && {
      notify: {
        ...(raw.notify.webhook !== undefined && { webhook: raw.notify.webhook }),
        ...(raw.notify.command !== undefined && { command: raw.notify.command }),
        format: raw.notify.format,
        on: [...new Set(raw.notify.on)],
        attempts: raw.notify.attempts,
        backoffMs: ms(raw.notify.backoff),
        timeoutMs: ms(raw.notify.timeout),
      },
    }),
    ...(raw.telemetry !== undefined && {
      telemetry: {
        ...(raw.telemetry.otlp_endpoint !== undefined && { otlpEndpoint: raw.telemetry.otlp_endpoint }),
        timeoutMs: ms(raw.telemetry.timeout),
      },
    }),
    ...(raw.remote !== undefined && {
      remote: {
        name: raw.remote.name,
        pushBranches: raw.remote.push_branches,
        timeoutMs: ms(raw.remote.timeout),
        retries: raw.remote.retries,
        backoffMs: ms(raw.remote.backoff),
      },
    }),
    ...(raw.forge !== undefined && {
      forge: {
        kind: raw.forge.kind,
        repo: raw.forge.repo,
        tokenEnv: raw.forge.token_env ?? FORGE_DEFAULTS[raw.forge.kind].tokenEnv,
        apiUrl: (raw.forge.api_url ?? FORGE_DEFAULTS[raw.forge.kind].apiUrl).replace(/\/+$/, ''),
        land: raw.forge.land,
        merge: raw.forge.merge,
        webhookSecretEnv: raw.forge.webhook_secret_env,
        ...(raw.forge.required_checks !== undefined && {
          requiredChecks: raw.forge.required_checks.map((c) => (typeof c === 'string' ? { name: c } : c)),
        }),
        trusted: raw.forge.trusted,
        requireHumanApproval: raw.forge.require_human_approval,
        timeoutMs: ms(raw.forge.timeout),
        retries: raw.forge.retries,
        backoffMs: ms(raw.forge.backoff),
      },
    }),
    ...(raw.intake !== undefined && {
      intake: {
        label: raw.intake.label,
        pollMs: ms(raw.intake.poll),
        ...(raw.intake.source === 'linear' && {
          linear: {
            team: (raw.intake.team ?? '').toUpperCase(),
            ...(raw.intake.state !== undefined && { state: raw.intake.state }),
            tokenEnv: raw.intake.token_env ?? LINEAR_DEFAULTS.tokenEnv,
            apiUrl: raw.intake.api_url ?? LINEAR_DEFAULTS.apiUrl,
            timeoutMs: ms(raw.intake.timeout ?? LINEAR_DEFAULTS.timeout),
            retries: raw.intake.retries ?? LINEAR_DEFAULTS.retries,
            backoffMs: ms(raw.intake.backoff ?? LINEAR_DEFAULTS.backoff),
          },
        }),
      },
    }),
    ...(raw.cluster !== undefined && {
      cluster: {
        ...(raw.cluster.database !== undefined && { database: raw.cluster.database }),
        ...(raw.cluster.repository !== undefined && { repository: raw.cluster.repository }),
        leaseMs: ms(raw.cluster.lease),
        jobs: raw.cluster.jobs,
        heartbeatMs: ms(raw.cluster.heartbeat),
      },
    }),
  };
}

/**
 * Parses config TOML. `file` is how problems name it (normally `.tron/config.toml`).
 * The config is returned only when there are no problems.
 */
export function parseConfig(text: string, file: string): ParsedConfig {
  // Editors on Windows save a UTF-8 byte order mark: it is not part of the TOML.
  const toml = parseToml(text.replace(/^\uFEFF/, ''), file, 'TRON_CONFIG_TOML');
  if (toml.problem) return { problems: [toml.problem] };
  const parsed = ConfigTable.safeParse(toml.data);
  if (!parsed.success) {
    // The trunk is checked against the repository in the same pass as the other problems.
    const trunk = ConfigTable.shape.trunk.safeParse(toml.data.trunk);
    return { problems: schemaProblems(parsed.error, toml.data, file, CONFIG_STYLE), ...(trunk.success && { trunk: trunk.data }) };
  }
  const cross = [...forgeProblems(parsed.data, file), ...secretProblems(parsed.data, file)];
  if (cross.length > 0) return { problems: cross, trunk: parsed.data.trunk };
  return { config: toConfig(parsed.data), problems: [], trunk: parsed.data.trunk };
}

/**
 * The forge's intake needs a forge to read issues from (Linear's does not); PR mode needs
 * a remote to push its branches to; a merge queue needs PR mode.
 */
function forgeProblems(raw: z.infer<typeof ConfigTable>, file: string): Problem[] {
  const problems: Problem[] = [...linearIntakeProblems(raw, file)];
  if (raw.intake && raw.intake.source === 'forge' && !raw.forge)
    problems.push({
      code: 'TRON_CONFIG_INVALID',
      path: `${file}: intake`,
      message: '[intake] reads issues from the forge; add a [forge] table with repo = "owner/name", or remove [intake]',
    });
  if (!raw.forge) return problems;
  problems.push(...forgeKindProblems(raw.forge, file));
  if (raw.forge.land === 'pr' && !raw.remote)
    problems.push({
      code: 'TRON_CONFIG_INVALID',
      path: `${file}: forge.land`,
      message:
        'land = "pr" pushes each block\'s branch to the forge\'s repository: add a [remote] table naming the git remote that is it (e.g. name = "origin")',
    });
  if (raw.forge.merge === 'queue' && raw.forge.land !== 'pr')
    problems.push({
      code: 'TRON_CONFIG_INVALID',
      path: `${file}: forge.merge`,
      message: 'merge = "queue" hands pull requests to the merge queue, which only PR mode opens: set land = "pr", or remove merge',
    });
  return problems;
}

/**
 * The variables that hold what is tron's alone — the forge's token and webhook secret,
 * Linear's API key — so that none is handed to a worker or a test run.
 */
function secretProblems(raw: z.infer<typeof ConfigTable>, file: string): Problem[] {
  const problems: Problem[] = [];
  const secret = new Set([
    ...(raw.forge
      ? [
          raw.forge.token_env ?? FORGE_DEFAULTS[raw.forge.kind].tokenEnv,
          'TRON_FORGE_TOKEN',
          raw.forge.webhook_secret_env,
          WEBHOOK_SECRET_ENV,
        ]
      : []),
    ...(raw.intake?.source === 'linear' ? [raw.intake.token_env ?? LINEAR_DEFAULTS.tokenEnv] : []),
  ]);
  const lists: [string, readonly string[]][] = [
    ['test_env', raw.test_env],
    ...Object.entries(raw.workers).map(([role, w]): [string, readonly string[]] => [
      `workers.${role}.env`,
      (w as { env?: string[] } | undefined)?.env ?? [],
    ]),
  ];
  for (const [key, names] of lists)
    for (const name of names)
      if (secret.has(name))
        problems.push({
          code: 'TRON_FORGE_TOKEN_EXPOSED',
          path: `${file}: ${key}`,
          message: `${name} is the forge's token or webhook secret ([forge] token_env, webhook_secret_env) or Linear's API key ([intake] token_env); it is for tron alone and never reaches a worker or a test: remove it from ${key}`,
        });
  return problems;
}

/** A Linear team's key, as it starts its issue ids: a letter, then letters and digits (a name or an id is not one). */
const TEAM_KEY = /^[A-Za-z][A-Za-z0-9]{0,9}$/;
/** The `[intake]` keys that only Linear's intake reads. */
const LINEAR_KEYS = ['team', 'state', 'token_env', 'api_url', 'timeout', 'retries', 'backoff'] as const;

/** `source = "linear"` needs a team, by its key; the Linear keys elsewhere are a mistake, not ignored. */
function linearIntakeProblems(raw: z.infer<typeof ConfigTable>, file: string): Problem[] {
  const intake = raw.intake;
  if (!intake) return [];
  if (intake.source !== 'linear')
    return LINEAR_KEYS.filter((k) => intake[k] !== undefined).map((k) => ({
      code: 'TRON_LINEAR_CONFIG',
      path: `${file}: intake.${k}`,
      message: `${k} is read only from Linear: set source = "linear" to take the issues from a Linear team, or remove ${k} (the forge's intake takes its token and API from [forge])`,
    }));
  if (intake.team === undefined)
    return [
      {
        code: 'TRON_LINEAR_CONFIG',
        path: `${file}: intake.team`,
        message: 'source = "linear" takes the issues of one Linear team: add team = "ENG" (the key its issue ids start with, as in ENG-12)',
      },
    ];
  if (!TEAM_KEY.test(intake.team))
    return [
      {
        code: 'TRON_LINEAR_CONFIG',
        path: `${file}: intake.team`,
        message: `"${intake.team}" is not a Linear team key: give the key its issue ids start with (ENG for ENG-12): a letter, then letters and digits`,
      },
    ];
  return [];
}

/** What each kind asks of `repo` and `api_url` beyond their common form. */
function forgeKindProblems(forge: z.infer<typeof ForgeTable>, file: string): Problem[] {
  const problems: Problem[] = [];
  if (forge.kind === 'github' && !/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/.test(forge.repo))
    problems.push({
      code: 'TRON_CONFIG_INVALID',
      path: `${file}: forge.repo`,
      message: `"${forge.repo}" is not a GitHub repository: give it as "owner/name", e.g. "acme/app" (a group path or a project id is GitLab's: kind = "gitlab")`,
    });
  if (forge.kind === 'gitlab' && forge.api_url !== undefined && !/^https?:\/\/[^/\s]+(?:\/\S*)?\/api\/v4\/*$/.test(forge.api_url))
    problems.push({
      code: 'TRON_CONFIG_INVALID',
      path: `${file}: forge.api_url`,
      message: `"${forge.api_url}" is not a GitLab REST API URL: give the instance's URL with /api/v4, e.g. "https://gitlab.example.com/api/v4" (gitlab.com: leave api_url out)`,
    });
  return problems;
}

/** A parsed config, or its problems; `trunk` whenever the file names a valid branch (or none: the default). */
export interface ParsedConfig {
  config?: Config;
  problems: Problem[];
  trunk?: string;
}

/** Reads and parses `<repo>/.tron/config.toml`. Only reads. */
export function loadConfig(repo: string): ParsedConfig {
  let text: string;
  try {
    text = readFileSync(path.join(repo, CONFIG_FILE), 'utf8');
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code;
    if (why === 'ENOENT') {
      return {
        problems: [
          { code: 'TRON_CONFIG_MISSING', path: CONFIG_FILE, message: `${repo} has no ${CONFIG_FILE}; run tron init --repo ${repo}` },
        ],
      };
    }
    return {
      problems: [
        { code: 'TRON_CONFIG_READ', path: CONFIG_FILE, message: `cannot read it (${why ?? String(err)}); make it a readable file` },
      ],
    };
  }
  return parseConfig(text, CONFIG_FILE);
}

/** The worker settings for a role, or undefined (only the architect is optional). */
export function workerFor(config: Config, role: WorkerRole): WorkerSettings | undefined {
  return config.workers[role];
}
