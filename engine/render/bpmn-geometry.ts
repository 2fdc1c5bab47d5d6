/**
 * Small geometry for the workflow diagram's layout: boxes, label sizes planned ahead of
 * the browser's own text layout, and nesting levels for edges that share a corridor.
 */
export interface Point {
  x: number;
  y: number;
}
export interface Bounds {
  x: number;
  y: number;
  width: number;
  height: number;
}
/** Height of one line of an 11px external label. */
export const LINE = 14;

/** Generous widths of 11px Arial-like glyphs, so labels never wrap more than planned. */
const textWidth = (text: string): number => [...text].reduce((w, ch) => w + (/[A-Z0-9]/.test(ch) ? 8 : 6), 0);

/** Width and height a label needs, wrapping words at `max` pixels. */
export function labelSize(text: string, max = 120): { width: number; height: number } {
  const lines: number[] = [];
  for (const word of text.split(' ')) {
    const w = textWidth(word);
    const last = lines.length - 1;
    if (last >= 0 && lines[last]! + 4 + w <= max) lines[last] = lines[last]! + 4 + w;
    else lines.push(w);
  }
  return { width: Math.min(max, Math.max(...lines)) + 10, height: lines.length * LINE };
}

/** Greedy interval levels: shortest spans first, each on the lowest level it fits. */
export function assignLevels(spans: { id: string; lo: number; hi: number }[]): Map<string, number> {
  const sorted = [...spans].sort((a, b) => a.hi - a.lo - (b.hi - b.lo) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const levels: { lo: number; hi: number }[][] = [];
  const out = new Map<string, number>();
  for (const s of sorted) {
    let l = 0;
    while (levels[l]?.some((o) => s.lo < o.hi && o.lo < s.hi)) l++;
    const level = levels[l] ?? [];
    levels[l] = level;
    level.push(s);
    out.set(s.id, l);
  }
  return out;
}
