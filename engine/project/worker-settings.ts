/**
 * The `[workers.<role>]` tables of config.toml, one zod schema per adapter. Unknown keys
 * are errors (strict), so a typo is reported instead of ignored.
 */
import { z } from 'zod';
import { parseDuration } from '../core/duration.ts';

/** What an `env` entry may be: a name, or a name with `*` wildcards and at least one other character. */
export const ENV_ENTRY = /^(?=.*[A-Za-z0-9_])[A-Za-z_*][A-Za-z0-9_*]*$/;

const duration = z.string().refine((s) => parseDuration(s) !== undefined, {
  message: 'a duration like "90s", "20m" or "1h"',
});

/** The stdout formats the command adapter reads (engine/workers/output.ts). */
export const OUTPUT_FORMATS = ['text', 'claude-json', 'codex-jsonl'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export const openaiSettings = z.strictObject({
  adapter: z.literal('openai'),
  model: z.string().min(1),
  base_url: z.string().url().optional(),
  api_key_env: z.string().min(1).default('OPENAI_API_KEY'),
  /**
   * The wire format: `chat` (Chat Completions, the widest-supported; the default) or
   * `responses` (the Responses API, where codex-family models are served).
   */
  api: z.enum(['chat', 'responses']).optional(),
  /** Model calls per turn before the turn fails. */
  max_steps: z.number().int().positive().default(40),
  max_tokens_per_turn: z.number().int().positive().optional(),
  temperature: z.number().min(0).max(2).optional(),
  request_timeout: duration.default('5m'),
  /** Transient failures retried per model call. */
  max_retries: z.number().int().min(0).default(4),
  /** Longest a command tool may run. */
  tool_timeout: duration.default('5m'),
});

/** A path a sandboxed worker may write: absolute, `~/…` (under HOME) or `$NAME/…` (under a variable). */
const writablePath = z.string().refine((s) => /^(~|\$[A-Za-z_][A-Za-z0-9_]*)(\/.*)?$/.test(s) || s.startsWith('/'), {
  message: 'a path the sandbox lets the worker write must be absolute, "~/…" or "$NAME/…", e.g. "~/.claude"',
});

export const commandSettings = z.strictObject({
  adapter: z.literal('command'),
  /** argv; `{prompt}` or `{prompt_file}` in an element passes the prompt as an argument instead of stdin. */
  command: z.array(z.string()).min(1),
  /**
   * Variables passed through beyond the minimal base (PATH, HOME, LANG, TERM): names, or
   * patterns with `*` (`"ANTHROPIC_*"`), which never match tron's own TRON_* variables.
   */
  env: z.array(z.string().regex(ENV_ENTRY, { message: 'a variable name, or a pattern such as "ANTHROPIC_*"' })).default([]),
  /**
   * How to read the CLI's stdout: `text` (the reply as printed), `claude-json` (Claude
   * Code's `--output-format json`) or `codex-jsonl` (Codex's `exec --json`): the reply,
   * the usage and cost, and the CLI's own error text are taken from the structured output.
   * Absent: `text`.
   */
  output: z.enum(OUTPUT_FORMATS).optional(),
  /** Paths the sandbox lets this worker write besides its checkout: the CLI's own state (`~/.claude`, `~/.codex`). */
  writable: z.array(writablePath).default([]),
});

export const simSettings = z.strictObject({
  adapter: z.literal('sim'),
  /** Path to the script of replies and actions, relative to the repository. */
  script: z.string().min(1).optional(),
});

/** `[sandbox] mode`: `auto` uses bubblewrap where it runs, `bwrap` requires it, `off` never sandboxes. */
export const SANDBOX_MODES = ['auto', 'bwrap', 'off'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

export const workerSettings = z.discriminatedUnion('adapter', [openaiSettings, commandSettings, simSettings]);

export type OpenAISettings = z.infer<typeof openaiSettings>;
export type CommandSettings = z.infer<typeof commandSettings>;
export type SimSettings = z.infer<typeof simSettings>;
export type WorkerSettings = z.infer<typeof workerSettings>;
