/**
 * One line of the event log, checked against the event table. The writer checks each
 * line with the same function the reader uses, so whatever is appended reads back
 * exactly as it was returned.
 */
import { z } from 'zod';
import { EVENT_SCHEMAS, EVENT_VERSION, type EventType, type TronEvent, UPGRADES } from '../core/events.ts';
import { FaultError } from '../core/errors.ts';

/** An event body that does not match its schema: a bug in the engine, not a user mistake. */
export class EventInvalidError extends FaultError<'TRON_EVENT_INVALID'> {
  constructor(
    readonly type: string,
    reason: string,
  ) {
    super('TRON_EVENT_INVALID', `event ${type}: ${reason}; the engine built an event its schema in engine/core/events.ts does not allow`);
  }
}

/** The fields every line carries, whatever its type (docs/EVENTS.md renders this too). */
export const ENVELOPE = z.object({
  v: z.number().int().min(1).describe(`schema version of the line (now ${EVENT_VERSION}); lines of earlier versions still read`),
  seq: z.number().int().positive().describe('1 for the first line, then rising by exactly one'),
  ts: z.number().int().nonnegative().describe("ms since the epoch, from the engine's clock"),
  type: z.string().describe('the dotted event type: one of the types below'),
  mac: z
    .string()
    .optional()
    .describe(
      "v2, where the repository has a key: the line's signature, chained to the line before (the last field of the line); a line that does not follow the chain was not written by tron, and is set aside",
    ),
});

const strictSchemas = new Map<string, z.ZodObject>();
function strictSchema(type: EventType): z.ZodObject {
  let schema = strictSchemas.get(type);
  if (!schema) {
    schema = EVENT_SCHEMAS[type].strict() as z.ZodObject;
    strictSchemas.set(type, schema);
  }
  return schema;
}

export type LineResult = { ok: true; event: TronEvent } | { ok: false; type?: string; reason: string };

/** Parses and checks one line (without its newline) that must carry `seq`. */
export function parseEventLine(text: string, seq: number): LineResult {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return { ok: false, reason: 'not a JSON object' };
  // A signed line's mac is the chain's, checked by the reader that knows the key (eventlog.ts).
  const { v, seq: s, ts, type, mac: _mac, ...read } = json as Record<string, unknown>;
  const env = ENVELOPE.safeParse({ v, seq: s, ts, type });
  if (!env.success) return { ok: false, reason: `envelope: ${describeIssues(env.error.issues)}` };
  const head = env.data;
  if (!Object.hasOwn(EVENT_SCHEMAS, head.type)) return { ok: false, type: head.type, reason: `unknown event type "${head.type}"` };
  if (head.v > EVENT_VERSION) {
    return {
      ok: false,
      type: head.type,
      reason: `v is ${head.v} but this tron reads up to v${EVENT_VERSION}; upgrade tron to read this log`,
    };
  }
  if (head.seq !== seq) return { ok: false, type: head.type, reason: `seq is ${head.seq}, expected ${seq}` };
  const upgrade = head.v < EVENT_VERSION ? UPGRADES[head.type as EventType] : undefined;
  const fields = upgrade ? upgrade(read, head.v) : read;
  const body = strictSchema(head.type as EventType).safeParse(fields);
  if (!body.success) return { ok: false, type: head.type, reason: `${head.type}: ${describeIssues(body.error.issues)}` };
  const dropped = droppedPaths(fields, body.data);
  if (dropped.length > 0) return { ok: false, type: head.type, reason: `${head.type}: unrecognized field ${dropped.join(', ')}` };
  return { ok: true, event: { v: head.v, seq: head.seq, ts: head.ts, type: head.type, ...body.data } as TronEvent };
}

/** For the writer: the event the line holds, or EventInvalidError naming the type and the issue. */
export function validateEvent(text: string, seq: number): TronEvent {
  const result = parseEventLine(text, seq);
  if (!result.ok) throw new EventInvalidError(result.type ?? '(none)', result.reason);
  return result.event;
}

function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ');
}

/**
 * Paths present in the input but missing from the parsed output: a nested schema that
 * strips unknown keys would otherwise lose data without a word.
 */
function droppedPaths(input: unknown, output: unknown, at = ''): string[] {
  if (Array.isArray(input) && Array.isArray(output)) {
    return input.flatMap((item, i) => droppedPaths(item, output[i], `${at}[${i}]`));
  }
  if (!isPlainObject(input) || !isPlainObject(output)) return [];
  return Object.keys(input).flatMap((key) => {
    const path = at ? `${at}.${key}` : key;
    return Object.hasOwn(output, key) ? droppedPaths(input[key], output[key], path) : [path];
  });
}

function isPlainObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}
