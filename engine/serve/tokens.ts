/**
 * Who may use `tron serve`'s API: bearer tokens. A token is 32 random bytes (base64url);
 * only its sha256 is kept, in `.tron/serve/tokens.json` (that folder ignores itself in
 * git), so reading the file does not let anyone in. `tron serve` issues a fresh token at
 * every start and prints it once, in the dashboard URL's fragment (a fragment never
 * reaches a server log or a Referer header); `TRON_SERVE_TOKEN` from the environment is
 * accepted too, for scripts. Each row is signed with the repository's key (engine/log/keys.ts),
 * so a row written by anyone but tron — a worker without a sandbox can write `.tron/` —
 * lets nobody in. Every token has a name, and every write through the API
 * records it (`operator.answered.by = "serve:<name>"`).
 *
 * A signature alone would let a removed row back in: put back, it is still signed. So each
 * row carries an epoch — its number in the order tron issued rows — and the repository's
 * state folder (beside its key, out of the repository and out of a sandbox's sight) keeps
 * two marks that only go up: `issued`, the last epoch given, and `revoked`, below which no
 * row counts. The rows that count are exactly epochs `revoked+1 … issued`; a row missing
 * from that run was removed, and tron raises `revoked` past it (and signs the rows that
 * stay again under new epochs, when the one removed was not the oldest). A row put back,
 * or an old copy of the whole file, then has an epoch at or below the mark: it is dead.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { repoKey, repoStateDir, sign } from '../log/keys.ts';
import { acquireLock, LockHeldError, type Lock } from '../log/lockfile.ts';

/** Where the hashes live, relative to the repository. */
export const TOKENS_FILE = join('.tron', 'serve', 'tokens.json');

/** Issued tokens kept; the oldest go first (a dashboard tab of many restarts ago stops working). */
const KEEP = 20;

const TokenRow = z.strictObject({
  name: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created: z.number(),
  /** Its place in the order tron issued rows; it counts only above the revocation mark. */
  epoch: z.number().int().positive(),
  /** The row signed with the repository's key: a row anyone else added is not a token. */
  mac: z.string(),
});
const TokensFile = z.strictObject({ tokens: z.array(z.unknown()) });
type TokenRow = z.infer<typeof TokenRow>;

const Epochs = z.strictObject({ issued: z.number().int().nonnegative(), revoked: z.number().int().nonnegative() });
type Epochs = z.infer<typeof Epochs>;

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

const rowMac = (key: Buffer, r: Omit<TokenRow, 'mac'>) =>
  sign(key, 'tron serve token', r.name, r.sha256, String(r.created), String(r.epoch));

/** The marks of the repository's tokens, kept outside it: `issued` and `revoked` only go up. */
export const epochsFile = (repo: string): string => join(repoStateDir(repo), 'serve-tokens.json');

function readRows(repo: string): TokenRow[] {
  const file = join(repo, TOKENS_FILE);
  if (!existsSync(file)) return [];
  try {
    // A row of another shape is no token, like one tron did not sign.
    return TokensFile.parse(JSON.parse(readFileSync(file, 'utf8'))).tokens.flatMap((r) => TokenRow.safeParse(r).data ?? []);
  } catch {
    // A file that does not read lets nobody in; the next issue rewrites it.
    return [];
  }
}

/** No record yet: nothing was issued, so no row counts. */
function readEpochs(repo: string): Epochs {
  try {
    const e = Epochs.parse(JSON.parse(readFileSync(epochsFile(repo), 'utf8')));
    return { issued: e.issued, revoked: Math.min(e.revoked, e.issued) };
  } catch {
    return { issued: 0, revoked: 0 };
  }
}

