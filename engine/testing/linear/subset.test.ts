/** The committed part of Linear's schema that tron's queries use: as the installed SDK says it, and enough for them. */
import { readFileSync, writeFileSync } from 'node:fs';
import { buildSchema, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { LINEAR_QUERIES } from '../../forge/linear.ts';
import { linearSchema } from './schema.ts';
import { SUBSET_FILE, schemaSubsetSDL, sdkVersion } from './subset.ts';

const queries = Object.values(LINEAR_QUERIES);

describe("the committed part of Linear's schema", () => {
  it('is what the installed SDK says of the types tron queries (WRITE_LINEAR_SCHEMA=1 rewrites it)', () => {
    const wanted = schemaSubsetSDL(linearSchema(), queries, sdkVersion());
    if (process.env.WRITE_LINEAR_SCHEMA === '1') writeFileSync(SUBSET_FILE, wanted);
    expect(readFileSync(SUBSET_FILE, 'utf8')).toBe(wanted);
  });

  it("builds on its own, and every one of tron's queries validates against it and against the whole schema", () => {
    const subset = buildSchema(readFileSync(SUBSET_FILE, 'utf8'));
    for (const q of queries) {
      expect(validate(subset, parse(q)), q).toEqual([]);
      expect(validate(linearSchema(), parse(q)), q).toEqual([]);
    }
  });
});
