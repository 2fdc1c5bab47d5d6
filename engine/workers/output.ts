/**
 * Reading what a CLI agent printed: the reply, the usage and cost it reports, and its own
 * error text when the turn failed. A CLI run in its structured output mode says all three
 * plainly, so tron takes them from there instead of guessing from prose:
 *
 * - `claude-json` — Claude Code's `-p --output-format json`: one JSON object,
 *   `{"type":"result","is_error":…,"result":"…","total_cost_usd":…,"usage":{…},
 *   "modelUsage":{"<model>":{"inputTokens","outputTokens","cacheReadInputTokens",
 *   "cacheCreationInputTokens","costUSD"}}}`. Its errors (`Not logged in · Please run
 *   /login`, `API Error: …`) are the `result` of an object with `is_error: true`.
 * - `codex-jsonl` — Codex's `exec --json`: one event a line; the reply is the text of the
 *   last `item.completed` whose item is an `agent_message`; usage is on `turn.completed`
 *   (`input_tokens` counts the cached ones too); a failure is `turn.failed` with
 *   `error.message`, and `error` events carry the retries before it. Codex does not name
 *   its model in these events: the model is taken from `-m`/`--model` in the argv.
 * - `text` — stdout is the reply; nothing else is known.
 *
 * Output that does not parse in the configured format is taken as text, so a
 * misconfigured `output` still shows the worker's words to the gateway (which refuses
 * them if they carry no `>>` line) rather than losing them.
 */
import type { Usage } from './adapter.ts';
import type { FailureCause } from '../core/roles.ts';
import type { OutputFormat } from '../project/worker-settings.ts';

export interface ReadOutput {
  /** The reply text (the whole stdout for `text`). */
  reply: string;
  /** The CLI's own words for why the turn failed, when its output says it failed. */
  error?: string;
  /** Usage it reported: one entry per model. */
  usage: Usage[];
  /** Whether the output was in the configured structured format. */
  structured: boolean;
}

/** Reads a turn's stdout in the worker's configured format. `argv` names the model where the output does not. */
export function readOutput(format: OutputFormat, stdout: string, argv: readonly string[]): ReadOutput {
  if (format === 'claude-json') return readClaudeJson(stdout, argv) ?? asText(stdout);
  if (format === 'codex-jsonl') return readCodexJsonl(stdout, argv) ?? asText(stdout);
  return asText(stdout);
}

function asText(stdout: string): ReadOutput {
  return { reply: stdout, usage: [], structured: false };
}

type Json = Record<string, unknown>;

function objectOf(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}

const num = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0);
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The value after `-m`/`--model` (or `--model=…`) in an argv. */
export function modelFromArgv(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if ((arg === '-m' || arg === '--model') && argv[i + 1]) return argv[i + 1];
    if (arg.startsWith('--model=')) return arg.slice('--model='.length);
  }
  return undefined;
}

/** Claude Code's result object: the whole stdout, or its last line that is one (warnings may precede it). */
function readClaudeJson(stdout: string, argv: readonly string[]): ReadOutput | undefined {
  let result = objectOf(stdout.trim());
  if (result?.type !== 'result') {
    result = undefined;
    for (const line of stdout.split('\n').reverse()) {
      const o = objectOf(line.trim());
      if (o?.type === 'result') {
        result = o;
        break;
      }
    }
  }
  if (!result) return undefined;
  const text = str(result.result) ?? '';
  const failed = result.is_error === true || (str(result.subtype)?.startsWith('error') ?? false);
  const errors = Array.isArray(result.errors) ? result.errors.filter((e): e is string => typeof e === 'string') : [];
  const error = failed ? text.trim() || errors.join('; ') || str(result.subtype) || 'the CLI reported an error' : undefined;
  return { reply: failed ? '' : text, ...(error !== undefined ? { error } : {}), usage: claudeUsage(result, argv), structured: true };
}

function claudeUsage(result: Json, argv: readonly string[]): Usage[] {
  const byModel = typeof result.modelUsage === 'object' && result.modelUsage !== null ? (result.modelUsage as Record<string, Json>) : {};
  const usage: Usage[] = [];
  for (const [model, u] of Object.entries(byModel)) {
    if (typeof u !== 'object' || u === null) continue;
    usage.push({
      model,
      inputTokens: num(u.inputTokens) + num(u.cacheCreationInputTokens),
      cachedTokens: num(u.cacheReadInputTokens),
      outputTokens: num(u.outputTokens),
      ...(typeof u.costUSD === 'number' ? { costUsd: num(u.costUSD) } : {}),
    });
  }
  if (usage.length === 0 && typeof result.usage === 'object' && result.usage !== null) {
    const u = result.usage as Json;
    usage.push({
      model: modelFromArgv(argv) ?? 'claude',
      inputTokens: num(u.input_tokens) + num(u.cache_creation_input_tokens),
      cachedTokens: num(u.cache_read_input_tokens),
      outputTokens: num(u.output_tokens),
      ...(typeof result.total_cost_usd === 'number' ? { costUsd: num(result.total_cost_usd) } : {}),
    });
  }
  return usage.filter(spent);
}