/** Raises the marks to at least `e` (another tron serve may have raised them further meanwhile). */
function raiseEpochs(repo: string, e: Partial<Epochs>): void {
  const now = readEpochs(repo);
  const next = { issued: Math.max(now.issued, e.issued ?? 0), revoked: Math.max(now.revoked, e.revoked ?? 0) };
  if (next.issued === now.issued && next.revoked === now.revoked) return;
  const file = epochsFile(repo);
  mkdirSync(repoStateDir(repo), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(next)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

function writeRows(repo: string, rows: TokenRow[]): void {
  const dir = join(repo, '.tron', 'serve');
  mkdirSync(dir, { recursive: true });
  // The folder ignores itself, whatever the repository's .gitignore says.
  if (!existsSync(join(dir, '.gitignore'))) writeFileSync(join(dir, '.gitignore'), '*\n');
  const tmp = join(dir, '.tokens.json.tmp');
  writeFileSync(tmp, `${JSON.stringify({ tokens: rows }, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, join(repo, TOKENS_FILE));
}

/** The rows that count: signed by tron, with an epoch above the revocation mark and not past the last issued. */
function liveRows(repo: string, key: Buffer | undefined, e: Epochs): TokenRow[] {
  if (!key) return [];
  const rows = readRows(repo).filter((r) => r.epoch > e.revoked && r.epoch <= e.issued && r.mac === rowMac(key, r));
  return rows.sort((a, b) => a.epoch - b.epoch);
}

/** Whether `rows` are exactly epochs from..to, one each. */
const runOf = (rows: TokenRow[], from: number, to: number) => rows.length === to - from + 1 && rows.every((r, i) => r.epoch === from + i);

/** Whether what the file holds is what tron wrote: every epoch revoked+1 … issued, once. */
const settled = (rows: TokenRow[], e: Epochs): boolean => runOf(rows, e.revoked + 1, e.issued);

/** Mutations of the rows and marks, one process at a time (they are quick: a few ms). */
function locked<T>(repo: string, work: () => T): T {
  mkdirSync(repoStateDir(repo), { recursive: true, mode: 0o700 });
  const path = join(repoStateDir(repo), 'serve-tokens.lock');
  let lock: Lock | undefined;
  for (let waited = 0; !lock; waited += 10) {
    try {
      lock = acquireLock(path, { purpose: 'tron serve tokens' });
    } catch (err) {
      if (!(err instanceof LockHeldError) || waited > 5000) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
  try {
    return work();
  } finally {
    lock.release();
  }
}

/**
 * Makes the marks agree with the file, recording every row removed from it as revoked,
 * adds `add` if given, and returns the rows that count. Rows removed from the oldest end
 * only raise the mark; a row removed from the middle raises it past everything, and the
 * rows that stay are signed again under new epochs (their tokens keep working). The steps
 * are ordered so that a crash between any two leaves no removed row alive and reuses no
 * epoch: new epochs are taken first, then the file is written, then the mark raised.
 */
function settle(repo: string, key: Buffer, add?: Omit<TokenRow, 'mac' | 'epoch'>): TokenRow[] {
  const e = readEpochs(repo);
  const live = liveRows(repo, key, e);
  const signed = (r: Omit<TokenRow, 'mac' | 'epoch'>, epoch: number): TokenRow => {
    const row = { name: r.name, sha256: r.sha256, created: r.created, epoch };
    return { ...row, mac: rowMac(key, row) };
  };
  // The newest rows, unbroken up to the last issued: they stay as they are.
  const tail = runOf(live, e.issued - live.length + 1, e.issued);
  let rows: TokenRow[];
  if (tail) rows = [...live, ...(add ? [signed(add, e.issued + 1)] : [])].slice(-KEEP);
  else {
    const once = [...new Map(live.map((r) => [r.sha256, r])).values()];
    rows = [...once, ...(add ? [add] : [])].slice(-KEEP).map((r, i) => signed(r, e.issued + 1 + i));
  }
  const issued = Math.max(e.issued, rows.at(-1)?.epoch ?? 0);
  if (!tail || add) {
    raiseEpochs(repo, { issued });
    writeRows(repo, rows);
  }
  raiseEpochs(repo, { revoked: (rows[0]?.epoch ?? issued + 1) - 1 });
  return rows;
}

/** Makes a new token named `name`, stores its hash, and returns the token itself (shown once, never stored). */
export function issueToken(repo: string, name: string, now: number): string {
  const token = randomBytes(32).toString('base64url');
  const key = repoKey(repo, { create: true }).key;
  locked(repo, () => settle(repo, key, { name, sha256: sha256(token), created: now }));
  return token;
}

/** Checks bearer tokens against the stored hashes (re-read when the file or the marks change) and the environment's token. */
export class TokenCheck {
  private rows: TokenRow[] = [];
  private seen = '';
  private readonly envHash: string | undefined;

  constructor(
    private readonly repo: string,
    envToken: string | undefined,
  ) {
    this.envHash = envToken ? sha256(envToken) : undefined;
  }

  /** The token's name when `header` carries a valid `Bearer TOKEN`, else undefined. */
  who(header: string | undefined): string | undefined {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
    if (!m) return undefined;
    const hash = Buffer.from(sha256(m[1]!), 'hex');
    if (this.envHash && timingSafeEqual(hash, Buffer.from(this.envHash, 'hex'))) return 'env';
    this.reload();
    for (const row of this.rows) if (timingSafeEqual(hash, Buffer.from(row.sha256, 'hex'))) return row.name;
    return undefined;
  }

  private stamp(): string {
    return [join(this.repo, TOKENS_FILE), epochsFile(this.repo)]
      .map((file) => {
        try {
          const s = statSync(file);
          return `${s.mtimeMs}:${s.size}:${s.ino}`;
        } catch {
          return 'none';
        }
      })
      .join('|');
  }

  private reload(): void {
    const stamp = this.stamp();
    if (stamp === this.seen) return;
    const key = repoKey(this.repo)?.key;
    // A worker without a sandbox could write the file; only rows tron signed, and not revoked, let anyone in.
    const e = readEpochs(this.repo);
    const live = liveRows(this.repo, key, e);
    // A row gone from the file is revoked for good, as soon as tron sees it gone.
    this.rows = key && !settled(live, e) ? locked(this.repo, () => settle(this.repo, key)) : live;
    this.seen = this.stamp();
  }
}
