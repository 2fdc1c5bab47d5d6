/**
 * A command that reads runs from tron's database (`status`, `logs`, `report`, `replay`,
 * `view`, `serve`) and loses its connection midway — the database restarted, the network
 * dropped, an operator ended its backend — says so with a database code, not as tron's own
 * failure: it changed nothing, and the same command works again once the database answers.
 * (The engine's own loss is TRON_DB_LOST, log/pg-log.ts.)
 */
import { coded } from '../core/problems.ts';

/** PostgreSQL's SQLSTATEs of a connection ended by the server: class 08, and admin/crash shutdown, cannot connect now. */
const ENDED_STATES = /^(08|57P0[123]$)/;
/** Node's socket errors for a connection that broke. */
const SOCKET_ERRORS = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
/** node-postgres's words for a client whose connection broke (it gives them no code). */
const ENDED_WORDS = /Connection terminated|not queryable|terminating connection/;

/** Whether `err` is a database connection that broke (not a refused query, not a mistake in the URL). */
export function isConnectionLoss(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  return ENDED_STATES.test(code) || SOCKET_ERRORS.has(code) || ENDED_WORDS.test(String(e?.message ?? ''));
}

/** The coded line of a reading command that lost the database. */
export function readLostLine(command: string, err: unknown): string {
  const reason = String((err as { message?: unknown } | undefined)?.message ?? err).split('\n')[0]!;
  return coded(
    'TRON_DB_READ_LOST',
    `tron ${command} lost its connection to tron's database (${reason}); it changed nothing — run it again once the database answers`,
  );
}