/** Codex's event lines. */
function readCodexJsonl(stdout: string, argv: readonly string[]): ReadOutput | undefined {
  const events = stdout
    .split('\n')
    .map((line) => objectOf(line.trim()))
    .filter((e): e is Json => typeof e?.type === 'string');
  if (events.length === 0) return undefined;
  let reply = '';
  let failure: string | undefined;
  let lastError: string | undefined;
  const total = { input: 0, cached: 0, output: 0 };
  let turns = 0;
  for (const e of events) {
    const item = typeof e.item === 'object' && e.item !== null ? (e.item as Json) : undefined;
    if (e.type === 'item.completed' && item?.type === 'agent_message') reply = str(item.text) ?? reply;
    else if (e.type === 'turn.completed' && typeof e.usage === 'object' && e.usage !== null) {
      const u = e.usage as Json;
      turns += 1;
      const cached = num(u.cached_input_tokens);
      total.input += Math.max(0, num(u.input_tokens) - cached);
      total.cached += cached;
      total.output += num(u.output_tokens);
    } else if (e.type === 'turn.failed') {
      const error = typeof e.error === 'object' && e.error !== null ? str((e.error as Json).message) : undefined;
      failure = error ?? 'the turn failed';
    } else if (e.type === 'error') lastError = str(e.message) ?? lastError;
  }
  const usage: Usage[] =
    turns > 0
      ? [{ model: modelFromArgv(argv) ?? 'codex', inputTokens: total.input, cachedTokens: total.cached, outputTokens: total.output }]
      : [];
  const error = failure ?? (reply === '' ? lastError : undefined);
  return { reply: failure ? '' : reply, ...(error !== undefined ? { error } : {}), usage: usage.filter(spent), structured: true };
}

function spent(u: Usage): boolean {
  return u.inputTokens + u.cachedTokens + u.outputTokens > 0 || (u.costUsd ?? 0) > 0;
}

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)/g;

/** At most `max` characters from the end of `text`, marked with … when cut. */
export function boundedTail(text: string, max = 2000): string {
  const trimmed = text.trimEnd();
  return trimmed.length > max ? `…${trimmed.slice(-max)}` : trimmed;
}

/** The last line of `text` that says something: escapes stripped, blank and punctuation-only lines skipped. */
export function lastMeaningfulLine(text: string): string | undefined {
  const lines = text.replace(ANSI, '').split(/\r?\n|\r/);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim();
    if (/[\p{L}\p{N}]/u.test(line)) return line.length > 300 ? `${line.slice(0, 300)}…` : line;
  }
  return undefined;
}

const CAUSES: Array<[FailureCause, RegExp]> = [
  [
    'auth',
    /not logged in|please run \/login|log ?in again|codex login|invalid (?:x-)?api[ _-]?key|incorrect api key|authentication[_ ]error|\b401\b|unauthori[sz]ed|oauth token (?:has )?expired|invalid bearer token|missing (?:an )?api key|api key (?:is )?(?:not set|missing|invalid)|permission_error|\b403\b forbidden/i,
  ],
  [
    'quota',
    /usage limit|insufficient[_ ]quota|quota exceeded|exceeded your current quota|credit balance is too low|rate[_ ]limit(?:ed)? (?:reached|exceeded)/i,
  ],
  [
    'network',
    /can'?t reach|unable to connect|connection (?:refused|reset|error|failed)|econnrefused|econnreset|enotfound|eai_again|etimedout|ehostunreach|enetunreach|name does not resolve|failed to lookup address|network is unreachable|error sending request|socket hang up|getaddrinfo|certificate verify failed|unable to (?:get|verify) (?:the )?(?:local issuer )?certificate|self[- ]signed certificate|stream disconnected/i,
  ],
];

/** The cause a CLI's error text names, if it names one tron knows: auth, quota or network. */
export function failureCause(text: string): FailureCause | undefined {
  for (const [cause, re] of CAUSES) if (re.test(text)) return cause;
  return undefined;
}
