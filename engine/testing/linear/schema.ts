/**
 * Linear's GraphQL schema, for the test server (server.ts) to validate every query
 * against. @linear/sdk ships no `schema.graphql`, but its type declarations are the
 * output of graphql-codegen's `typescript` plugin run over Linear's schema: one TS type
 * per schema type, in a fixed form. This reads that form back into SDL, all of it, from
 * the installed (exactly pinned) SDK, so the schema is the one the client was built
 * against, never a hand-kept copy that drifts:
 *
 * - `declare enum E { A = "a" }`                  → `enum E { a }`
 * - `type T = I & J & { __typename?: "T"; … }`    → `type T implements I & J { … }`
 * - a `{ … }` type with no `__typename` named in such an intersection → an interface;
 *   `<Type><Field>Args` → the arguments of `Type.field`; any other → an input type
 * - `type U = A | B;`                              → `union U = A | B`
 * - a field `f?: Maybe<X>` / `InputMaybe<X>` is nullable, `f: X` non-null, `Array<X>` is
 *   `[X!]` (codegen writes a nullable item as `Array<Maybe<X>>`, which Linear has none of).
 *
 * Defaults of arguments and descriptions are not in the declarations and are not needed
 * to validate. `schema.test.ts` proves the reading: every document the SDK itself sends
 * validates against it. The part tron's own queries use is committed beside this file
 * (schema.graphql, cut out by subset.ts) for reading and review.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSchema, type GraphQLSchema } from 'graphql';

interface Field {
  name: string;
  type: string;
}
interface Shape {
  name: string;
  implements: string[];
  typename: boolean;
  fields: Field[];
}

const BUILT_IN = new Set(['ID', 'String', 'Boolean', 'Int', 'Float']);

/** A declared type expression as a GraphQL type reference. */
function typeRef(ts: string, optional: boolean): string {
  let t = ts.trim();
  let nullable = optional;
  const maybe = /^(?:Input)?Maybe<(.+)>$/.exec(t);
  if (maybe) {
    t = maybe[1]!;
    nullable = true;
  }
  const list = /^Array<(.+)>$/.exec(t);
  const inner = list ? `[${typeRef(list[1]!, false)}]` : (/^Scalars\["(\w+)"\]$/.exec(t)?.[1] ?? t);
  if (!/^[\w[\]!]+$/.test(inner)) throw new Error(`linear schema: cannot read the type ${ts}`);
  return nullable ? inner : `${inner}!`;
}

