/**
 * The part of Linear's schema that tron's own queries use (engine/forge/linear.ts's
 * LINEAR_QUERIES), as SDL: each object type with only the fields tron selects (and their
 * arguments), each input, enum and scalar those arguments and variables reach, whole. It
 * is committed (schema.graphql beside this file) so that what tron depends on in Linear
 * can be read, and so that a new @linear/sdk that changes any of it fails subset.test.ts
 * and shows the change as a diff. The test server validates against the whole schema.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  type GraphQLType,
  getNamedType,
  isInputObjectType,
  isInterfaceType,
  parse,
  printType,
  TypeInfo,
  typeFromAST,
  visit,
  visitWithTypeInfo,
} from 'graphql';

/** Where the committed subset is. */
export const SUBSET_FILE = join(dirname(fileURLToPath(import.meta.url)), 'schema.graphql');

/** The installed SDK's version, for the file's header. */
export function sdkVersion(): string {
  const pkg = join(dirname(fileURLToPath(import.meta.resolve('@linear/sdk'))), '..', 'package.json');
  return (JSON.parse(readFileSync(pkg, 'utf8')) as { version: string }).version;
}

/** The SDL of the part of `schema` that `documents` use, under a header naming where it came from. */
export function schemaSubsetSDL(schema: GraphQLSchema, documents: readonly string[], version: string): string {
  const selected = new Map<string, Map<string, GraphQLField<unknown, unknown>>>();
  const leaves = new Map<string, GraphQLNamedType>();
  const reach = (type: GraphQLType | undefined) => {
    if (!type) return;
    const named = getNamedType(type);
    if (leaves.has(named.name)) return;
    if (isInputObjectType(named)) {
      leaves.set(named.name, named);
      for (const f of Object.values(named.getFields())) reach(f.type);
    } else if (!('getFields' in named)) leaves.set(named.name, named);
  };
  for (const text of documents) {
    const info = new TypeInfo(schema);
    visit(
      parse(text),
      visitWithTypeInfo(info, {
        Field() {
          const parent = info.getParentType();
          const field = info.getFieldDef();
          if (!parent || !field) return;
          if (!selected.has(parent.name)) selected.set(parent.name, new Map());
          selected.get(parent.name)!.set(field.name, field);
          for (const a of field.args) reach(a.type);
          reach(field.type);
        },
        VariableDefinition(node) {
          reach(typeFromAST(schema, node.type as never) as GraphQLType | undefined);
        },
      }),
    );
  }
  const header = [
    "# Linear's GraphQL schema: the part tron's queries use (engine/forge/linear.ts, LINEAR_QUERIES) — each",
    '# type with the fields tron selects, each input, enum and scalar they reach whole. Generated from the',
    `# declarations of @linear/sdk ${version}, which Linear's code generator wrote from its schema`,
    '# (engine/testing/linear/schema.ts reads them back; subset.ts cuts this out). Do not edit; to regenerate:',
    '#   WRITE_LINEAR_SCHEMA=1 npx vitest run engine/testing/linear/subset.test.ts',
  ];
  const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const objects = [...selected.keys()].sort(byName).map((name) => {
    const kind = isInterfaceType(schema.getType(name)) ? 'interface' : 'type';
    const fields = [...selected.get(name)!.values()].map((f) => {
      const args = f.args.length > 0 ? `(${f.args.map((a) => `${a.name}: ${String(a.type)}`).join(', ')})` : '';
      return `  ${f.name}${args}: ${String(f.type)}`;
    });
    return `${kind} ${name} {\n${fields.join('\n')}\n}`;
  });
  const rest = [...leaves.keys()]
    .filter((n) => !['String', 'Int', 'Float', 'Boolean', 'ID'].includes(n))
    .sort(byName)
    .map((n) => printType(leaves.get(n)!));
  return `${header.join('\n')}\n\n${[...objects, ...rest].join('\n\n')}\n`;
}
