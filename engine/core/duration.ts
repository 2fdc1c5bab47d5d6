/** Durations in config and the spine are written "90s", "20m", "1h", "1h30m", "500ms". */
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
const DURATION = /^(?:\d+(?:ms|s|m|h))+$/;
const PART = /(\d+)(ms|s|m|h)/g;

/** Milliseconds for a duration string, or undefined when it is not one. */
export function parseDuration(text: string): number | undefined {
  if (!DURATION.test(text)) return undefined;
  let total = 0;
  for (const [, n, unit] of text.matchAll(PART)) total += Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS];
  return total;
}

/** The shortest exact spelling of a duration in ms, for docs and messages. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) {
      parts.push(`${n}${unit}`);
      rest -= n * size;
    }
  }
  return parts.join('');
}