/** The SDL of the schema the SDK's declarations `dts` were generated from. */
export function linearSchemaSDL(dts: string): string {
  const lines = dts.split('\n');
  const start = lines.findIndex((l) => l.startsWith('type Scalars = {'));
  if (start < 0) throw new Error('linear schema: no `type Scalars` in the declarations');
  const scalars: string[] = [];
  const enums = new Map<string, string[]>();
  const shapes = new Map<string, Shape>();
  const unions = new Map<string, string[]>();
  let i = start + 1;
  for (; lines[i] !== '};'; i++) {
    const m = /^ {2}(\w+): /.exec(lines[i]!);
    if (m && !BUILT_IN.has(m[1]!)) scalars.push(m[1]!);
  }
  for (i++; i < lines.length; i++) {
    const line = lines[i]!;
    // The operations' and fragments' types follow the schema's: the schema ends there.
    if (/^type \w+Fragment = /.test(line)) break;
    const e = /^declare enum (\w+) \{$/.exec(line);
    if (e) {
      const values: string[] = [];
      for (i++; lines[i] !== '}'; i++) {
        const v = /^ {2}\w+ = "(\w+)",?$/.exec(lines[i]!);
        if (v) values.push(v[1]!);
      }
      enums.set(e[1]!, values);
      continue;
    }
    const u = /^type (\w+) = (\w+(?: \| \w+)+);$/.exec(line);
    if (u) {
      unions.set(u[1]!, u[2]!.split(' | '));
      continue;
    }
    const t = /^type (\w+) = ((?:\w+ & )*)\{$/.exec(line);
    if (!t) continue;
    const shape: Shape = { name: t[1]!, implements: t[2]!.split(' & ').filter(Boolean), typename: false, fields: [] };
    for (i++; lines[i] !== '};'; i++) {
      const f = /^ {2}(\w+)(\?)?: (.+);$/.exec(lines[i]!);
      if (!f) continue;
      if (f[1] === '__typename') shape.typename = true;
      else shape.fields.push({ name: f[1]!, type: typeRef(f[3]!, f[2] === '?') });
    }
    shapes.set(shape.name, shape);
  }
  const interfaces = new Set([...shapes.values()].flatMap((s) => s.implements));
  const outputs = [...shapes.values()].filter((s) => s.typename || interfaces.has(s.name));
  const byName = new Map(outputs.map((s) => [s.name, s]));
  const args = new Map<string, Field[]>();
  const consumed = new Set<string>();
  for (const s of shapes.values()) {
    if (byName.has(s.name) || !s.name.endsWith('Args')) continue;
    const owner = argsOwner(s.name.slice(0, -4), byName);
    if (!owner) continue;
    args.set(owner, s.fields);
    consumed.add(s.name);
  }
  const out: string[] = scalars.map((s) => `scalar ${s}`);
  for (const [name, values] of enums) out.push(`enum ${name} {\n${values.map((v) => `  ${v}`).join('\n')}\n}`);
  for (const [name, members] of unions) out.push(`union ${name} = ${members.join(' | ')}`);
  for (const s of shapes.values()) {
    if (consumed.has(s.name)) continue;
    const kind = s.typename ? 'type' : interfaces.has(s.name) ? 'interface' : 'input';
    const impl = kind !== 'input' && s.implements.length > 0 ? ` implements ${s.implements.join(' & ')}` : '';
    const fields = s.fields.map((f) => {
      const a = kind === 'input' ? undefined : args.get(`${s.name}.${f.name}`);
      const list = a && a.length > 0 ? `(${a.map((x) => `${x.name}: ${x.type}`).join(', ')})` : '';
      return `  ${f.name}${list}: ${f.type}`;
    });
    out.push(`${kind} ${s.name}${impl} {\n${fields.join('\n')}\n}`);
  }
  return `${out.join('\n\n')}\n`;
}

/** `IssueComments` (of `IssueCommentsArgs`) → "Issue.comments": the longest type name it starts with whose field it names. */
function argsOwner(stem: string, types: ReadonlyMap<string, Shape>): string | undefined {
  for (let cut = stem.length - 1; cut > 0; cut--) {
    const owner = types.get(stem.slice(0, cut));
    // Codegen camel-cases the field's name: `attachmentLinkURL`'s arguments are `…AttachmentLinkUrlArgs`.
    const rest = stem.slice(cut).toLowerCase();
    const field = owner?.fields.find((f) => f.name.toLowerCase() === rest);
    if (field) return `${owner!.name}.${field.name}`;
  }
  return undefined;
}

/** The declarations of the installed @linear/sdk: the chunk that holds the schema's types. */
export function sdkDeclarations(): string {
  const dist = dirname(fileURLToPath(import.meta.resolve('@linear/sdk')));
  for (const name of readdirSync(dist).filter((n) => n.endsWith('.d.mts'))) {
    const text = readFileSync(join(dist, name), 'utf8');
    if (text.includes('\ntype Scalars = {')) return text;
  }
  throw new Error(`linear schema: no declarations with the schema's types in ${dist}`);
}

let cached: GraphQLSchema | undefined;

/** Linear's schema, as the installed SDK was generated from it (read once per process). */
export function linearSchema(): GraphQLSchema {
  cached ??= buildSchema(linearSchemaSDL(sdkDeclarations()));
  return cached;
}
