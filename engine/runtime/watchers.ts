/**
 * WAKE: the file-system notifications that wake the loop — an answer written into
 * `.tron/inbox/`, and (with --watch) a block file added or changed. Never a poll.
 */
import { type FSWatcher, mkdirSync, watch } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../os/clock.ts';
import type { Block } from '../project/register.ts';
import { INBOX_DIR } from './inbox.ts';

/** An answer written while the engine runs calls `changed` at once. */
export function watchInbox(repo: string, changed: () => void): FSWatcher {
  const dir = join(repo, INBOX_DIR);
  mkdirSync(dir, { recursive: true });
  return watch(dir, changed);
}

/**
 * A new or changed block file: the register is read again once the editor's writes
 * settle, and `changed` hears of it when the blocks' digests differ from the last load.
 */
export function watchBlocks(
  repo: string,
  initial: readonly Block[],
  reload: (() => Block[] | undefined) | undefined,
  changed: (blocks: Block[]) => void,
  clock: Clock,
): FSWatcher {
  const dir = join(repo, '.tron', 'blocks');
  mkdirSync(dir, { recursive: true });
  let last = JSON.stringify(initial.map((b) => b.digest));
  let cancel: (() => void) | undefined;
  return watch(dir, () => {
    // Editors write a file in several steps; read the register once they settle.
    cancel?.();
    cancel = clock.after(
      50,
      () => {
        const blocks = reload?.();
        if (!blocks) return;
        const now = JSON.stringify(blocks.map((b) => b.digest));
        if (now === last) return;
        last = now;
        changed(blocks);
      },
      { keepAlive: true },
    );
  });
}
