/**
 * What a run says of the blocks an earlier run abandoned. An abandoned block stays so for
 * as long as it is in the register — no answer brings it back, and editing its file does
 * not — so every later `tron start` ends with exit 3 (DESIGN: 0 means every block landed).
 * Without a word, that status looks like a failure of the new run. So the run says once
 * which blocks they are, why they were given up, and the one way out: take the block out of
 * the register (delete or move its file; close its issue, for a block from `[intake]`).
 *
 * Pure: the caller gives the blocks, their reasons and files.
 */

/** A block an earlier run abandoned, as the caller knows it. */
export interface AbandonedEarlier {
  block: string;
  /** Why it was abandoned (the ABANDON's reason), when known. */
  reason?: string | undefined;
  /** Its block file, repository-relative, or its issue's URL (`[intake]`); default `.tron/blocks/<id>.md`. */
  file?: string | undefined;
}

const firstLine = (text: string): string => text.trim().split('\n')[0] ?? '';

/** `a`, `a and b`, `a, b and c`. */
function and(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

/**
 * One line naming every block an earlier run abandoned, with the fix; undefined when there
 * is none.
 */
export function abandonedEarlierLine(blocks: readonly AbandonedEarlier[]): string | undefined {
  if (blocks.length === 0) return undefined;
  const named = blocks.map((b) => (b.reason?.trim() ? `${b.block} (${firstLine(b.reason)})` : b.block));
  const where = blocks.map((b) => b.file ?? `.tron/blocks/${b.block}.md`);
  const files = where.filter((w) => !/^https?:\/\//.test(w));
  const issues = where.filter((w) => /^https?:\/\//.test(w));
  const fixes = [
    files.length > 0 ? `delete or move ${and(files)}` : '',
    issues.length > 0 ? `close ${issues.length === 1 ? 'its issue' : 'their issues'}, ${and(issues)}` : '',
  ].filter(Boolean);
  const again = files.length > 0 ? ' (a block file under a new name is a new block: it is built again)' : '';
  const one = blocks.length === 1;
  return (
    `tron: ${one ? `${named[0]} was` : `${and(named)} were`} abandoned in an earlier run, and every \`tron start\` ` +
    `exits 3 while ${one ? 'it stays' : 'they stay'} in the register: ${and(fixes)}${again}`
  );
}
