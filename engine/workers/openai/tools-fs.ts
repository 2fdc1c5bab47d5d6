/**
 * The file system as the built-in agent's tools see it: a walk from the worktree that
 * never follows a symbolic link and never leaves a window between a check and its use.
 *
 * Each path is opened one component at a time, relative to the folder opened before it
 * (`/proc/self/fd/<fd>/<name>`, Linux's equivalent of `openat`), each with `O_NOFOLLOW`:
 * a link anywhere on the way fails the open itself, so a folder swapped for a link between
 * two calls cannot lead a write outside the worktree. Only regular files and folders are
 * used: every open is `O_NONBLOCK` and checked with `fstat` before a byte is read, so a
 * FIFO (which any role can make through `run`) is refused at once instead of blocking one
 * of Node's file-system threads forever. A regular file with more than one hard link is
 * refused too: a hard link inside the worktree can be a file outside it.
 *
 * Where /proc is not mounted, each component is still opened with O_NOFOLLOW by its
 * full path, which leaves the window a swapped parent folder needs (docs/SECURITY.md).
 */
import { constants, existsSync } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Dirent } from 'node:fs';

const { O_RDONLY, O_WRONLY, O_RDWR, O_CREAT, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** A refusal the model reads: the message is the tool's result. */
export class Refused extends Error {}

/** Largest file the tools read whole. */
export const MAX_READ_BYTES = 10 * 1024 * 1024;

const PROC_FD = existsSync('/proc/self/fd');

/** The components of a path already confined by name (relative, no `..`), `.` for the root. */
function componentsOf(rel: string): string[] {
  return rel === '.' ? [] : rel.split(path.sep).filter((c) => c !== '' && c !== '.');
}

/** Where `name` is inside the folder open as `dir` (whose own path is `dirPath`). */
function at(dir: FileHandle, dirPath: string, name: string): string {
  return PROC_FD ? `/proc/self/fd/${dir.fd}/${name}` : path.join(dirPath, name);
}

function why(err: unknown, shown: string): Refused | unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ELOOP' || code === 'EMLINK')
    return new Refused(`refused ${shown}: it is, or goes through, a symbolic link; the file tools do not follow links`);
  if (code === 'ENOTDIR') return new Refused(`refused ${shown}: a part of the path is not a folder`);
  if (code === 'ENXIO') return new Refused(`refused ${shown}: it is not a regular file`);
  return err;
}

/**
 * Opens the folder `rel` under `root` (made, with its parents, when `create` is set),
 * never through a link. The caller closes it.
 */
export async function openDir(
  root: string,
  rel: string,
  opts: { create?: boolean; shown?: string } = {},
): Promise<{ dir: FileHandle; where: string }> {
  const shown = opts.shown ?? rel;
  let dir = await open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK).catch((err) => {
    throw why(err, 'the worktree');
  });
  let where = root;
  try {
    for (const name of componentsOf(rel)) {
      const target = at(dir, where, name);
      if (opts.create) await mkdir(target).catch((err: NodeJS.ErrnoException) => (err.code === 'EEXIST' ? undefined : Promise.reject(err)));
      const next = await open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK).catch(async (err: NodeJS.ErrnoException) => {
        // O_DIRECTORY fails a link with ENOTDIR: say which it was (the refusal stands either way).
        if (err.code === 'ENOTDIR' && (await lstat(target).catch(() => undefined))?.isSymbolicLink()) err.code = 'ELOOP';
        throw err;
      });
      await dir.close();
      dir = next;
      where = path.join(where, name);
    }
    return { dir, where };
  } catch (err) {
    await dir.close().catch(() => {});
    throw why(err, shown);
  }
}

/**
 * Opens the regular file `rel` under `root` for `mode`, never through a link, and only
 * when it has a single link. `write` creates it (and its folders) when missing; the
 * caller truncates. The caller closes it.
 */
