/**
 * A secret per repository, kept outside it, with which the engine signs what it must be
 * able to trust later: every line of its event logs (chained, so a line inserted or
 * appended by anyone else is found) and every answer `tron answer` writes into the inbox
 * (so an answer a worker wrote is refused).
 *
 * The key lives in `$XDG_STATE_HOME/tron/<repo-id>/key` (`~/.local/state/tron/<repo-id>/key`
 * when XDG_STATE_HOME is unset), mode 0600 in a 0700 folder, where `<repo-id>` is a digest
 * of the repository's real path. A worker in the sandbox cannot see that folder; a worker
 * without one runs as your user and could read it: then the signatures still catch a
 * careless or naive forgery, not a worker that goes looking for the key (docs/SECURITY.md).
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { InputError } from '../core/errors.ts';

/** Where tron keeps per-repository state outside the repository. */
export function stateHome(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'tron');
  return join(env.HOME || homedir(), '.local', 'state', 'tron');
}

/** The folder of one repository's state: named by a digest of its real path. */
export function repoStateDir(repo: string): string {
  let real: string;
  try {
    real = realpathSync(repo);
  } catch {
    real = resolve(repo);
  }
  return join(stateHome(), createHash('sha256').update(real).digest('hex').slice(0, 24));
}

/** The path of a repository's key (the sandbox must hide the folder it is in). */
export function keyPath(repo: string): string {
  return join(repoStateDir(repo), 'key');
}

export interface RepoKey {
  key: Buffer;
  /** Made just now: nothing this repository holds was signed with it yet. */
  created: boolean;
}

/** The repository's key; made (once, atomically) when `create` is set and there is none. */
export function repoKey(repo: string, opts: { create: true }): RepoKey;
export function repoKey(repo: string, opts?: { create?: boolean }): RepoKey | undefined;
export function repoKey(repo: string, opts: { create?: boolean } = {}): RepoKey | undefined {
  const file = keyPath(repo);
  const existing = readKey(file);
  if (existing) return { key: existing, created: false };
  if (!opts.create) return undefined;
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(tmp, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    throw new InputError([
      {
        code: 'TRON_STATE_UNWRITABLE',
        path: dirname(file),
        message: `cannot keep the repository's key there (${(err as NodeJS.ErrnoException).code ?? String(err)}); make the folder writable, or set XDG_STATE_HOME to a writable folder outside the repository`,
      },
    ]);
  }
  try {
    // A link fails if another process made the key first: then that one is the key.
    linkSync(tmp, file);
    return { key: readKey(file)!, created: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { key: readKey(file)!, created: false };
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Makes `key` the repository's key here, in place of the one it had: written beside the
 * file and renamed over it, so a reader sees the old key or the new one, never half.
 */
export function adoptKey(repo: string, key: Buffer): void {
  const file = keyPath(repo);
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(tmp, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  renameSync(tmp, file);
}

function readKey(file: string): Buffer | undefined {
  try {
    const hex = readFileSync(file, 'utf8').trim();
    return /^[0-9a-f]{64}$/.test(hex) ? Buffer.from(hex, 'hex') : undefined;
  } catch {
    return undefined;
  }
}

/** The key of the repository a run directory `<repo>/.tron/runs/<id>` belongs to, if it has one. */
export function keyOfRunDir(runDir: string): Buffer | undefined {
  const runs = dirname(resolve(runDir));
  const tron = dirname(runs);
  if (basename(runs) !== 'runs' || basename(tron) !== '.tron') return undefined;
  return repoKey(dirname(tron))?.key;
}

/** A signature: HMAC-SHA256 over the parts, each ended by a newline; 32 hex digits. */
export function sign(key: Buffer, ...parts: string[]): string {
  const h = createHmac('sha256', key);
  for (const part of parts) h.update(part).update('\n');
  return h.digest('hex').slice(0, 32);
}
