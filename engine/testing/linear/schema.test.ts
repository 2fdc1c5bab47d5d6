/** Linear's schema as read back from the SDK's declarations, and the test server that validates against it. */
import { LinearDocument } from '@linear/sdk';
import { buildSchema, parse, printSchema, validate } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linearSchema, linearSchemaSDL } from './schema.ts';
import { type LinearServer, startLinearServer } from './server.ts';

describe("Linear's schema, from the SDK", () => {
  it('validates every document the SDK itself sends: the reading of its declarations is faithful', () => {
    // Each as its text: the SDK's typed documents are too many for the type checker to compare as one union.
    const documents = Object.entries(LinearDocument as Record<string, unknown>).filter(([name]) => name.endsWith('Document'));
    expect(documents.length).toBeGreaterThan(500);
    const failing = documents.flatMap(([name, doc]) => {
      const errors = validate(linearSchema(), parse(String(doc)));
      return errors.length > 0 ? [`${name}: ${errors[0]!.message}`] : [];
    });
    expect(failing).toEqual([]);
  });

  it('reads enums, unions, interfaces, inputs, nullability and the arguments of fields', () => {
    const dts = `type Scalars = {
  ID: string;
  String: string;
  DateTime: Date;
};
declare enum Kind {
  /** a comment */
  Done = "completed",
  Open = "unstarted",
}
type Node = {
  id: Scalars["ID"];
};
type Thing = Node & {
  __typename?: "Thing";
  id: Scalars["ID"];
  kind?: Maybe<Kind>;
  tags: Array<Scalars["String"]>;
  children: ThingConnection;
};
type ThingConnection = {
  __typename?: "ThingConnection";
  nodes: Array<Thing>;
};
type Either = Thing | ThingConnection;
type ThingFilter = {
  kind?: InputMaybe<Kind>;
  and?: InputMaybe<Array<ThingFilter>>;
};
type ThingChildrenArgs = {
  filter?: InputMaybe<ThingFilter>;
  first: Scalars["String"];
};
type Query = {
  __typename?: "Query";
  thing?: Maybe<Thing>;
};
type QueryThingArgs = {
  id: Scalars["String"];
};
type ThingFragment = {
  __typename: "Thing";
};
type NotRead = {
  x: Scalars["String"];
};
`;
    const printed = printSchema(buildSchema(linearSchemaSDL(dts)));
    expect(printed).toContain('scalar DateTime');
    expect(printed).toContain('enum Kind {\n  completed\n  unstarted\n}');
    expect(printed).toContain('interface Node {\n  id: ID!\n}');
    expect(printed).toContain(
      'type Thing implements Node {\n  id: ID!\n  kind: Kind\n  tags: [String!]!\n  children(filter: ThingFilter, first: String!): ThingConnection!\n}',
    );
    expect(printed).toContain('union Either = Thing | ThingConnection');
    expect(printed).toContain('input ThingFilter {\n  kind: Kind\n  and: [ThingFilter!]\n}');
    expect(printed).toContain('thing(id: String!): Thing');
    expect(printed).not.toContain('ThingFragment');
    expect(printed).not.toContain('NotRead');
  });
});

describe('the test Linear server', () => {
  let server: LinearServer;
  beforeAll(async () => {
    server = await startLinearServer();
  });
  afterAll(() => server.close());

  const post = async (query: string, key = server.key) => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: key },
      body: JSON.stringify({ query }),
    });
    return { status: res.status, body: (await res.json()) as { data?: unknown; errors?: { message: string }[] } };
  };

  it("answers a query that does not validate against Linear's schema with GraphQL's errors and no data", async () => {
    const bad = await post('query { viewer { id nickname } issues(first: "ten") { nodes { id } } }');
    expect(bad.status).toBe(400);
    expect(bad.body.data).toBeUndefined();
    expect(bad.body.errors!.map((e) => e.message)).toEqual([
      'Cannot query field "nickname" on type "User". Did you mean "name"?',
      'Int cannot represent non-integer value: "ten"',
    ]);
    expect(server.invalid).toHaveLength(1);
    expect((await post('query { viewer { id } }')).body).toEqual({ data: { viewer: { id: server.viewer } } });
  });

  it('refuses a wrong key as Linear does, as an authentication error', async () => {
    const res = await post('query { viewer { id } }', 'lin_api_wrong');
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ errors: [{ extensions: { type: 'authentication error' } }] });
  });
});
