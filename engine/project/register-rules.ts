/**
 * Rules over the whole register, each a small named function returning problems:
 * dependencies must name blocks, not the block itself, and must not go round in a
 * cycle — any of these would leave blocks that can never become ready.
 */
import path from 'node:path';
import type { Problem } from '../core/errors.ts';
import type { Block } from './block.ts';
import { suggest } from '../core/suggest.ts';

/** The file a block id lives in, next to the block that names it. */
function siblingFile(of: Block, id: string): string {
  return path.posix.join(path.posix.dirname(of.file), `${id}.md`);
}

function fileOf(blocks: readonly Block[], id: string): string {
  return blocks.find((b) => b.id === id)!.file;
}

/**
 * `depends_on` naming no block. `broken` are ids whose files exist but have problems of
 * their own: depending on them is not reported again.
 */
export function unknownDependencies(blocks: readonly Block[], broken: readonly string[] = []): Problem[] {
  const ids = new Set([...blocks.map((b) => b.id), ...broken]);
  const known = [...ids].sort();
  return blocks.flatMap((b) =>
    b.dependsOn
      .filter((d) => d !== b.id && !ids.has(d))
      .map((d) => {
        const near = suggest(
          d,
          known.filter((id) => id !== b.id),
        ).slice(0, 3);
        const meant = near.length > 0 ? `; did you mean ${near.map((n) => `"${n}"`).join(' or ')}? Fix` : '; fix';
        return {
          code: 'TRON_DEPENDS_UNKNOWN',
          path: `${b.file}: depends_on`,
          message: `"${d}" names no block (no ${siblingFile(b, d)})${meant} the id or add that block`,
        };
      }),
  );
}

/** A block that depends on itself could never be ready. */
export function selfDependencies(blocks: readonly Block[]): Problem[] {
  return blocks
    .filter((b) => b.dependsOn.includes(b.id))
    .map((b) => ({
      code: 'TRON_DEPENDS_SELF',
      path: `${b.file}: depends_on`,
      message: `block ${b.id} depends on itself; remove "${b.id}" from its depends_on`,
    }));
}

/**
 * Dependency cycles, one problem per tangle (strongly connected component), naming one
 * whole cycle in order, starting from its smallest id: `a → b → c → a`, where a depends
 * on b, b on c and c on a.
 */
export function dependencyCycles(blocks: readonly Block[]): Problem[] {
  const deps = new Map(blocks.map((b) => [b.id, [...b.dependsOn].filter((d) => d !== b.id).sort()]));
  const problems: Problem[] = [];
  for (const component of stronglyConnected(deps)) {
    if (component.length < 2) continue;
    const members = new Set(component);
    const start = [...component].sort()[0]!;
    const cycle = cycleThrough(start, deps, members);
    const last = cycle[cycle.length - 2]!;
    const others = [...component].sort().filter((id) => !cycle.includes(id));
    const also = others.length > 0 ? `; ${others.join(', ')} ${others.length === 1 ? 'is' : 'are'} caught in the same tangle` : '';
    problems.push({
      code: 'TRON_CYCLE',
      path: `${fileOf(blocks, last)}: depends_on`,
      message: `blocks ${cycle.join(' → ')} depend on each other; remove one depends_on (in ${fileOf(blocks, last)})${also}`,
    });
  }
  return problems;
}

/** A path start → … → start inside `members` (depth first, smallest ids first). */
function cycleThrough(start: string, deps: Map<string, string[]>, members: Set<string>): string[] {
  const seen = new Set<string>();
  const walk = (id: string, trail: string[]): string[] | undefined => {
    for (const next of deps.get(id) ?? []) {
      if (next === start) return [...trail, start];
      if (!members.has(next) || seen.has(next)) continue;
      seen.add(next);
      const found = walk(next, [...trail, next]);
      if (found) return found;
    }
    return undefined;
  };
  return walk(start, [start])!;
}

/** Tarjan's strongly connected components over the known ids. */
function stronglyConnected(deps: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of deps.get(v) ?? []) {
      if (!deps.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      out.push(component);
    }
  };
  for (const id of [...deps.keys()].sort()) if (!index.has(id)) visit(id);
  return out.sort((a, b) => ([...a].sort()[0]! < [...b].sort()[0]! ? -1 : 1));
}

/** Every cross-block rule, in one list; `broken` as for `unknownDependencies`. */
export function checkRegister(blocks: readonly Block[], broken: readonly string[] = []): Problem[] {
  return [...unknownDependencies(blocks, broken), ...selfDependencies(blocks), ...dependencyCycles(blocks)];
}
