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
/**
 * The font size of external labels (events, gateways, flows), in diagram units: the
 * viewer page draws them at this size (engine/render/viewer-page.ts). Large enough that
 * the whole diagram, fitted to a laptop's screen, still shows them at 11px or more.
 */
export const LABEL_FONT_PX = 18;
/** The font size of names inside shapes (tasks, lanes, the pool). */
export const SHAPE_FONT_PX = 18;

/** Height of one line of an external label (line height 1.2, rounded up). */
export const LINE = Math.ceil(LABEL_FONT_PX * 1.2) + 1;

/**
 * Advance widths of Helvetica/Arial (and the metric-compatible Liberation Sans) for
 * printable ASCII, in thousandths of an em; anything else counts as a full em.
 */
const AFM = [
  278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, 556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278,
  278, 584, 584, 584, 556, 1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722,
  667, 944, 667, 667, 611, 278, 278, 278, 469, 556, 333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556,
  556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
];

/** The width of `text` at LABEL_FONT_PX, with 5% to spare for a fallback font. */
const textWidth = (text: string): number =>
  Math.ceil(([...text].reduce((w, ch) => w + (AFM[ch.charCodeAt(0) - 32] ?? 1000), 0) * LABEL_FONT_PX * 1.05) / 1000);

const SPACE = textWidth(' ');

/** Width and height a label needs, wrapping words at `max` pixels. */
export function labelSize(text: string, max = 170): { width: number; height: number } {
  const lines: number[] = [];
  for (const word of text.split(' ')) {
    const w = textWidth(word);
    const last = lines.length - 1;
    if (last >= 0 && lines[last]! + SPACE + w <= max) lines[last] = lines[last]! + SPACE + w;
    else lines.push(w);
  }
  return { width: Math.min(max, Math.max(...lines)) + 8, height: lines.length * LINE };
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
