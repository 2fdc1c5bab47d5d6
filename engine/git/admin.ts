/**
 * What a worker without a sandbox could plant in the shared git directory, as digests:
 * the repository's config (and `config.worktree`, the main one and each worktree's), every
 * hook, and everything under `info/` (attributes, exclude, sparse-checkout). A worktree's
 * `.git` file points at this directory, so a builder can write it; the engine's own git
 * calls ignore what is planted there (run.ts), but the user's git, the block's tests and
 * the next tool that trusts the repository would not. The truth gate compares the digests
 * taken when the block's worktree was made with those at the gate (`git_config_untouched`).
 *
 * Only regular files are read, by lstat first: a FIFO planted as a hook cannot make the
 * engine wait. Hooks named `*.sample` are left out, as git never runs them, and so are
 * empty config files, which configure nothing.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { commonDir } from './worktree.ts';

/** More entries than this under hooks/ or info/ are recorded as one `…truncated` entry. */
const MAX_ENTRIES = 2000;

/** path (relative to the common git directory) → a short digest of what is there. */
export type AdminDigests = Record<string, string>;

const short = (data: Buffer | string) => createHash('sha256').update(data).digest('hex').slice(0, 16);

/** The digests of the shared git directory's config, hooks and info files. */
export async function adminDigests(repo: string): Promise<AdminDigests> {
  const common = await commonDir(repo);
  const out: AdminDigests = {};
  const budget = { left: MAX_ENTRIES };
  for (const name of ['config', 'config.worktree']) await entry(common, name, out, budget);
  await tree(common, 'hooks', out, budget, (name) => name.endsWith('.sample'));
  await tree(common, 'info', out, budget);
  for (const worktree of await names(join(common, 'worktrees'))) {
    await entry(common, `worktrees/${worktree}/config.worktree`, out, budget);
  }
  return out;
}

async function names(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch {
    return [];
  }
}

/** One path: a regular file's mode and content, a link's target, a folder's listing, or the kind of thing it is. */
async function entry(common: string, rel: string, out: AdminDigests, budget: { left: number }): Promise<'dir' | undefined> {
  const full = join(common, rel);
  let info: Awaited<ReturnType<typeof lstat>>;
  try {
    info = await lstat(full);
  } catch {
    return undefined;
  }
  if (budget.left <= 0) {
    out['…truncated'] = 'more entries than tron reads';
    return undefined;
  }
  budget.left -= 1;
  if (info.isFile()) {
    // An empty config file configures nothing: the sandbox makes one for each builder's
    // worktree (`config.worktree`, a read-only mount point), and that is no change.
    if (info.size === 0 && /(^|\/)config(\.worktree)?$/.test(rel)) return undefined;
    const content = await readFile(full).catch(() => Buffer.from('(unreadable)'));
    out[rel] = `${info.mode & 0o111 ? 'x' : '-'}${short(content)}`;
  } else if (info.isSymbolicLink()) {
    out[rel] = `l${short(await readlink(full).catch(() => '(unreadable)'))}`;
  } else if (info.isDirectory()) {
    out[rel] = 'd';
    return 'dir';
  } else {
    out[rel] = info.isFIFO() ? 'fifo' : info.isSocket() ? 'socket' : 'special';
  }
  return undefined;
}

async function tree(common: string, rel: string, out: AdminDigests, budget: { left: number }, skip?: (name: string) => boolean) {
  if ((await entry(common, rel, out, budget)) !== 'dir') return;
  // A folder records nothing itself (git ignores empty ones); its files do.
  delete out[rel];
  for (const name of await names(join(common, rel))) {
    if (skip?.(name)) continue;
    await tree(common, `${rel}/${name}`, out, budget, skip);
  }
}