export async function openFile(root: string, rel: string, mode: 'read' | 'write' | 'edit'): Promise<FileHandle> {
  const parts = componentsOf(rel);
  const name = parts.pop();
  if (name === undefined) throw new Refused(`refused ${rel}: it is the worktree itself, not a file`);
  const { dir, where } = await openDir(root, parts.join(path.sep) || '.', { create: mode === 'write', shown: rel });
  let file: FileHandle;
  try {
    const flags = mode === 'read' ? O_RDONLY : mode === 'edit' ? O_RDWR : O_WRONLY | O_CREAT;
    file = await open(at(dir, where, name), flags | O_NOFOLLOW | O_NONBLOCK, 0o666);
  } catch (err) {
    throw why(err, rel);
  } finally {
    await dir.close().catch(() => {});
  }
  try {
    const info = await file.stat();
    if (!info.isFile()) throw new Refused(`refused ${rel}: it is ${info.isDirectory() ? 'a folder' : 'not a regular file'}`);
    if (info.nlink > 1) {
      throw new Refused(
        `refused ${rel}: it has ${info.nlink} hard links, and a hard link can lead outside the worktree; the file tools use files with one link`,
      );
    }
    if (mode !== 'write' && info.size > MAX_READ_BYTES) {
      throw new Refused(
        `refused ${rel}: it is ${info.size} bytes, more than the ${MAX_READ_BYTES} the file tools read; use search, or run head/tail`,
      );
    }
    return file;
  } catch (err) {
    await file.close().catch(() => {});
    throw err;
  }
}

/** The text of the regular file `rel`. */
export async function readText(root: string, rel: string): Promise<string> {
  const file = await openFile(root, rel, 'read');
  try {
    return await file.readFile('utf8');
  } finally {
    await file.close();
  }
}

/** Writes all of `text` from the start of `file`, after emptying it. */
async function replaceContent(file: FileHandle, text: string): Promise<void> {
  await file.truncate(0);
  const bytes = Buffer.from(text, 'utf8');
  for (let done = 0; done < bytes.length; ) {
    done += (await file.write(bytes, done, bytes.length - done, done)).bytesWritten;
  }
}

/** Replaces the content of `rel` (made, with its folders, when missing). */
export async function writeText(root: string, rel: string, content: string): Promise<void> {
  const file = await openFile(root, rel, 'write');
  try {
    await replaceContent(file, content);
  } finally {
    await file.close();
  }
}

/** Reads `rel` and writes back what `change` makes of it (undefined: leave it), through one open file. */
export async function editText(root: string, rel: string, change: (text: string) => string | undefined): Promise<boolean> {
  const file = await openFile(root, rel, 'edit');
  try {
    const next = change(await file.readFile('utf8'));
    if (next === undefined) return false;
    await replaceContent(file, next);
    return true;
  } finally {
    await file.close();
  }
}

/** The folder `name` inside the open folder `dir` (at `where`), never through a link; the caller closes it. */
export async function openChildDir(dir: FileHandle, where: string, name: string): Promise<FileHandle> {
  return open(at(dir, where, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK);
}

/**
 * The regular, singly linked file `name` inside the open folder `dir`, opened to read, or
 * undefined when it is anything else (a link, a FIFO, a hard link, larger than `maxBytes`).
 */
export async function openChildFile(dir: FileHandle, where: string, name: string, maxBytes: number): Promise<FileHandle | undefined> {
  let file: FileHandle;
  try {
    file = await open(at(dir, where, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch {
    return undefined;
  }
  const info = await file.stat().catch(() => undefined);
  if (info?.isFile() && info.nlink === 1 && info.size <= maxBytes) return file;
  await file.close().catch(() => {});
  return undefined;
}

/** The entries of the open folder `dir` (at `where`). */
export function entriesOf(dir: FileHandle, where: string): Promise<Dirent[]> {
  return readdir(PROC_FD ? `/proc/self/fd/${dir.fd}` : where, { withFileTypes: true });
}

/** The entries of the folder `rel`. */
export async function listEntries(root: string, rel: string): Promise<Dirent[]> {
  const { dir, where } = await openDir(root, rel);
  try {
    return await readdir(PROC_FD ? `/proc/self/fd/${dir.fd}` : where, { withFileTypes: true });
  } finally {
    await dir.close();
  }
}
