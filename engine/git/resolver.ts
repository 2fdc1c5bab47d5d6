/**
 * Names to commits without a process each: `revParse` is the engine's and an agent's most
 * frequent git call (a third of all of them in a six-block run on agents), and each spawn
 * of git from a node process of ~100 MB costs a fork of it — more than git's own work for
 * a lookup. So a repository's lookups go to one long-lived `git cat-file --batch-check`
 * (under the same rule as every engine git call: run.ts), a line asked, a line answered.
 *
 * It answers as `rev-parse --verify` would, from the repository as it is at the moment of
 * the question: git reads a loose ref's file at each lookup, re-reads `packed-refs` when
 * it changed, and looks for new packs when an object is missing (a fetch's). Only a
 * repository's main folder (`.git` a directory) gets a resolver — a worktree's own refs
 * (HEAD) are asked by a process in that worktree — and it is dropped when that `.git` is
 * no longer the one it started in (the repository removed, or made again at the same
 * path), when it has been idle for a while, and when its process ends. Whatever it cannot
 * answer exactly (a name with white space, an ambiguous abbreviation, an object that is not
 * a commit — a tag to peel, or a tree, which rev-parse refuses with its own error — a
 * process gone) is asked of `rev-parse` itself.
 *
 * The same holds for a repository's other long-lived batch, `git cat-file --batch`, which
 * reads objects whole (`readObject`: the lane's replay reads the commits it rewrites) and
 * for the resolver's own lines as objects and types (`lookUpObject`: a landing's checks).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { gitEnv, isFullSha, SAFE_CONFIG, type Sha } from './run.ts';

/** How long an unused resolver stays: a run's lookups come in bursts, a repository left alone frees its process. */
const IDLE_MS = 5000;

/** What a lookup comes back as: a commit, none, or "ask rev-parse". */
type Answer = Sha | undefined | 'unsure';

/** What git's batch answered for one name: the object and its type, missing, or a line it could not be sure of. */
type Line = { sha: Sha; type: string } | 'missing' | 'unsure';

/** An object read whole: its raw content as latin1 (one character a byte), as runGitBytes gives it. */
type Read = { sha: Sha; type: string; body: string } | 'missing' | 'unsure';

/** What a resolver's process does: name objects (`--batch-check`) or read them whole (`--batch`). */
type Kind = 'check' | 'contents';

const BATCH: Record<Kind, string> = {
  check: '--batch-check=%(objectname) %(objecttype)',
  contents: '--batch=%(objectname) %(objecttype) %(objectsize)',
};

class Resolver {
  private readonly child: ChildProcess;
  private readonly waiting: Array<(a: Read) => void> = [];
  private buffered = '';
  private idle: NodeJS.Timeout | undefined;
  closed = false;

