/**
 * The agent's `search` tool: a line search over the worktree in plain Node, so no
 * external binary (grep, rg) is required on the host. Output is bounded so one search
 * cannot flood the conversation. It walks like the other file tools (tools-fs.ts): from
 * folder to folder by open handles, never through a link, reading only regular files
 * with a single link — links, FIFOs and hard links are skipped.
 */
import path from 'node:path';
import type { FileHandle } from 'node:fs/promises';
import { entriesOf, openChildDir, openChildFile, openDir, openFile, Refused } from './tools-fs.ts';

const MAX_MATCHES = 200;
const MAX_LINE = 300;
const MAX_FILE_BYTES = 2_000_000;
const MAX_FILES = 20_000;
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

/** Lines matching under `rel` (a file or folder of the worktree `root`), as `path:line: text`. */
export async function searchFiles(root: string, rel: string, matches: (line: string) => boolean): Promise<string> {
  const out: string[] = [];
  let files = 0;
  let capped = false;

  const scan = async (file: FileHandle, shown: string) => {
    files++;
    try {
      const buffer = await file.readFile();
      if (buffer.subarray(0, 8000).includes(0)) return; // binary
      const lines = buffer.toString('utf8').split('\n');
      for (let i = 0; i < lines.length; i++) {
        if (!matches(lines[i]!)) continue;
        if (out.length >= MAX_MATCHES) {
          capped = true;
          return;
        }
        const text = lines[i]!.length > MAX_LINE ? `${lines[i]!.slice(0, MAX_LINE)}…` : lines[i]!;
        out.push(`${shown}:${i + 1}: ${text}`);
      }
    } finally {
      await file.close().catch(() => {});
    }
  };

  const visitDir = async (dir: FileHandle, where: string, shownDir: string): Promise<void> => {
    const entries = await entriesOf(dir, where);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (capped || files >= MAX_FILES) {
        capped = true;
        return;
      }
      const shown = shownDir === '.' ? entry.name : path.join(shownDir, entry.name);
      if (entry.isDirectory()) {
        if (SKIPPED_DIRS.has(entry.name)) continue;
        const child = await openChildDir(dir, where, entry.name).catch(() => undefined);
        if (!child) continue;
        try {
          await visitDir(child, path.join(where, entry.name), shown);
        } finally {
          await child.close().catch(() => {});
        }
      } else if (entry.isFile()) {
        const file = await openChildFile(dir, where, entry.name, MAX_FILE_BYTES);
        if (file) await scan(file, shown).catch(() => undefined);
      }
    }
  };

  let start: { dir: FileHandle; where: string } | undefined;
  try {
    start = await openDir(root, rel);
  } catch (err) {
    if (!(err instanceof Refused && /not a folder/.test(err.message))) throw err;
  }
  if (start) {
    try {
      await visitDir(start.dir, start.where, rel);
    } finally {
      await start.dir.close().catch(() => {});
    }
  } else {
    await scan(await openFile(root, rel, 'read'), rel);
  }
  if (out.length === 0) return 'no matches';
  if (capped) out.push(`[stopped after ${out.length} matches or ${MAX_FILES} files; narrow the pattern or the path]`);
  return out.join('\n');
}
