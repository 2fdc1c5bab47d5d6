/**
 * The agent's `search` tool: a line search over the worktree in plain Node, so no
 * external binary (grep, rg) is required on the host. Output is bounded so one search
 * cannot flood the conversation. Symlinks are not followed: confinement stays simple.
 */
import { readdir, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

const MAX_MATCHES = 200;
const MAX_LINE = 300;
const MAX_FILE_BYTES = 2_000_000;
const MAX_FILES = 20_000;
const SKIPPED_DIRS = new Set(['.git', 'node_modules']);

/** Lines matching under `start` (a file or directory inside `root`), as `path:line: text`. */
export async function searchFiles(root: string, start: string, matches: (line: string) => boolean): Promise<string> {
  const realRoot = await realpath(root);
  const out: string[] = [];
  let files = 0;
  let capped = false;

  const visitFile = async (file: string) => {
    files++;
    const info = await stat(file);
    if (info.size > MAX_FILE_BYTES) return;
    const buffer = await readFile(file);
    if (buffer.subarray(0, 8000).includes(0)) return; // binary
    const rel = path.relative(realRoot, file) || path.basename(file);
    const lines = buffer.toString('utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!matches(lines[i]!)) continue;
      if (out.length >= MAX_MATCHES) {
        capped = true;
        return;
      }
      const text = lines[i]!.length > MAX_LINE ? `${lines[i]!.slice(0, MAX_LINE)}…` : lines[i]!;
      out.push(`${rel}:${i + 1}: ${text}`);
    }
  };

  const visitDir = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (capped || files >= MAX_FILES) {
        capped = true;
        return;
      }
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIPPED_DIRS.has(entry.name)) await visitDir(full);
      } else if (entry.isFile()) {
        await visitFile(full).catch(() => undefined);
      }
    }
  };

  const info = await stat(start);
  if (info.isDirectory()) await visitDir(start);
  else await visitFile(start);
  if (out.length === 0) return 'no matches';
  if (capped) out.push(`[stopped after ${out.length} matches or ${MAX_FILES} files; narrow the pattern or the path]`);
  return out.join('\n');
}
