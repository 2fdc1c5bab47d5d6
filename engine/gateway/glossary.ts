/**
 * The closed vocabulary of the `>>` gateway: one table of every legal word, who may
 * send it, in which phases, the schema of its payload and what it means. The parser,
 * the legal-word lists in prompts and docs/GLOSSARY.md all derive from this table.
 */
import { z } from 'zod';
import type { Role } from '../core/roles.ts';

const text = z.string().min(1);

export interface WordSpec {
  /** Sender roles that may use the word. */
  roles: readonly Role[];
  /** Block phases (names in engine/workflow.toml) in which the word is legal. */
  phases: readonly string[];
  /** Schema of the JSON payload. */
  payload: z.ZodType;
  /** Whether the payload may be left off entirely. */
  payloadOptional: boolean;
  /** One line: what the word means and what the engine does with it. */
  meaning: string;
}

const ACTIVE = ['build', 'review', 'merge'] as const;

export const GLOSSARY = {
  DONE: {
    roles: ['builder'],
    phases: ['build'],
    payload: z.strictObject({ summary: text.optional() }),
    payloadOptional: true,
    meaning: 'The builder claims the block is built. The engine checks the facts itself before believing it.',
  },
  CONFIRMED: {
    roles: ['builder'],
    phases: ['build'],
    payload: z.strictObject({
      evidence: z.record(
        // The examples are what describePayload shows: {"c1": str, "c2": str, …}.
        z
          .string()
          .regex(/^c[1-9][0-9]*$/, 'keys are c1, c2, … by criterion number')
          .meta({ examples: ['c1', 'c2'] }),
        text,
      ),
    }),
    payloadOptional: false,
    meaning: 'Answer to the challenge: evidence for every acceptance criterion, keyed c1…cN in order.',
  },
  BLOCKED: {
    roles: ['builder'],
    phases: ['build', 'merge'],
    payload: z.strictObject({ reason: text }),
    payloadOptional: false,
    meaning: 'The builder cannot go on without help; the block goes to the exception spine.',
  },
  WORKING: {
    roles: ['builder', 'reviewer'],
    phases: ACTIVE,
    payload: z.strictObject({ progress: text.optional() }),
    payloadOptional: true,
    meaning: 'Answer to a liveness probe: the worker is alive and still on the turn.',
  },
  MERGED: {
    roles: ['builder'],
    phases: ['merge'],
    payload: z.strictObject({ summary: text.optional() }),
    payloadOptional: true,
    meaning:
      'The builder brought its branch up to date with trunk (a conflict the engine could not rebase). The engine re-checks facts and tests at the new head; then it enters the merge lane.',
  },
  APPROVE: {
    roles: ['reviewer'],
    phases: ['review'],
    payload: z.strictObject({ notes: text.optional() }),
    payloadOptional: true,
    meaning: 'The reviewer accepts the attested sha; the block moves to merge.',
  },
  CHANGES: {
    roles: ['reviewer'],
    phases: ['review'],
    payload: z.strictObject({ notes: text }),
    payloadOptional: false,
    meaning: 'The reviewer asks for changes; the block returns to build with the notes.',
  },
  RETRY: {
    roles: ['architect', 'operator'],
    phases: [...ACTIVE, 'parked'],
    payload: z.strictObject({ guidance: text }),
    payloadOptional: false,
    meaning: "Re-dispatch the block to build from trunk, with the guidance in the builder's prompt.",
  },
  ABANDON: {
    roles: ['architect', 'operator'],
    phases: [...ACTIVE, 'parked'],
    payload: z.strictObject({ reason: text }),
    payloadOptional: false,
    meaning: 'Give the block up; it and every block that depends on it are parked with the reason.',
  },
  PAGE: {
    roles: ['architect'],
    phases: ACTIVE,
    payload: z.strictObject({ reason: text }),
    payloadOptional: false,
    meaning: 'Hand the block to the human operator, with the reason.',
  },
} as const satisfies Record<string, WordSpec>;

export type Word = keyof typeof GLOSSARY;
export const WORDS = Object.keys(GLOSSARY) as Word[];

export type PayloadOf<W extends Word> = z.infer<(typeof GLOSSARY)[W]['payload']>;