  constructor(
    readonly key: string,
    readonly dir: string,
    readonly kind: Kind,
    readonly identity: string,
    private readonly onClose: (r: Resolver) => void,
  ) {
    this.child = spawn('git', [...SAFE_CONFIG.flatMap((pair) => ['-c', pair]), 'cat-file', BATCH[kind]], {
      cwd: dir,
      env: gitEnv(process.env),
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    this.child.on('error', () => this.close());
    this.child.on('exit', () => this.close());
    this.child.stdin!.on('error', () => this.close());
    // Bytes as characters, so that an object's size counts characters (names and types are ASCII).
    this.child.stdout!.setEncoding('latin1');
    this.child.stdout!.on('data', (chunk: string) => this.read(chunk));
    this.quiet();
  }

  ask(name: string): Promise<Read> {
    if (this.closed) return Promise.resolve('unsure');
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    // Waiting for an answer keeps the process alive (a CLI whose last await is a lookup).
    if (this.waiting.length === 0) this.hold(true);
    return new Promise((answer) => {
      this.waiting.push(answer);
      this.child.stdin!.write(`${name}\n`);
    });
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    for (let nl = this.buffered.indexOf('\n'); nl >= 0; nl = this.buffered.indexOf('\n')) {
      const line = this.buffered.slice(0, nl);
      const [name, type, size] = line.split(' ');
      const known = type !== undefined && isFullSha(name) && /^(commit|tree|blob|tag)$/.test(type);
      let body = '';
      if (known && this.kind === 'contents') {
        // The header, the object, and a newline: wait until all of it is here.
        const end = nl + 1 + Number(size);
        if (!/^\d+$/.test(size ?? '') || this.buffered.length < end + 1) break;
        body = this.buffered.slice(nl + 1, end);
        this.buffered = this.buffered.slice(end + 1);
      } else this.buffered = this.buffered.slice(nl + 1);
      const answer = this.waiting.shift();
      if (!answer) continue;
      if (known) answer({ sha: name!, type: type!, body });
      else if (line.endsWith(' missing')) answer('missing');
      else answer('unsure');
    }
    if (this.waiting.length === 0) this.quiet();
  }

  /** Idle: nothing keeps the event loop for it, and it goes after IDLE_MS. */
  private quiet(): void {
    this.hold(false);
    if (this.closed) return;
    this.idle = setTimeout(() => this.close(), IDLE_MS);
    this.idle.unref();
  }

  private hold(on: boolean): void {
    for (const stream of [this.child.stdin, this.child.stdout]) {
      const s = stream as unknown as { ref?: () => void; unref?: () => void } | null;
      if (on) s?.ref?.();
      else s?.unref?.();
    }
    if (on) this.child.ref();
    else this.child.unref();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.idle) clearTimeout(this.idle);
    this.onClose(this);
    for (const answer of this.waiting.splice(0)) answer('unsure');
    this.child.stdin!.end();
    this.hold(false);
  }
}

const resolvers = new Map<string, Resolver>();

/**
 * The `.git` of `dir` when it is a directory (a main repository folder), else undefined: its
 * device, inode and birth time — a folder made again gets a freed inode back at once, never
 * the same birth (where the file system keeps none, its change time: a needless restart at
 * worst).
 */
async function gitDirIdentity(dir: string): Promise<string | undefined> {
  const st = await lstat(join(dir, '.git'), { bigint: true }).catch(() => undefined);
  if (!st?.isDirectory()) return undefined;
  return `${st.dev}:${st.ino}:${st.birthtimeNs > 0n ? st.birthtimeNs : `c${st.ctimeNs}`}`;
}

/**
 * The commit `ref` names in the repository at `dir`, by its long-lived resolver: undefined
 * when there is no such commit, 'unsure' when rev-parse must be asked instead.
 */
export async function resolveCommitName(dir: string, ref: string): Promise<Answer> {
  const line = await lookUpObject(dir, ref);
  if (line === 'missing') return undefined;
  return line !== 'unsure' && line.type === 'commit' ? line.sha : 'unsure';
}

/**
 * The object `name` names in the repository at `dir` and its type, by the same resolver
 * (e.g. `<sha>^{tree}`: whether a commit's root tree is there): 'missing' when there is
 * none, 'unsure' when git must be asked by a process of its own.
 */
export async function lookUpObject(dir: string, ref: string): Promise<Line> {
  const read = await ask('check', dir, ref);
  return typeof read === 'object' ? { sha: read.sha, type: read.type } : read;
}

/**
 * The object `name` names in the repository at `dir`, read whole by the repository's
 * long-lived `cat-file --batch` (the same rule and life as the resolver's): 'missing' when
 * there is none, 'unsure' when git must be asked by a process of its own.
 */
export async function readObject(dir: string, name: string): Promise<Read> {
  return ask('contents', dir, name);
}

async function ask(kind: Kind, dir: string, ref: string): Promise<Read> {
  if (/\s/.test(ref) || ref === '') return 'unsure';
  const path = resolve(dir);
  const key = `${kind}\0${path}`;
  const identity = await gitDirIdentity(path);
  let r = resolvers.get(key);
  if (r && r.identity !== identity) r.close();
  if (identity === undefined) return 'unsure';
  r = resolvers.get(key);
  if (!r) {
    r = new Resolver(key, path, kind, identity, (gone) => resolvers.get(gone.key) === gone && resolvers.delete(gone.key));
    resolvers.set(key, r);
  }
  return r.ask(ref);
}

/** Ends every resolver's process (a test, or a process about to exit that wants none left behind). */
export function closeResolvers(): void {
  for (const r of [...resolvers.values()]) r.close();
}
