/**
 * What to do about a failed model call, decided by pure functions: transient failures
 * (rate limits, 5xx, dropped or timed-out connections, garbled bodies) are retried with
 * capped exponential backoff that honours Retry-After; a refused key or a rejected
 * request fails fast, because retrying cannot fix configuration.
 */
import { APIConnectionError, APIError, APIUserAbortError } from 'openai';

export type CallFailure =
  /** Worth another try after `retryAfterMs` (from the server) or the backoff. */
  | { kind: 'transient'; status?: number; message: string; retryAfterMs?: number }
  /** The key was refused (401/403): the user must fix the key or api_key_env. */
  | { kind: 'auth'; status: number; message: string }
  /** The request was rejected (400/404/422…): usually model or base_url is wrong. */
  | { kind: 'request'; status: number; message: string }
  /** The call was aborted by the turn's own signal. */
  | { kind: 'aborted' }
  /** Not an API failure at all: a bug, reported as a crash. */
  | { kind: 'unexpected'; message: string };

/** First backoff; doubles per attempt up to BACKOFF_CAP_MS. */
export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_CAP_MS = 30_000;
/** Longest Retry-After honoured; a server asking for more is waited on this long, then asked again. */
export const RETRY_AFTER_CAP_MS = 300_000;

/** Statuses that are worth retrying. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

/** A response that is not a chat completion (a proxy's HTML page, a truncated body). */
export class MalformedResponseError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedResponseError';
  }
}

/** Classifies an error thrown by `chat.completions.create`. `now` is for HTTP-date Retry-After. */
export function classifyFailure(error: unknown, now: number): CallFailure {
  if (error instanceof APIUserAbortError) return { kind: 'aborted' };
  if (error instanceof APIConnectionError) {
    const cause = (error as { cause?: unknown }).cause;
    const detail = cause instanceof Error && cause.message && cause.message !== error.message ? ` (${cause.message})` : '';
    return { kind: 'transient', message: `${error.message}${detail}` };
  }
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    if (status === 401 || status === 403) return { kind: 'auth', status, message: error.message };
    if (isTransientStatus(status)) {
      return { kind: 'transient', status, message: error.message, retryAfterMs: retryAfterMs(error.headers, now) };
    }
    return { kind: 'request', status, message: error.message };
  }
  if (error instanceof SyntaxError || error instanceof MalformedResponseError) {
    return { kind: 'transient', message: `the model server sent a malformed response: ${error.message}` };
  }
  if (error instanceof Error && /terminated|socket|ECONNRESET|other side closed/i.test(error.message)) {
    // A body cut off mid-read surfaces from fetch as a plain TypeError("terminated").
    return { kind: 'transient', message: `the connection broke while reading the response: ${error.message}` };
  }
  return { kind: 'unexpected', message: error instanceof Error ? error.message : String(error) };
}

/**
 * The wait the server asked for, in ms: `retry-after-ms`, or `Retry-After` as seconds
 * or an HTTP date. Undefined when absent or unreadable.
 */
export function retryAfterMs(headers: Headers | undefined, now: number): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const value = headers.get('retry-after');
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds >= 0 ? Math.round(seconds * 1000) : undefined;
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/** The delay before retry number `attempt` (1-based): the server's wish if given, else backoff. */
export function retryDelayMs(attempt: number, serverMs: number | undefined): number {
  if (serverMs !== undefined) return Math.min(serverMs, RETRY_AFTER_CAP_MS);
  return Math.min(BACKOFF_BASE_MS * 2 ** (attempt - 1), BACKOFF_CAP_MS);
}
