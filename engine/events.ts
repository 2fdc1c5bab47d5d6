/**
 * The event types: one zod schema per dotted `type`, in one table. The log writer
 * validates every line against it and docs/EVENTS.md is rendered from it, so an event
 * cannot exist without a schema and a description.
 *
 * Every line carries `v` (schema version), `seq` (1, 2, … with no gaps), `ts` (ms since
 * the epoch, from the injected clock) and `type`. Block-scoped events carry `block`.
 */
import { z } from 'zod';

export const EVENT_VERSION = 1;

const block = z.string().describe('the block id');
const sha = z.string().regex(/^[0-9a-f]{40}$/);

const fact = z.object({
  name: z.string(),
  ok: z.boolean(),
  evidence: z.string(),
});
export type Fact = z.infer<typeof fact>;

/** The table. Keys are the dotted types; each schema holds the fields beyond v/seq/ts/type. */
export const EVENT_SCHEMAS = {
  'run.started': z
    .object({
      run: z.string(),
      version: z.string(),
      trunk: z.string(),
      trunk_sha: sha,
      pid: z.number().int(),
    })
    .describe('The engine started a run and holds the log.'),
  'run.finished': z
    .object({
      reason: z.enum(['done', 'signal', 'error']),
      exit: z.number().int(),
      landed: z.array(z.string()),
      parked: z.array(z.string()),
      abandoned: z.array(z.string()),
    })
    .describe('The run ended; the log is closed.'),
  'block.dispatched': z
    .object({
      block,
      role: z.string(),
      session: z.string(),
      turn: z.number().int().positive(),
      kind: z.string(),
      phase: z.string(),
    })
    .describe('A worker turn was issued for a block.'),
  'reply.received': z
    .object({
      block,
      role: z.string(),
      session: z.string(),
      turn: z.number().int().positive(),
      ok: z.boolean(),
      reply: z.string().optional(),
      failure: z.string().optional(),
      detail: z.string().optional(),
    })
    .describe('A worker turn ended: its raw reply, or why the turn failed.'),
  'gate.passed': z
    .object({ block, sha, facts: z.array(fact) })
    .describe('Every fact of the truth gate held at this sha; it is now the attested sha.'),
  'gate.failed': z
    .object({ block, sha: sha.optional(), facts: z.array(fact) })
    .describe('A fact of the truth gate failed; the block goes back to build or escalates.'),
  'block.landed': z
    .object({ block, sha, from: sha })
    .describe('Trunk was fast-forwarded to the block head, with refs/tron/landed/<id>, in one ref transaction.'),
  'escalation.raised': z
    .object({ block, trouble: z.string(), detail: z.string(), handler: z.string() })
    .describe('A block entered the exception spine; names the trouble and the handler it goes to.'),
  'page.sent': z
    .object({ block, reason: z.string(), page: z.string() })
    .describe('The operator was paged about a block.'),
} as const satisfies Record<string, z.ZodObject>;

export type EventType = keyof typeof EVENT_SCHEMAS;

/** Fields every line carries. */
export interface EventEnvelope {
  v: number;
  seq: number;
  ts: number;
}

export type EventOf<T extends EventType> = EventEnvelope & { type: T } & z.infer<(typeof EVENT_SCHEMAS)[T]>;
export type TronEvent = { [T in EventType]: EventOf<T> }[EventType];
/** An event before the writer stamps it with v, seq and ts. */
export type EventBody = { [T in EventType]: { type: T } & z.infer<(typeof EVENT_SCHEMAS)[T]> }[EventType];
