/**
 * A persistent sorted map: an AVL tree whose `set` and `delete` return a new map and
 * leave the old one untouched, sharing every node off the path they changed. The fold
 * keeps its blocks and indices in these so that one event costs O(log n) however many
 * blocks the run has, while every earlier state stays valid for whoever still holds it
 * (the engine's running effects, replay, tests).
 */

interface Node<K, V> {
  readonly key: K;
  readonly value: V;
  readonly left: Node<K, V> | undefined;
  readonly right: Node<K, V> | undefined;
  readonly height: number;
}

export type Compare<K> = (a: K, b: K) => number;

/** Code-unit order, as `<` orders strings (and `Array.prototype.sort` does by default). */
export const byString: Compare<string> = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
export const byNumber: Compare<number> = (a, b) => a - b;

const height = (n: Node<unknown, unknown> | undefined): number => n?.height ?? 0;

function node<K, V>(key: K, value: V, left: Node<K, V> | undefined, right: Node<K, V> | undefined): Node<K, V> {
  return { key, value, left, right, height: Math.max(height(left), height(right)) + 1 };
}

/** Rebuilds a node whose children differ in height by at most 2, restoring the AVL balance. */
function balance<K, V>(key: K, value: V, left: Node<K, V> | undefined, right: Node<K, V> | undefined): Node<K, V> {
  const lh = height(left);
  const rh = height(right);
  if (lh > rh + 1) {
    const l = left!;
    if (height(l.left) >= height(l.right)) return node(l.key, l.value, l.left, node(key, value, l.right, right));
    const lr = l.right!;
    return node(lr.key, lr.value, node(l.key, l.value, l.left, lr.left), node(key, value, lr.right, right));
  }
  if (rh > lh + 1) {
    const r = right!;
    if (height(r.right) >= height(r.left)) return node(r.key, r.value, node(key, value, left, r.left), r.right);
    const rl = r.left!;
    return node(rl.key, rl.value, node(key, value, left, rl.left), node(r.key, r.value, rl.right, r.right));
  }
  return node(key, value, left, right);
}

export class SortedMap<K, V> implements ReadonlyMap<K, V> {
  private constructor(
    private readonly root: Node<K, V> | undefined,
    readonly size: number,
    private readonly compare: Compare<K>,
  ) {}

  static empty<K, V>(compare: Compare<K>): SortedMap<K, V> {
    return new SortedMap<K, V>(undefined, 0, compare);
  }

  static of<K, V>(entries: Iterable<readonly [K, V]>, compare: Compare<K>): SortedMap<K, V> {
    let map = SortedMap.empty<K, V>(compare);
    for (const [k, v] of entries) map = map.set(k, v);
    return map;
  }

  get(key: K): V | undefined {
    let n = this.root;
    while (n) {
      const c = this.compare(key, n.key);
      if (c === 0) return n.value;
      n = c < 0 ? n.left : n.right;
    }
    return undefined;
  }

  has(key: K): boolean {
    let n = this.root;
    while (n) {
      const c = this.compare(key, n.key);
      if (c === 0) return true;
      n = c < 0 ? n.left : n.right;
    }
    return false;
  }

  /** The map with `key` set to `value` (this map itself when it already holds exactly that). */
  set(key: K, value: V): SortedMap<K, V> {
    const root = put(this.root, key, value, this.compare);
    if (root === this.root) return this;
    return new SortedMap(root, this.has(key) ? this.size : this.size + 1, this.compare);
  }

  /** The map without `key` (this map itself when it has no such key). */
  delete(key: K): SortedMap<K, V> {
    const root = remove(this.root, key, this.compare);
    return root === this.root ? this : new SortedMap(root, this.size - 1, this.compare);
  }

  /** The entry with the smallest key. */
  first(): [K, V] | undefined {
    let n = this.root;
    if (!n) return undefined;
    while (n.left) n = n.left;
    return [n.key, n.value];
  }

  *entries(): MapIterator<[K, V]> {
    const stack: Node<K, V>[] = [];
    let n = this.root;
    while (n || stack.length > 0) {
      while (n) {
        stack.push(n);
        n = n.left;
      }
      const top = stack.pop()!;
      yield [top.key, top.value];
      n = top.right;
    }
  }

  *keys(): MapIterator<K> {
    for (const [k] of this.entries()) yield k;
  }

  *values(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void): void {
    for (const [k, v] of this.entries()) callback(v, k, this);
  }
}

// Module-level rather than closures: `set` and `delete` run on every event.

function put<K, V>(n: Node<K, V> | undefined, key: K, value: V, compare: Compare<K>): Node<K, V> {
  if (!n) return node(key, value, undefined, undefined);
  const c = compare(key, n.key);
  if (c === 0) return n.value === value ? n : node(n.key, value, n.left, n.right);
  if (c < 0) {
    const left = put(n.left, key, value, compare);
    return left === n.left ? n : balance(n.key, n.value, left, n.right);
  }
  const right = put(n.right, key, value, compare);
  return right === n.right ? n : balance(n.key, n.value, n.left, right);
}

function remove<K, V>(n: Node<K, V> | undefined, key: K, compare: Compare<K>): Node<K, V> | undefined {
  if (!n) return undefined;
  const c = compare(key, n.key);
  if (c < 0) {
    const left = remove(n.left, key, compare);
    return left === n.left ? n : balance(n.key, n.value, left, n.right);
  }
  if (c > 0) {
    const right = remove(n.right, key, compare);
    return right === n.right ? n : balance(n.key, n.value, n.left, right);
  }
  if (!n.left) return n.right;
  if (!n.right) return n.left;
  let min = n.right;
  while (min.left) min = min.left;
  return balance(min.key, min.value, n.left, removeMin(n.right));
}

function removeMin<K, V>(n: Node<K, V>): Node<K, V> | undefined {
  if (!n.left) return n.right;
  return balance(n.key, n.value, removeMin(n.left), n.right);
}
