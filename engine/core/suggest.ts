/**
 * "Did you mean": the nearest known name to a mistyped one, as git and npm offer it.
 * Distance is Damerau–Levenshtein in its optimal-string-alignment form, so a swapped
 * pair of letters (`strat`, `--wacth`) costs one edit, like a wrong or missing letter.
 */

/** Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number) => d[i]![j]!;
  for (let i = 1; i < rows; i += 1) {
    for (let j = 1; j < cols; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      d[i]![j] = best;
    }
  }
  return at(a.length, b.length);
}

/**
 * The known names close enough to `typed` to be what was meant, nearest first (ties in
 * the order given). Close enough: at most one edit for names of up to four letters, two
 * beyond; a typed prefix of a name also counts (`stat` → status).
 */
export function suggest(typed: string, known: readonly string[]): string[] {
  const limit = typed.length <= 4 ? 1 : 2;
  const scored = known
    .map((name, order) => ({ name, order, distance: editDistance(typed, name) }))
    .filter((s) => s.distance <= limit || (typed.length >= 2 && s.name.startsWith(typed)));
  if (scored.length === 0) return [];
  scored.sort((x, y) => x.distance - y.distance || x.order - y.order);
  const best = scored[0]!.distance;
  return scored.filter((s) => s.distance === best || s.name.startsWith(typed)).map((s) => s.name);
}

/** `; did you mean start?` / `; did you mean start or status?`, or nothing. */
export function didYouMean(typed: string, known: readonly string[]): string {
  const names = suggest(typed, known).slice(0, 3);
  if (names.length === 0) return '';
  const listed = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} or ${names.at(-1)!}`;
  return `; did you mean ${listed}?`;
}
