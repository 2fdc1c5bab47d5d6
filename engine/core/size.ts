/** Sizes in config are written "512KB", "4MB", "1GB" or a number of bytes ("65536"); KB is 1024 bytes. */
const UNIT = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 } as const;
const SIZE = /^(\d+)\s*(B|KB|MB|GB)?$/i;

/** Bytes for a size string, or undefined when it is not one. */
export function parseSize(text: string): number | undefined {
  const m = SIZE.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * UNIT[(m[2] ?? 'B').toUpperCase() as keyof typeof UNIT];
}
